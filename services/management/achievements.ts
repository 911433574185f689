// Achievements of a campaign (issue 6, area K; an extension of the Management API): create, list,
// read, update and delete. A profile's progress is kept by the Integration API
// (services/integration/achievements.ts); deleting an achievement deletes its progress.
import { AppError, badRequest, notFound } from '../shared/index.js';
import { achievementFields, PERIOD_PATTERN, type AchievementCampaign, type PeriodEndOverride } from '../integration/achievements.js';
import { isUniqueViolation } from '../store/index.js';
import { requireCampaign } from './campaigns.js';
import { listPage, requireApplication, type ListQuery, type ManagementContext, type Principal } from './context.js';

export interface AchievementInput {
  name?: string;
  title?: string;
  description?: string;
  target?: number;
  period?: string;
  periodEndOverride?: PeriodEndOverride | null;
  recurrencePolicy?: 'no_recurrence' | 'on_expiration';
  activationPolicy?: 'user_action' | 'fixed_schedule';
  fixedStartDate?: string | null;
  endDate?: string | null;
  allowRollbackAfterCompletion?: boolean;
}

const SORTABLE = { id: 'id', created: 'created', name: 'name', title: 'title' };

const nameTaken = (name: string) =>
  new AppError('conflict', `An achievement named ${JSON.stringify(name)} already exists in this campaign`, [
    { title: 'Conflict', details: 'achievement name taken', source: { pointer: '/name' } },
  ]);

/** The checks the schema cannot make: the period code, the override's ranges, dates that belong together. */
function check(a: AchievementInput): void {
  if (a.name !== undefined && a.name.trim() === '') throw badRequest('name must not be blank', '/name');
  if (a.target !== undefined && !(Number.isFinite(a.target) && a.target > 0 && a.target <= 1e15)) throw badRequest('target must be a positive number', '/target');
  if (a.period !== undefined && !PERIOD_PATTERN.test(a.period)) throw badRequest('period must be a number followed by D, W, M or Y (e.g. 30D, 1Y)', '/period');
  const o = a.periodEndOverride;
  if (o) {
    const ranges: Array<[keyof PeriodEndOverride, number, number]> = [
      ['month', 1, 12],
      ['dayOfMonth', 1, 31],
      ['hour', 0, 23],
      ['minute', 0, 59],
      ['second', 0, 59],
    ];
    for (const [k, lo, hi] of ranges) {
      const v = o[k];
      if (v !== undefined && !(Number.isInteger(v) && v >= lo && v <= hi)) throw badRequest(`periodEndOverride.${k} must be from ${lo} to ${hi}`, `/periodEndOverride/${k}`);
    }
  }
  if (a.activationPolicy === 'fixed_schedule' && !a.fixedStartDate) throw badRequest('fixedStartDate is required with activationPolicy fixed_schedule', '/fixedStartDate');
  for (const k of ['fixedStartDate', 'endDate'] as const) {
    const v = a[k];
    if (v != null && Number.isNaN(Date.parse(v))) throw badRequest(`${k} must be a date-time`, `/${k}`);
  }
  if (a.fixedStartDate && a.endDate && Date.parse(a.endDate) <= Date.parse(a.fixedStartDate)) throw badRequest('endDate must be after fixedStartDate', '/endDate');
}

/** An achievement as shown, its status following its campaign's state and window too. */
const view = (ctx: ManagementContext, campaign: Record<string, unknown>) => (row: Record<string, unknown>) => achievementFields(row, campaign as unknown as AchievementCampaign, ctx.clock.now());

async function requireAchievement(ctx: ManagementContext, applicationId: number, campaignId: number, achievementId: number): Promise<Record<string, unknown>> {
  const [row] = await ctx.db.query(`SELECT * FROM achievements WHERE id = $1 AND application_id = $2 AND campaign_id = $3`, [
    achievementId,
    applicationId,
    campaignId,
  ]);
  if (!row) throw notFound('Achievement', '/achievementId');
  return row;
}

/** POST .../campaigns/{campaignId}/achievements. */
export async function createAchievement(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, body: AchievementInput) {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  const campaign = await requireCampaign(ctx, applicationId, campaignId);
  const a: AchievementInput = { recurrencePolicy: 'no_recurrence', activationPolicy: 'user_action', ...body };
  check(a);
  try {
    const [row] = await ctx.db.query(
      `INSERT INTO achievements (application_id, campaign_id, name, title, description, target, period, period_end_override,
         recurrence_policy, activation_policy, fixed_start_date, end_date, allow_rollback_after_completion, created)
       VALUES ($1, $2, $3, $4, $5, $6::numeric, $7, $8::jsonb, $9, $10, $11, $12, $13, $14) RETURNING *`,
      [
        applicationId,
        campaignId,
        a.name,
        a.title ?? a.name,
        a.description ?? '',
        String(a.target),
        a.period,
        a.periodEndOverride ? JSON.stringify(a.periodEndOverride) : null,
        a.recurrencePolicy,
        a.activationPolicy,
        a.fixedStartDate ?? null,
        a.endDate ?? null,
        a.allowRollbackAfterCompletion ?? false,
        ctx.clock.now().toISOString(),
      ],
    );
    return view(ctx, campaign)(row!);
  } catch (e) {
    throw isUniqueViolation(e) ? nameTaken(a.name!) : e;
  }
}

/** GET .../campaigns/{campaignId}/achievements. */
export async function listAchievements(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, query: ListQuery & { name?: string }) {
  await requireApplication(ctx.db, principal, applicationId, 'read');
  const campaign = await requireCampaign(ctx, applicationId, campaignId);
  const params: unknown[] = [applicationId, campaignId];
  let where = '';
  if (query.name !== undefined) {
    params.push(`%${query.name.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
    where = ` AND lower(name) LIKE $3`;
  }
  return listPage(ctx.db, { from: `FROM achievements WHERE application_id = $1 AND campaign_id = $2${where}`, params, query, sortable: SORTABLE, withTotal: true }, view(ctx, campaign));
}

/** GET .../achievements/{achievementId}. */
export async function getAchievement(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, achievementId: number) {
  await requireApplication(ctx.db, principal, applicationId, 'read');
  const campaign = await requireCampaign(ctx, applicationId, campaignId);
  return view(ctx, campaign)(await requireAchievement(ctx, applicationId, campaignId, achievementId));
}

/** PUT .../achievements/{achievementId}: the fields given replace the stored ones. */
export async function updateAchievement(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, achievementId: number, body: AchievementInput) {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  const campaign = await requireCampaign(ctx, applicationId, campaignId);
  const cur = await requireAchievement(ctx, applicationId, campaignId, achievementId);
  const iso = (v: unknown) => (v == null ? null : v instanceof Date ? v.toISOString() : String(v));
  const merged: AchievementInput = {
    name: cur.name as string,
    title: cur.title as string,
    description: cur.description as string,
    target: Number(cur.target),
    period: cur.period as string,
    periodEndOverride: (cur.period_end_override as PeriodEndOverride | null) ?? null,
    recurrencePolicy: cur.recurrence_policy as AchievementInput['recurrencePolicy'],
    activationPolicy: cur.activation_policy as AchievementInput['activationPolicy'],
    fixedStartDate: iso(cur.fixed_start_date),
    endDate: iso(cur.end_date),
    allowRollbackAfterCompletion: cur.allow_rollback_after_completion === true,
    ...body,
  };
  check(merged);
  try {
    const [row] = await ctx.db.query(
      `UPDATE achievements SET name = $4, title = $5, description = $6, target = $7::numeric, period = $8, period_end_override = $9::jsonb,
              recurrence_policy = $10, activation_policy = $11, fixed_start_date = $12, end_date = $13, allow_rollback_after_completion = $14
        WHERE id = $1 AND application_id = $2 AND campaign_id = $3 RETURNING *`,
      [
        achievementId,
        applicationId,
        campaignId,
        merged.name,
        merged.title,
        merged.description,
        String(merged.target),
        merged.period,
        merged.periodEndOverride ? JSON.stringify(merged.periodEndOverride) : null,
        merged.recurrencePolicy,
        merged.activationPolicy,
        merged.fixedStartDate ?? null,
        merged.endDate ?? null,
        merged.allowRollbackAfterCompletion,
      ],
    );
    if (!row) throw notFound('Achievement', '/achievementId');
    return view(ctx, campaign)(row);
  } catch (e) {
    throw isUniqueViolation(e) ? nameTaken(merged.name!) : e;
  }
}

/** DELETE .../achievements/{achievementId}: with the progress of every profile. */
export async function deleteAchievement(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, achievementId: number): Promise<void> {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  await requireCampaign(ctx, applicationId, campaignId);
  const rows = await ctx.db.query(`DELETE FROM achievements WHERE id = $1 AND application_id = $2 AND campaign_id = $3 RETURNING id`, [
    achievementId,
    applicationId,
    campaignId,
  ]);
  if (rows.length === 0) throw notFound('Achievement', '/achievementId');
}
