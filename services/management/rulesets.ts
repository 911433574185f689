import { checkRuleset, type RulesetSpec } from '../engine/index.js';
import { AppError, notFound } from '../shared/index.js';
import type { Queryable } from '../store/index.js';
import { notifyCampaign } from './campaign-notifications.js';
import { campaignView, requireCampaign } from './campaigns.js';
import { compact, iso, listPage, outboundWritten, requireApplication, type ListQuery, type ManagementContext, type Principal } from './context.js';

export interface RulesetBody extends RulesetSpec {
  rbVersion?: string;
  activate?: boolean;
}

export function rulesetView(r: Record<string, unknown>, activeRulesetId: number | null): Record<string, unknown> {
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

/** Refuses a ruleset that does not compile: compile errors are found here, never at request time. */
function requireCompiles(body: RulesetBody): void {
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
}

/**
 * campaign_ruleset_changed: the campaign's active ruleset became `ruleset` (null: none) from
 * `oldRuleset`, in the caller's transaction after the campaign row was written. Returns the
 * requests written.
 */
async function notifyRulesetChanged(
  tx: Queryable,
  principal: Principal,
  applicationId: number,
  campaignId: number,
  oldRuleset: Record<string, unknown> | null,
  ruleset: Record<string, unknown> | null,
  now: Date,
): Promise<number> {
  const [campaign] = await tx.query(`SELECT * FROM campaigns WHERE id = $1`, [campaignId]);
  const view = (r: Record<string, unknown> | null) => (r ? rulesetView(r, r.id as number) : null);
  return notifyCampaign(
    tx,
    { accountId: principal.accountId, applicationId },
    campaignId,
    [{ Event: 'campaign_ruleset_changed', campaign: campaignView(campaign!), oldRuleset: view(oldRuleset), ruleset: view(ruleset) }],
    now,
  );
}

/** The campaign's active ruleset row, the campaign row locked (a racing activation waits). */
async function lockActiveRuleset(tx: Queryable, applicationId: number, campaignId: number): Promise<{ activeId: number | null; active: Record<string, unknown> | null }> {
  const [campaign] = await tx.query<{ active_ruleset_id: number | null }>(
    `SELECT active_ruleset_id FROM campaigns WHERE id = $1 AND application_id = $2 FOR UPDATE`,
    [campaignId, applicationId],
  );
  if (!campaign) throw notFound('Campaign', '/campaignId');
  const activeId = campaign.active_ruleset_id;
  const [active] = activeId === null ? [] : await tx.query(`SELECT * FROM rulesets WHERE id = $1`, [activeId]);
  return { activeId, active: active ?? null };
}

export async function createRuleset(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, body: RulesetBody) {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  await requireCampaign(ctx, applicationId, campaignId);
  requireCompiles(body);
  const at = ctx.clock.now();
  const now = at.toISOString();
  const { result, sent } = await ctx.db.transaction(async (tx) => {
    const before = body.activate ? await lockActiveRuleset(tx, applicationId, campaignId) : undefined;
    const [row] = await tx.query(
      `INSERT INTO rulesets (campaign_id, user_id, rules, bindings, rb_version, activated_at, created)
       VALUES ($1, $2, $3::jsonb, $4::jsonb, $5, $6, $7) RETURNING *`,
      [campaignId, principal.userId, JSON.stringify(body.rules), JSON.stringify(body.bindings), body.rbVersion ?? 'v2', body.activate ? now : null, now],
    );
    let sent = 0;
    if (before) {
      await tx.query(`UPDATE campaigns SET active_ruleset_id = $2, updated = $3 WHERE id = $1`, [campaignId, row!.id, now]);
      sent = await notifyRulesetChanged(tx, principal, applicationId, campaignId, before.active, row!, at);
    }
    return { result: row!, sent };
  });
  if (body.activate) ctx.events.publish({ kind: 'campaigns', applicationId });
  outboundWritten(ctx, sent);
  return rulesetView(result, body.activate ? (result.id as number) : null);
}

export async function listRulesets(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, query: ListQuery) {
  await requireApplication(ctx.db, principal, applicationId, 'read');
  const campaign = await requireCampaign(ctx, applicationId, campaignId);
  const active = (campaign.active_ruleset_id as number | null) ?? null;
  return listPage(
    ctx.db,
    {
      from: `FROM rulesets WHERE campaign_id = $1`,
      params: [campaignId],
      query,
      sortable: { id: 'id', created: 'created', activatedAt: 'activated_at' },
      withTotal: true,
    },
    (r) => rulesetView(r, active),
  );
}

export async function getRuleset(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, rulesetId: number) {
  await requireApplication(ctx.db, principal, applicationId, 'read');
  const campaign = await requireCampaign(ctx, applicationId, campaignId);
  const [row] = await ctx.db.query(`SELECT * FROM rulesets WHERE id = $1 AND campaign_id = $2`, [rulesetId, campaignId]);
  if (!row) throw notFound('Ruleset', '/rulesetId');
  return rulesetView(row, (campaign.active_ruleset_id as number | null) ?? null);
}

/**
 * Replaces a ruleset's rules and bindings (compile-checked like a new one). `activate: true` makes
 * it the campaign's active ruleset, `activate: false` deactivates it if it is the active one (the
 * campaign becomes a draft), no `activate` leaves the activation alone. The campaign row is locked
 * so that a racing activation of another ruleset cannot be undone by a stale read.
 */
export async function updateRuleset(
  ctx: ManagementContext,
  principal: Principal,
  applicationId: number,
  campaignId: number,
  rulesetId: number,
  body: RulesetBody,
) {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  await requireCampaign(ctx, applicationId, campaignId);
  requireCompiles(body);
  const at = ctx.clock.now();
  const now = at.toISOString();
  const { row, active, sent } = await ctx.db.transaction(async (tx) => {
    const before = await lockActiveRuleset(tx, applicationId, campaignId);
    const [updated] = await tx.query(
      `UPDATE rulesets SET rules = $3::jsonb, bindings = $4::jsonb, rb_version = COALESCE($5, rb_version),
         activated_at = CASE WHEN $6::boolean THEN $7::timestamptz ELSE activated_at END
        WHERE id = $1 AND campaign_id = $2 RETURNING *`,
      [rulesetId, campaignId, JSON.stringify(body.rules), JSON.stringify(body.bindings), body.rbVersion ?? null, body.activate === true, now],
    );
    if (!updated) throw notFound('Ruleset', '/rulesetId');
    let activeId = before.activeId;
    if (body.activate === true) activeId = rulesetId;
    else if (body.activate === false && activeId === rulesetId) activeId = null;
    await tx.query(`UPDATE campaigns SET active_ruleset_id = $2, updated = $3 WHERE id = $1`, [campaignId, activeId, now]);
    // The rules the campaign runs changed: another ruleset became active, none is, or the active one was rewritten.
    const changed = activeId !== before.activeId || activeId === rulesetId;
    const sent = changed ? await notifyRulesetChanged(tx, principal, applicationId, campaignId, before.active, activeId === null ? null : updated, at) : 0;
    return { row: updated, active: activeId, sent };
  });
  ctx.events.publish({ kind: 'campaigns', applicationId });
  outboundWritten(ctx, sent);
  return rulesetView(row, active);
}

/** Deletes a ruleset; when it was the active one the campaign is left without one (draft). */
export async function deleteRuleset(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, rulesetId: number): Promise<void> {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  await requireCampaign(ctx, applicationId, campaignId);
  const at = ctx.clock.now();
  const sent = await ctx.db.transaction(async (tx) => {
    const before = await lockActiveRuleset(tx, applicationId, campaignId);
    const rows = await tx.query(`DELETE FROM rulesets WHERE id = $1 AND campaign_id = $2 RETURNING id`, [rulesetId, campaignId]);
    if (rows.length === 0) throw notFound('Ruleset', '/rulesetId');
    if (before.activeId !== rulesetId) return 0;
    await tx.query(`UPDATE campaigns SET active_ruleset_id = NULL, updated = $2 WHERE id = $1`, [campaignId, at.toISOString()]);
    return notifyRulesetChanged(tx, principal, applicationId, campaignId, before.active, null, at);
  });
  ctx.events.publish({ kind: 'campaigns', applicationId });
  outboundWritten(ctx, sent);
}
