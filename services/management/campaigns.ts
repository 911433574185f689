import { AppError, badRequest, notFound } from '../shared/index.js';
import { foldCampaignStats, type Queryable } from '../store/index.js';
import {
  advanceEvaluationTree,
  evaluationPosition,
  lockEvaluationTree,
  notifyCampaign,
  notifyEvaluationTreeChanged,
  type CampaignEvent,
  type EvaluationTree,
} from './campaign-notifications.js';
import { compact, iso, listPage, outboundWritten, requireApplication, userName, type ListQuery, type ManagementContext, type Principal } from './context.js';
import { rulesetView } from './rulesets.js';

export interface CampaignBody {
  name: string;
  description?: string;
  startTime?: string | null;
  endTime?: string | null;
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

function checkWindow(window: { startTime?: string | null; endTime?: string | null }): void {
  if (window.startTime && window.endTime && new Date(window.endTime) <= new Date(window.startTime)) {
    throw badRequest('`endTime` must be after `startTime`', '/endTime');
  }
}

/**
 * The Application's `attributesSettings.mandatory.campaigns`: attributes every campaign must carry.
 * A missing one is refused like a missing body property, on its would-be pointer.
 */
function checkMandatory(app: Record<string, unknown>, attributes: Record<string, unknown> | undefined): void {
  const names = (app.attributes_settings as { mandatory?: { campaigns?: unknown } } | null | undefined)?.mandatory?.campaigns;
  if (!Array.isArray(names)) return;
  for (const name of names) {
    if (typeof name === 'string' && (attributes === undefined || !Object.hasOwn(attributes, name) || attributes[name] === undefined)) {
      throw badRequest(`The Application requires the campaign attribute ${JSON.stringify(name)}`, `/attributes/${name.replace(/~/g, '~0').replace(/\//g, '~1')}`);
    }
  }
}

/** The campaign's active ruleset as notifications show it (null for a draft). */
export async function activeRuleset(db: Queryable, campaign: Record<string, unknown>): Promise<Record<string, unknown> | null> {
  if (campaign.active_ruleset_id == null) return null;
  const [row] = await db.query(`SELECT * FROM rulesets WHERE id = $1`, [campaign.active_ruleset_id]);
  return row ? rulesetView(row, row.id as number) : null;
}

async function checkRulesetOfCampaign(ctx: ManagementContext, campaignId: number, rulesetId: number): Promise<void> {
  const rows = await ctx.db.query(`SELECT 1 FROM rulesets WHERE id = $1 AND campaign_id = $2`, [rulesetId, campaignId]);
  if (rows.length === 0) throw badRequest('`activeRulesetId` is not a ruleset of this campaign', '/activeRulesetId');
}

export async function createCampaign(ctx: ManagementContext, principal: Principal, applicationId: number, body: CampaignBody) {
  const app = await requireApplication(ctx.db, principal, applicationId, 'write');
  checkWindow(body);
  checkMandatory(app, body.attributes);
  if (body.activeRulesetId !== undefined) throw badRequest('A new campaign has no ruleset yet; create one with activate=true', '/activeRulesetId');
  const by = await userName(ctx.db, principal);
  const at = ctx.clock.now();
  const now = at.toISOString();
  const notified = { accountId: principal.accountId, applicationId };
  const { row, sent } = await ctx.db.transaction(async (tx) => {
    const tree = await lockEvaluationTree(tx, applicationId, at);
    const [row] = await tx.query(
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
    const change = await advanceEvaluationTree(tx, tree, by, at);
    const event: CampaignEvent = {
      Event: 'campaign_created',
      campaign: campaignView(row!),
      ruleset: null,
      evaluationPosition: evaluationPosition(change?.tree ?? tree, row!.id as number),
    };
    const sent = (await notifyCampaign(tx, notified, row!.id as number, [event], at)) + (await notifyEvaluationTreeChanged(tx, notified, change, at));
    return { row: row!, sent };
  });
  ctx.events.publish({ kind: 'campaigns', applicationId });
  outboundWritten(ctx, sent);
  return campaignView(row);
}

export const campaignListStates = ['draft', 'scheduled', 'running', 'expired', 'disabled', 'archived'] as const;
export type CampaignListState = (typeof campaignListStates)[number];

export interface CampaignListQuery extends ListQuery {
  campaignState?: CampaignListState;
  name?: string;
  tags?: string;
  createdBefore?: string;
  createdAfter?: string;
  campaignGroupId?: number;
}

/**
 * The list state of a campaign (addendum), `$now` being the parameter holding the current time.
 * Exactly one applies, first match wins: what the user set (archived, disabled) says more than
 * the missing ruleset (draft), and a campaign without a ruleset is a draft whatever its window;
 * then the window decides (expired, scheduled, running), with the bounds the evaluation uses
 * (running while startTime <= now < endTime).
 */
const listStateSql = (now: string) => `CASE
    WHEN state = 'archived' THEN 'archived'
    WHEN state = 'disabled' THEN 'disabled'
    WHEN active_ruleset_id IS NULL THEN 'draft'
    WHEN end_time IS NOT NULL AND end_time <= ${now}::timestamptz THEN 'expired'
    WHEN start_time IS NOT NULL AND start_time > ${now}::timestamptz THEN 'scheduled'
    ELSE 'running' END`;

const campaignSortable = {
  id: 'id',
  name: 'name',
  created: 'created',
  updated: 'updated',
  state: 'state',
  startTime: 'start_time',
  endTime: 'end_time',
};

/** `FROM campaigns WHERE ...` of a campaign list with the spec's filters, every value a parameter. */
function campaignFilters(ctx: ManagementContext, applicationId: number, query: CampaignListQuery, extra: { attributes?: Record<string, unknown> } = {}) {
  const params: unknown[] = [applicationId];
  const param = (v: unknown): string => {
    params.push(v);
    return `$${params.length}`;
  };
  const where = ['application_id = $1'];
  if (query.campaignState) where.push(`${listStateSql(param(ctx.clock.now().toISOString()))} = ${param(query.campaignState)}`);
  // The spec: `tags` is OR-ed with `name`; either alone filters by itself.
  const byName = query.name !== undefined ? `strpos(lower(name), lower(${param(query.name)})) > 0` : undefined;
  const byTag =
    query.tags !== undefined ? `EXISTS (SELECT 1 FROM jsonb_array_elements_text(tags) t WHERE lower(t) = lower(${param(query.tags)}))` : undefined;
  if (byName && byTag) where.push(`(${byName} OR ${byTag})`);
  else if (byName ?? byTag) where.push((byName ?? byTag)!);
  if (query.createdBefore) where.push(`created < ${param(query.createdBefore)}::timestamptz`);
  if (query.createdAfter) where.push(`created > ${param(query.createdAfter)}::timestamptz`);
  if (query.campaignGroupId !== undefined) where.push(`campaign_groups @> to_jsonb(${param(query.campaignGroupId)}::int)`);
  // Each given key must hold exactly the given value: containment (@>) alone would also match a
  // part of a nested object or list.
  if (extra.attributes) {
    where.push(`NOT EXISTS (SELECT 1 FROM jsonb_each(${param(JSON.stringify(extra.attributes))}::jsonb) q WHERE attributes -> q.key IS DISTINCT FROM q.value)`);
  }
  return { from: `FROM campaigns WHERE ${where.join(' AND ')}`, params };
}

async function campaignList(ctx: ManagementContext, applicationId: number, query: CampaignListQuery, extra: { attributes?: Record<string, unknown> } = {}) {
  await foldCampaignStats(ctx.db, applicationId);
  const { from, params } = campaignFilters(ctx, applicationId, query, extra);
  return listPage(ctx.db, { from, params, query, sortable: campaignSortable, withTotal: true }, campaignView);
}

export async function listCampaigns(ctx: ManagementContext, principal: Principal, applicationId: number, query: CampaignListQuery) {
  await requireApplication(ctx.db, principal, applicationId, 'read');
  return campaignList(ctx, applicationId, query);
}

/** campaigns_search: campaigns whose attributes hold every given key with exactly that value (jsonb containment). */
export async function searchCampaigns(
  ctx: ManagementContext,
  principal: Principal,
  applicationId: number,
  query: CampaignListQuery,
  body: { attributes: Record<string, unknown> },
) {
  await requireApplication(ctx.db, principal, applicationId, 'read');
  return campaignList(ctx, applicationId, query, { attributes: body.attributes });
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
  const app = await requireApplication(ctx.db, principal, applicationId, 'write');
  const current = await requireCampaign(ctx, applicationId, campaignId);
  // New attributes replace the old ones whole: they must hold the mandatory ones too.
  if (body.attributes) checkMandatory(app, body.attributes);
  // A PUT that leaves out the window keeps it (a backoffice renaming or disabling a campaign must
  // not unschedule it); null removes a bound. The window checked is the one that will be stored.
  const startTime = 'startTime' in body ? (body.startTime ?? null) : (iso(current.start_time) ?? null);
  const endTime = 'endTime' in body ? (body.endTime ?? null) : (iso(current.end_time) ?? null);
  checkWindow({ startTime, endTime });
  if (body.activeRulesetId !== undefined) await checkRulesetOfCampaign(ctx, campaignId, body.activeRulesetId);
  const by = await userName(ctx.db, principal);
  const at = ctx.clock.now();
  const notified = { accountId: principal.accountId, applicationId };
  const { row, sent } = await ctx.db.transaction(async (tx) => {
    // Only a state may move the campaign in or out of the tree (archived); the tree is locked
    // before the campaign, as every change of the tree does.
    const tree = body.state !== undefined ? await lockEvaluationTree(tx, applicationId, at) : undefined;
    const [old] = await tx.query(`SELECT * FROM campaigns WHERE id = $1 AND application_id = $2 FOR UPDATE`, [campaignId, applicationId]);
    // Deleted by a racing request since it was read.
    if (!old) throw notFound('Campaign', '/campaignId');
    const [row] = await tx.query(
      `UPDATE campaigns SET name = $3, description = COALESCE($4, description), start_time = $5, end_time = $6,
         attributes = COALESCE($7::jsonb, attributes), state = COALESCE($8, state), tags = COALESCE($9::jsonb, tags),
         features = COALESCE($10::jsonb, features), coupon_settings = COALESCE($11::jsonb, coupon_settings),
         referral_settings = COALESCE($12::jsonb, referral_settings), limits = COALESCE($13::jsonb, limits),
         active_ruleset_id = COALESCE($14, active_ruleset_id), updated_by = $15, updated = $16,
         reevaluate_on_return = COALESCE($17, reevaluate_on_return),
         campaign_groups = CASE WHEN $18::boolean THEN $19::jsonb ELSE campaign_groups END
       WHERE id = $1 AND application_id = $2 RETURNING *`,
      [
        campaignId,
        applicationId,
        body.name,
        body.description ?? null,
        startTime,
        endTime,
        body.attributes ? JSON.stringify(body.attributes) : null,
        body.state ?? null,
        body.tags ? JSON.stringify(body.tags) : null,
        body.features ? JSON.stringify(body.features) : null,
        body.couponSettings ? JSON.stringify(body.couponSettings) : null,
        body.referralSettings ? JSON.stringify(body.referralSettings) : null,
        body.limits ? JSON.stringify(body.limits) : null,
        body.activeRulesetId ?? null,
        by,
        at.toISOString(),
        body.reevaluateOnReturn ?? null,
        'campaignGroups' in body,
        body.campaignGroups ? JSON.stringify(body.campaignGroups) : null,
      ],
    );
    const campaign = campaignView(row!);
    const ruleset = await activeRuleset(tx, row!);
    const events: CampaignEvent[] = [{ Event: 'campaign_edited', campaign, oldCampaign: campaignView(old), ruleset }];
    if (old.state !== row!.state) events.push({ Event: 'campaign_state_changed', campaign, ruleset, oldState: old.state as string, newState: row!.state as string });
    if (old.active_ruleset_id !== row!.active_ruleset_id) {
      events.push({ Event: 'campaign_ruleset_changed', campaign, oldRuleset: await activeRuleset(tx, old), ruleset });
    }
    let sent = await notifyCampaign(tx, notified, campaignId, events, at);
    if (tree) sent += await notifyEvaluationTreeChanged(tx, notified, await advanceEvaluationTree(tx, tree, by, at), at);
    return { row: row!, sent };
  });
  ctx.events.publish({ kind: 'campaigns', applicationId });
  outboundWritten(ctx, sent);
  return campaignView(row);
}

export interface CampaignCopyBody {
  applicationIds: number[];
  name?: string;
}

/** requireApplication for an Application named in a body, so the error points at the body item. */
async function requireTarget(db: Queryable, principal: Principal, applicationId: number, pointer: string): Promise<Record<string, unknown>> {
  try {
    return await requireApplication(db, principal, applicationId, 'write');
  } catch (e) {
    if (!(e instanceof AppError)) throw e;
    throw new AppError(e.kind, e.message, [{ title: e.errors[0]?.title ?? e.message, details: e.message, source: { pointer } }]);
  }
}

/**
 * Copies a campaign into other Applications (or its own), with its active ruleset activated in
 * each copy. All copies are made in one transaction, after every target was checked, so a target
 * the caller may not write leaves nothing behind. Statistics start at zero and campaign groups are
 * not copied: both belong to the source Application.
 */
export async function copyCampaignToApplications(
  ctx: ManagementContext,
  principal: Principal,
  applicationId: number,
  campaignId: number,
  body: CampaignCopyBody,
) {
  await requireApplication(ctx.db, principal, applicationId, 'read');
  const source = await requireCampaign(ctx, applicationId, campaignId);
  for (const [i, target] of body.applicationIds.entries()) {
    const app = await requireTarget(ctx.db, principal, target, `/applicationIds/${i}`);
    // The copy must carry what its Application requires, like a campaign created there.
    try {
      checkMandatory(app, source.attributes as Record<string, unknown>);
    } catch (e) {
      if (!(e instanceof AppError)) throw e;
      throw badRequest(`${e.message}, which the campaign does not carry`, `/applicationIds/${i}`);
    }
  }
  const [ruleset] = source.active_ruleset_id
    ? await ctx.db.query(`SELECT * FROM rulesets WHERE id = $1 AND campaign_id = $2`, [source.active_ruleset_id, campaignId])
    : [];
  const by = await userName(ctx.db, principal);
  const at = ctx.clock.now();
  const now = at.toISOString();
  const { copies, sent } = await ctx.db.transaction(async (tx) => {
    // A target deleted since it was checked would otherwise surface as a foreign-key error.
    const held = await tx.query(`SELECT id FROM applications WHERE id = ANY($1::int[]) FOR KEY SHARE`, [body.applicationIds]);
    if (held.length !== body.applicationIds.length) {
      const gone = body.applicationIds.findIndex((id) => !held.some((h) => h.id === id));
      throw notFound('Application', `/applicationIds/${gone}`);
    }
    // Trees in the order of their Applications, so that two copies into the same ones cannot deadlock.
    const trees = new Map<number, EvaluationTree>();
    for (const target of [...new Set(body.applicationIds)].sort((a, b) => a - b)) trees.set(target, await lockEvaluationTree(tx, target, at));
    const out: Array<{ target: number; row: Record<string, unknown> }> = [];
    for (const target of body.applicationIds) {
      const [copy] = await tx.query(
        `INSERT INTO campaigns (application_id, user_id, name, description, start_time, end_time, attributes, state, tags, features,
           coupon_settings, referral_settings, limits, campaign_groups, created_by, updated_by, created, updated, reevaluate_on_return)
         SELECT $2, $3, COALESCE($4, name), description, start_time, end_time, attributes, state, tags, features,
           coupon_settings, referral_settings, limits, NULL, $5, $5, $6, $6, reevaluate_on_return
           FROM campaigns WHERE id = $1
         RETURNING *`,
        [campaignId, target, principal.userId, body.name ?? null, by, now],
      );
      // Deleted since it was read: nothing is copied.
      if (!copy) throw notFound('Campaign', '/campaignId');
      let row = copy;
      if (ruleset) {
        const [rs] = await tx.query<{ id: number }>(
          `INSERT INTO rulesets (campaign_id, user_id, rules, bindings, rb_version, activated_at, created)
           VALUES ($1, $2, $3::jsonb, $4::jsonb, $5, $6, $6) RETURNING id`,
          [row.id, principal.userId, JSON.stringify(ruleset.rules), JSON.stringify(ruleset.bindings), ruleset.rb_version, now],
        );
        row = (await tx.query(`UPDATE campaigns SET active_ruleset_id = $2 WHERE id = $1 RETURNING *`, [row.id, rs!.id]))[0]!;
      }
      out.push({ target, row });
    }
    let sent = 0;
    for (const [target, tree] of trees) {
      const notified = { accountId: principal.accountId, applicationId: target };
      const change = await advanceEvaluationTree(tx, tree, by, at);
      for (const { row } of out.filter((o) => o.target === target)) {
        const id = row.id as number;
        const event: CampaignEvent = {
          Event: 'campaign_created',
          campaign: campaignView(row),
          ruleset: await activeRuleset(tx, row),
          evaluationPosition: evaluationPosition(change?.tree ?? tree, id),
        };
        sent += await notifyCampaign(tx, notified, id, [event], at);
      }
      sent += await notifyEvaluationTreeChanged(tx, notified, change, at);
    }
    return { copies: out.map((o) => o.row), sent };
  });
  for (const target of new Set(body.applicationIds)) ctx.events.publish({ kind: 'campaigns', applicationId: target });
  outboundWritten(ctx, sent);
  return { totalResultSize: copies.length, data: copies.map(campaignView) };
}

export async function deleteCampaign(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number): Promise<void> {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  const by = await userName(ctx.db, principal);
  const notified = { accountId: principal.accountId, applicationId };
  // In a transaction, which is run again after a deadlock: the cascade to rulesets, coupons and
  // referrals takes their locks in the opposite order to writers that change those first and the
  // campaign row then (a ruleset deleted or activated while its campaign is deleted).
  const sent = await ctx.db.transaction(async (tx) => {
    const at = ctx.clock.now();
    const tree = await lockEvaluationTree(tx, applicationId, at);
    const [row] = await tx.query(`DELETE FROM campaigns WHERE id = $1 AND application_id = $2 RETURNING *`, [campaignId, applicationId]);
    if (!row) throw notFound('Campaign', '/campaignId');
    const event: CampaignEvent = { Event: 'campaign_deleted', campaign: campaignView(row), deletedAt: at.toISOString() };
    return (await notifyCampaign(tx, notified, campaignId, [event], at)) + (await notifyEvaluationTreeChanged(tx, notified, await advanceEvaluationTree(tx, tree, by, at), at));
  });
  ctx.events.publish({ kind: 'campaigns', applicationId });
  outboundWritten(ctx, sent);
}
