import { checkRuleset, type RulesetSpec } from '../engine/index.js';
import { AppError, notFound } from '../shared/index.js';
import { requireCampaign } from './campaigns.js';
import { compact, iso, paging, requireApplication, type ListQuery, type ManagementContext, type Principal } from './context.js';

export interface RulesetBody extends RulesetSpec {
  rbVersion?: string;
  activate?: boolean;
}

function rulesetView(r: Record<string, unknown>, activeRulesetId: number | null): Record<string, unknown> {
  return compact({
    id: r.id as number,
    created: iso(r.created),
    campaignId: r.campaign_id as number,
    userId: (r.user_id as number | null) ?? undefined,
    rules: r.rules as unknown[],
    bindings: r.bindings as unknown[],
    rbVersion: r.rb_version as string,
    activate: activeRulesetId === r.id,
    activatedAt: iso(r.activated_at),
  });
}

/** Creates a ruleset after compiling it: a ruleset that does not compile is refused here, never at request time. */
export async function createRuleset(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, body: RulesetBody) {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  await requireCampaign(ctx, applicationId, campaignId);
  const issues = checkRuleset({ rules: body.rules, bindings: body.bindings });
  if (issues.length > 0) {
    throw new AppError(
      'invalid_argument',
      `The ruleset does not compile: ${issues[0]!.message}`,
      issues.map((i) => ({
        title: 'RulesetCompileError',
        details: i.ruleIndex !== undefined ? `rule ${i.ruleIndex}: ${i.message}` : i.message,
        source: { pointer: i.pointer },
      })),
    );
  }
  const now = ctx.clock.now().toISOString();
  const result = await ctx.db.transaction(async (tx) => {
    const [row] = await tx.query(
      `INSERT INTO rulesets (campaign_id, user_id, rules, bindings, rb_version, activated_at, created)
       VALUES ($1, $2, $3::jsonb, $4::jsonb, $5, $6, $7) RETURNING *`,
      [campaignId, principal.userId, JSON.stringify(body.rules), JSON.stringify(body.bindings), body.rbVersion ?? 'v2', body.activate ? now : null, now],
    );
    if (body.activate) {
      await tx.query(`UPDATE campaigns SET active_ruleset_id = $2, updated = $3 WHERE id = $1`, [campaignId, row!.id, now]);
    }
    return row!;
  });
  if (body.activate) ctx.events.publish({ kind: 'campaigns', applicationId });
  return rulesetView(result, body.activate ? (result.id as number) : null);
}

export async function listRulesets(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, query: ListQuery) {
  await requireApplication(ctx.db, principal, applicationId, 'read');
  const campaign = await requireCampaign(ctx, applicationId, campaignId);
  const { clause } = paging(query, { id: 'id', created: 'created' });
  const rows = await ctx.db.query(`SELECT * FROM rulesets WHERE campaign_id = $1 ${clause}`, [campaignId]);
  const [count] = await ctx.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM rulesets WHERE campaign_id = $1`, [campaignId]);
  const active = (campaign.active_ruleset_id as number | null) ?? null;
  return { totalResultSize: count!.n, data: rows.map((r) => rulesetView(r, active)) };
}

export async function getRuleset(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, rulesetId: number) {
  await requireApplication(ctx.db, principal, applicationId, 'read');
  const campaign = await requireCampaign(ctx, applicationId, campaignId);
  const [row] = await ctx.db.query(`SELECT * FROM rulesets WHERE id = $1 AND campaign_id = $2`, [rulesetId, campaignId]);
  if (!row) throw notFound('Ruleset', '/rulesetId');
  return rulesetView(row, (campaign.active_ruleset_id as number | null) ?? null);
}
