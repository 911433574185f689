import { badRequest, notFound } from '../shared/index.js';
import { foldCampaignStats } from '../store/index.js';
import { compact, iso, paging, requireApplication, type ListQuery, type ManagementContext, type Principal } from './context.js';

export interface CampaignBody {
  name: string;
  description?: string;
  startTime?: string;
  endTime?: string;
  attributes?: Record<string, unknown>;
  state?: 'enabled' | 'disabled' | 'archived';
  activeRulesetId?: number;
  tags?: string[];
  features?: string[];
  couponSettings?: Record<string, unknown>;
  referralSettings?: Record<string, unknown>;
  limits?: unknown[];
  campaignGroups?: number[] | null;
  reevaluateOnReturn?: boolean;
}

export function campaignView(r: Record<string, unknown>): Record<string, unknown> {
  return compact({
    id: r.id as number,
    created: iso(r.created),
    updated: iso(r.updated),
    applicationId: r.application_id as number,
    userId: (r.user_id as number | null) ?? undefined,
    name: r.name as string,
    description: r.description as string,
    startTime: iso(r.start_time),
    endTime: iso(r.end_time),
    attributes: r.attributes as Record<string, unknown>,
    state: r.state as string,
    activeRulesetId: (r.active_ruleset_id as number | null) ?? undefined,
    tags: r.tags as string[],
    features: r.features as string[],
    couponSettings: (r.coupon_settings as Record<string, unknown> | null) ?? undefined,
    referralSettings: (r.referral_settings as Record<string, unknown> | null) ?? undefined,
    limits: r.limits as unknown[],
    campaignGroups: (r.campaign_groups as number[] | null) ?? null,
    reevaluateOnReturn: r.reevaluate_on_return as boolean,
    couponRedemptionCount: r.coupon_redemption_count as number,
    referralRedemptionCount: r.referral_redemption_count as number,
    discountCount: Number(r.discount_count),
    discountEffectCount: r.discount_effect_count as number,
    couponCreationCount: r.coupon_creation_count as number,
    lastActivity: iso(r.last_activity),
    createdBy: r.created_by as string,
    updatedBy: r.updated_by as string,
  });
}

function checkWindow(body: CampaignBody): void {
  if (body.startTime && body.endTime && new Date(body.endTime) <= new Date(body.startTime)) {
    throw badRequest('`endTime` must be after `startTime`', '/endTime');
  }
}

async function userName(ctx: ManagementContext, principal: Principal): Promise<string> {
  const [u] = await ctx.db.query<{ name: string; email: string }>(`SELECT name, email FROM users WHERE id = $1`, [principal.userId]);
  return u ? u.name || u.email : '';
}

async function checkRulesetOfCampaign(ctx: ManagementContext, campaignId: number, rulesetId: number): Promise<void> {
  const rows = await ctx.db.query(`SELECT 1 FROM rulesets WHERE id = $1 AND campaign_id = $2`, [rulesetId, campaignId]);
  if (rows.length === 0) throw badRequest('`activeRulesetId` is not a ruleset of this campaign', '/activeRulesetId');
}

export async function createCampaign(ctx: ManagementContext, principal: Principal, applicationId: number, body: CampaignBody) {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  checkWindow(body);
  if (body.activeRulesetId !== undefined) throw badRequest('A new campaign has no ruleset yet; create one with activate=true', '/activeRulesetId');
  const by = await userName(ctx, principal);
  const now = ctx.clock.now().toISOString();
  const [row] = await ctx.db.query(
    `INSERT INTO campaigns (application_id, user_id, name, description, start_time, end_time, attributes, state, tags, features,
       coupon_settings, referral_settings, limits, campaign_groups, created_by, updated_by, created, updated, reevaluate_on_return)
     VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9::jsonb, $10::jsonb, $11::jsonb, $12::jsonb, $13::jsonb, $14::jsonb, $15, $15, $16, $16, $17)
     RETURNING *`,
    [
      applicationId,
      principal.userId,
      body.name,
      body.description ?? '',
      body.startTime ?? null,
      body.endTime ?? null,
      JSON.stringify(body.attributes ?? {}),
      body.state ?? 'enabled',
      JSON.stringify(body.tags ?? []),
      JSON.stringify(body.features ?? []),
      body.couponSettings ? JSON.stringify(body.couponSettings) : null,
      body.referralSettings ? JSON.stringify(body.referralSettings) : null,
      JSON.stringify(body.limits ?? []),
      body.campaignGroups ? JSON.stringify(body.campaignGroups) : null,
      by,
      now,
      body.reevaluateOnReturn ?? false,
    ],
  );
  ctx.events.publish({ kind: 'campaigns', applicationId });
  return campaignView(row!);
}

export async function listCampaigns(ctx: ManagementContext, principal: Principal, applicationId: number, query: ListQuery) {
  await requireApplication(ctx.db, principal, applicationId, 'read');
  await foldCampaignStats(ctx.db, applicationId);
  const { clause } = paging(query, { id: 'id', name: 'name', created: 'created', updated: 'updated', state: 'state' });
  const rows = await ctx.db.query(`SELECT * FROM campaigns WHERE application_id = $1 ${clause}`, [applicationId]);
  const [count] = await ctx.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM campaigns WHERE application_id = $1`, [applicationId]);
  return { totalResultSize: count!.n, data: rows.map(campaignView) };
}

export async function requireCampaign(ctx: ManagementContext, applicationId: number, campaignId: number): Promise<Record<string, unknown>> {
  const [row] = await ctx.db.query(`SELECT * FROM campaigns WHERE id = $1 AND application_id = $2`, [campaignId, applicationId]);
  if (!row) throw notFound('Campaign', '/campaignId');
  return row;
}

export async function getCampaign(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number) {
  await requireApplication(ctx.db, principal, applicationId, 'read');
  await foldCampaignStats(ctx.db, applicationId);
  return campaignView(await requireCampaign(ctx, applicationId, campaignId));
}

export async function updateCampaign(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, body: CampaignBody) {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  await requireCampaign(ctx, applicationId, campaignId);
  checkWindow(body);
  if (body.activeRulesetId !== undefined) await checkRulesetOfCampaign(ctx, campaignId, body.activeRulesetId);
  const [row] = await ctx.db.query(
    `UPDATE campaigns SET name = $3, description = COALESCE($4, description), start_time = $5, end_time = $6,
       attributes = COALESCE($7::jsonb, attributes), state = COALESCE($8, state), tags = COALESCE($9::jsonb, tags),
       features = COALESCE($10::jsonb, features), coupon_settings = COALESCE($11::jsonb, coupon_settings),
       referral_settings = COALESCE($12::jsonb, referral_settings), limits = COALESCE($13::jsonb, limits),
       active_ruleset_id = COALESCE($14, active_ruleset_id), updated_by = $15, updated = $16,
       reevaluate_on_return = COALESCE($17, reevaluate_on_return)
     WHERE id = $1 AND application_id = $2 RETURNING *`,
    [
      campaignId,
      applicationId,
      body.name,
      body.description ?? null,
      body.startTime ?? null,
      body.endTime ?? null,
      body.attributes ? JSON.stringify(body.attributes) : null,
      body.state ?? null,
      body.tags ? JSON.stringify(body.tags) : null,
      body.features ? JSON.stringify(body.features) : null,
      body.couponSettings ? JSON.stringify(body.couponSettings) : null,
      body.referralSettings ? JSON.stringify(body.referralSettings) : null,
      body.limits ? JSON.stringify(body.limits) : null,
      body.activeRulesetId ?? null,
      await userName(ctx, principal),
      ctx.clock.now().toISOString(),
      body.reevaluateOnReturn ?? null,
    ],
  );
  ctx.events.publish({ kind: 'campaigns', applicationId });
  return campaignView(row!);
}

export async function deleteCampaign(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number): Promise<void> {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  const rows = await ctx.db.query(`DELETE FROM campaigns WHERE id = $1 AND application_id = $2 RETURNING id`, [campaignId, applicationId]);
  if (rows.length === 0) throw notFound('Campaign', '/campaignId');
  ctx.events.publish({ kind: 'campaigns', applicationId });
}
