// Achievements (issue 6, area K): a profile's progress towards the achievements of a campaign.
//
// Decisions written down here (see also the report of issue 6, area K):
// - Progress is kept in runs (achievement_progress rows); the latest run of (achievement, profile)
//   is the current one while its endDate has not passed. The other runs are the history.
// - A run's bounds: `user_action` starts it at the first progress; `fixed_schedule` starts runs at
//   `fixedStartDate` and, with `on_expiration`, every `period` after it (progress before
//   `fixedStartDate` is ignored). A run ends after `period`, never after the achievement's
//   `endDate`. With `periodEndOverride` the end of a run is moved to the given month, day, hour,
//   minute and second (UTC) of the year the period would end in, when that is still after the start.
// - `no_recurrence`: once the one run ends no progress is counted any more. `on_expiration`: the
//   next progress after the end starts a new run.
// - A completed run takes no more progress until it ends.
// - An achievement's status (spec: `active`, `scheduled`; the hosted API adds `expired`) follows it
//   and its campaign: `expired` once its endDate or its campaign's endTime has passed, `inactive`
//   while its campaign is disabled or archived, `scheduled` before its fixedStartDate or its
//   campaign's startTime, `active` otherwise. Only an active achievement takes progress. A run ends
//   no later than the achievement's endDate and its campaign's endTime, even one begun before either
//   was moved earlier (a customer's challenge is over when the achievement or its campaign is).
// - Progress becomes final with the commit of the session close (or at once for profile updates
//   and events), under the row lock of achievement_profiles (so parallel closes of one profile
//   add up exactly). A cancel or reopen gives the progress back, except from a completed run when
//   `allowRollbackAfterCompletion` is false.
import type { AppRef, CustomerAchievementHistoryCall, CustomerAchievementsCall } from '../actors/port.js';
import type { Effect } from '../engine/index.js';
import { badRequest, notFound, profileIdProblem, type Clock } from '../shared/index.js';
import type { Db, Queryable } from '../store/index.js';
import { loadProfile } from './repository.js';


// Dates come as Date objects, or as Postgres text when read through to_jsonb: both become ISO 8601 UTC.
const iso = (v: unknown): string | undefined => (v == null ? undefined : v instanceof Date ? v.toISOString() : new Date(String(v)).toISOString());
const time = (v: unknown): number => (v instanceof Date ? v.getTime() : Date.parse(String(v)));

export const PERIOD_PATTERN = /^([1-9][0-9]{0,3})([DWMY])$/;

/** `start` plus a period like `30D`, `2W`, `1M`, `1Y` (UTC calendar arithmetic). */
export function addPeriod(start: Date, period: string, times = 1): Date {
  const m = PERIOD_PATTERN.exec(period);
  if (!m) throw badRequest(`period ${JSON.stringify(period)} is not a number followed by D, W, M or Y`, '/period');
  const n = Number(m[1]) * times;
  const d = new Date(start.getTime());
  switch (m[2]) {
    case 'D':
      d.setUTCDate(d.getUTCDate() + n);
      break;
    case 'W':
      d.setUTCDate(d.getUTCDate() + 7 * n);
      break;
    case 'M':
      d.setUTCMonth(d.getUTCMonth() + n);
      break;
    default:
      d.setUTCFullYear(d.getUTCFullYear() + n);
  }
  return d;
}

export interface PeriodEndOverride {
  month?: number;
  dayOfMonth?: number;
  hour?: number;
  minute?: number;
  second?: number;
}

/** The end of a run that starts at `start`. */
export function runEnd(a: Record<string, unknown>, start: Date): Date {
  let end = addPeriod(start, String(a.period));
  const o = a.period_end_override as PeriodEndOverride | null | undefined;
  if (o && typeof o === 'object') {
    const moved = new Date(
      Date.UTC(
        end.getUTCFullYear(),
        o.month !== undefined ? o.month - 1 : end.getUTCMonth(),
        o.dayOfMonth ?? end.getUTCDate(),
        o.hour ?? end.getUTCHours(),
        o.minute ?? end.getUTCMinutes(),
        o.second ?? end.getUTCSeconds(),
      ),
    );
    if (moved.getTime() > start.getTime()) end = moved;
  }
  if (a.end_date != null && time(a.end_date) < end.getTime()) end = new Date(time(a.end_date));
  return end;
}

/** The bounds of the run that progress at `now` starts, or undefined when none may start. */
export function newRunBounds(a: Record<string, unknown>, latest: Record<string, unknown> | undefined, now: Date): { start: Date; end: Date } | undefined {
  if (a.end_date != null && time(a.end_date) <= now.getTime()) return undefined;
  if (latest && a.recurrence_policy !== 'on_expiration') return undefined;
  if (a.activation_policy === 'fixed_schedule') {
    const first = new Date(time(a.fixed_start_date));
    if (Number.isNaN(first.getTime()) || first.getTime() > now.getTime()) return undefined;
    // The window of the schedule that contains now.
    let k = 0;
    let start = first;
    while (addPeriod(first, String(a.period), k + 1).getTime() <= now.getTime() && k < 100_000) {
      k++;
      start = addPeriod(first, String(a.period), k);
    }
    if (k > 0 && a.recurrence_policy !== 'on_expiration') return undefined;
    const end = runEnd(a, start);
    if (end.getTime() <= now.getTime()) return undefined;
    return { start, end };
  }
  return { start: now, end: runEnd(a, now) };
}

/** Whether a run is current at `now` (its end not passed). */
export const isCurrent = (run: Record<string, unknown> | undefined, now: Date): boolean =>
  run !== undefined && (run.end_date == null || time(run.end_date) > now.getTime());

/**
 * The run as it stands under the achievement's endDate and its campaign's endTime (a row with
 * ACHIEVEMENT_CAMPAIGN_COLUMNS): a run begun before either was moved earlier ends there too.
 */
export function boundedRun<T extends Record<string, unknown> | undefined>(run: T, a: Record<string, unknown>): T {
  if (!run) return run;
  let end = run.end_date;
  for (const limit of [a.end_date, a.campaign_end_time]) if (limit != null && (end == null || time(limit) < time(end))) end = limit;
  return end === run.end_date ? run : { ...run, end_date: end };
}

export type AchievementStatus = 'active' | 'scheduled' | 'expired' | 'inactive';
export const ACHIEVEMENT_STATUSES: readonly AchievementStatus[] = ['active', 'scheduled', 'expired', 'inactive'];

/** What of its campaign an achievement's status depends on (columns of a campaigns row). */
export interface AchievementCampaign {
  state: unknown;
  start_time?: unknown;
  end_time?: unknown;
}

/** SQL: the campaign columns of an achievement `a` joined with its campaign `c`, as campaignOf reads them. */
export const ACHIEVEMENT_CAMPAIGN_COLUMNS = 'c.state AS campaign_state, c.start_time AS campaign_start_time, c.end_time AS campaign_end_time';
export const campaignOf = (row: Record<string, unknown>): AchievementCampaign => ({
  state: row.campaign_state,
  start_time: row.campaign_start_time,
  end_time: row.campaign_end_time,
});

/** The achievement's status at `now` (see the decisions above). */
export function achievementStatusOf(a: Record<string, unknown>, campaign: AchievementCampaign, now: Date): AchievementStatus {
  const t = now.getTime();
  const passed = (v: unknown) => v != null && time(v) <= t;
  const ahead = (v: unknown) => v != null && time(v) > t;
  if (passed(a.end_date) || passed(campaign.end_time)) return 'expired';
  if (campaign.state !== 'enabled') return 'inactive';
  if ((a.activation_policy === 'fixed_schedule' && ahead(a.fixed_start_date)) || ahead(campaign.start_time)) return 'scheduled';
  return 'active';
}

/** A run's status at `now`: `completed`, `expired` (ended without completion) or `inprogress`. */
export function runStatus(run: Record<string, unknown>, now: Date): 'completed' | 'expired' | 'inprogress' {
  if (run.completion_date != null) return 'completed';
  return isCurrent(run, now) ? 'inprogress' : 'expired';
}

export function runView(run: Record<string, unknown>, now: Date): Record<string, unknown> {
  return {
    status: runStatus(run, now),
    progress: Number(run.progress),
    startDate: iso(run.start_date),
    ...(run.completion_date != null ? { completionDate: iso(run.completion_date) } : {}),
    ...(run.end_date != null ? { endDate: iso(run.end_date) } : {}),
  };
}

const usesCache = new WeakMap<object, boolean>();
/** Whether a campaign's rules can emit increaseAchievementProgress (cached per snapshot object). */
export function usesAchievements(campaign: object): boolean {
  let v = usesCache.get(campaign);
  if (v === undefined) {
    v = JSON.stringify(campaign).includes('increaseAchievementProgress');
    usesCache.set(campaign, v);
  }
  return v;
}

/**
 * The current progress of the profile on each achievement of the campaigns, as the engine's
 * facts (`progress` 0 when no run is current).
 */
export async function loadAchievementFacts(
  db: Queryable,
  applicationId: number,
  campaignIds: readonly number[],
  profileId: string,
  now: Date,
): Promise<Record<string, { name: string; target: number; progress: number; active?: boolean }>> {
  if (campaignIds.length === 0) return {};
  const rows = await db.query(
    `SELECT a.*, ${ACHIEVEMENT_CAMPAIGN_COLUMNS}, to_jsonb(r.*) AS latest
       FROM achievements a
       JOIN campaigns c ON c.id = a.campaign_id
       LEFT JOIN LATERAL (SELECT progress, end_date FROM achievement_progress p
                           WHERE p.achievement_id = a.id AND p.integration_id = $3 AND $3 <> '' ORDER BY p.id DESC LIMIT 1) r ON true
      WHERE a.application_id = $1 AND a.campaign_id = ANY($2::int[])`,
    [applicationId, [...campaignIds], profileId],
  );
  const out: Record<string, { name: string; target: number; progress: number; active?: boolean }> = {};
  for (const a of rows) {
    const latest = boundedRun((a.latest as Record<string, unknown> | null) ?? undefined, a);
    const progress = latest && isCurrent(latest, now) ? Number(latest.progress) : 0;
    const active = achievementStatusOf(a, campaignOf(a), now) === 'active';
    out[String(a.id)] = { name: String(a.name), target: Number(a.target), progress, ...(active ? {} : { active: false }) };
  }
  return out;
}

/** The change one progress made, as a counter entry of the commit (rolled back by cancel, reopen). */
export interface AchievementEntry {
  t: 'achievement';
  campaignId: number;
  achievementId: number;
  runId: number;
  amount: number;
}

/**
 * Adds the increaseAchievementProgress effects to the profile's runs in the caller's transaction.
 * Achievements are handled in id order, each under the lock of its (achievement, profile) row.
 */
export async function commitAchievementProgress(
  tx: Queryable,
  applicationId: number,
  profileId: string,
  effects: readonly Effect[],
  now: Date,
): Promise<AchievementEntry[]> {
  if (profileId === '') return [];
  const items = effects
    .filter((e) => e.effectType === 'increaseAchievementProgress')
    .map((e) => ({ campaignId: e.campaignId, achievementId: Number(e.props.achievementId), delta: Number(e.props.delta) }))
    .filter((x) => Number.isSafeInteger(x.achievementId) && Number.isFinite(x.delta) && x.delta > 0)
    .sort((a, b) => a.achievementId - b.achievementId);
  const out: AchievementEntry[] = [];
  const at = now.toISOString();
  for (const item of items) {
    const [a] = await tx.query(
      `SELECT a.*, ${ACHIEVEMENT_CAMPAIGN_COLUMNS} FROM achievements a JOIN campaigns c ON c.id = a.campaign_id WHERE a.id = $1 AND a.application_id = $2`,
      [item.achievementId, applicationId],
    );
    // An achievement that is not active takes no progress, whoever's rule adds it (and whatever
    // an evaluation made before its campaign was disabled still carries).
    if (!a || achievementStatusOf(a, campaignOf(a), now) !== 'active') continue;
    await tx.query(
      `INSERT INTO achievement_profiles (achievement_id, integration_id, touched) VALUES ($1, $2, $3)
       ON CONFLICT (achievement_id, integration_id) DO UPDATE SET touched = EXCLUDED.touched`,
      [item.achievementId, profileId, at],
    );
    const [latest] = await tx.query(`SELECT * FROM achievement_progress WHERE achievement_id = $1 AND integration_id = $2 ORDER BY id DESC LIMIT 1`, [
      item.achievementId,
      profileId,
    ]);
    let run = isCurrent(boundedRun(latest, a), now) ? latest : undefined;
    if (!run) {
      const bounds = newRunBounds(a, latest, now);
      if (!bounds) continue;
      [run] = await tx.query(
        `INSERT INTO achievement_progress (achievement_id, application_id, integration_id, progress, start_date, end_date, created)
         VALUES ($1, $2, $3, 0, $4, $5, $6) RETURNING *`,
        [item.achievementId, applicationId, profileId, bounds.start.toISOString(), bounds.end.toISOString(), at],
      );
    }
    if (run!.completion_date != null) continue;
    await tx.query(
      `UPDATE achievement_progress p SET progress = p.progress + $2::numeric,
              completion_date = CASE WHEN p.progress + $2::numeric >= $3::numeric THEN $4::timestamptz END
        WHERE p.id = $1`,
      [run!.id, String(item.delta), String(a.target), at],
    );
    out.push({ t: 'achievement', campaignId: item.campaignId, achievementId: item.achievementId, runId: Number(run!.id), amount: item.delta });
  }
  return out;
}

/** Gives back the progress of a commit (cancel, reopen), except from completed runs that may not roll back. */
export async function rollbackAchievementProgress(tx: Queryable, entry: AchievementEntry): Promise<void> {
  await tx.query(
    `UPDATE achievement_progress p
        SET progress = greatest(p.progress - $2::numeric, 0),
            completion_date = CASE WHEN greatest(p.progress - $2::numeric, 0) >= a.target THEN p.completion_date END
       FROM achievements a
      WHERE p.id = $1 AND a.id = p.achievement_id AND (p.completion_date IS NULL OR a.allow_rollback_after_completion)`,
    [entry.runId, String(entry.amount)],
  );
}



function idList(v: string | undefined, pointer: string): number[] | undefined {
  if (v === undefined) return undefined;
  const parts = v.split(',').map((s) => s.trim());
  if (parts.some((p) => !/^[0-9]{1,9}$/.test(p))) throw badRequest(`${pointer.slice(7)} must be a comma-separated list of ids`, pointer);
  return parts.map(Number);
}

function page(pageSize: number | undefined, skip: number | undefined): { pageSize: number; skip: number } {
  const size = pageSize ?? 1000;
  const s = skip ?? 0;
  if (!Number.isSafeInteger(size) || size < 1 || size > 1000) throw badRequest('`pageSize` must be a whole number from 1 to 1000', '/query/pageSize');
  if (!Number.isSafeInteger(s) || s < 0) throw badRequest('`skip` must be a whole number from 0', '/query/skip');
  return { pageSize: size, skip: s };
}

/** The definition fields of an achievement (shared with the Management view). */
export function achievementFields(a: Record<string, unknown>, campaign: AchievementCampaign, now: Date): Record<string, unknown> {
  return {
    id: Number(a.id),
    created: iso(a.created),
    name: a.name,
    title: a.title,
    description: a.description,
    target: Number(a.target),
    period: a.period,
    ...(a.period_end_override != null ? { periodEndOverride: a.period_end_override } : {}),
    recurrencePolicy: a.recurrence_policy,
    activationPolicy: a.activation_policy,
    ...(a.fixed_start_date != null ? { fixedStartDate: iso(a.fixed_start_date) } : {}),
    ...(a.end_date != null ? { endDate: iso(a.end_date) } : {}),
    allowRollbackAfterCompletion: a.allow_rollback_after_completion === true,
    campaignId: Number(a.campaign_id),
    status: achievementStatusOf(a, campaign, now),
  };
}

/** The profile's current progress on an achievement, from its latest run. */
export function currentProgressOf(a: Record<string, unknown>, stored: Record<string, unknown> | undefined, now: Date): Record<string, unknown> {
  const latest = boundedRun(stored, a);
  if (!latest) return { status: 'not_started', progress: 0 };
  const status = runStatus(latest, now);
  if (status === 'inprogress' || (status === 'completed' && isCurrent(latest, now))) return runView(latest, now);
  // The run is over: with on_expiration the next progress starts a new one.
  const over = [a.end_date, a.campaign_end_time].some((v) => v != null && time(v) <= now.getTime());
  if (a.recurrence_policy === 'on_expiration' && !over) return { status: 'not_started', progress: 0 };
  return runView(latest, now);
}

export class AchievementService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  private async requireProfile(app: AppRef, integrationId: string): Promise<void> {
    if (typeof integrationId !== 'string' || integrationId === '' || integrationId.includes('\u0000')) {
      throw badRequest('integrationId must be a non-empty string without NUL', '/path/integrationId');
    }
    const problem = profileIdProblem(integrationId);
    if (problem) throw badRequest(`integrationId ${problem}`, '/path/integrationId');
    const profile = await loadProfile(this.db, app.accountId, integrationId);
    if (!profile) throw notFound('Customer profile', '/path/integrationId');
  }

  /** GET /v1/customer_profiles/{integrationId}/achievements. */
  async list(call: CustomerAchievementsCall): Promise<Record<string, unknown>> {
    const campaignIds = idList(call.campaignIds, '/query/campaignIds');
    const achievementIds = idList(call.achievementIds, '/query/achievementIds');
    const statuses = call.achievementStatus === undefined ? ['active'] : call.achievementStatus.split(',').map((s) => s.trim());
    if (statuses.some((s) => !(ACHIEVEMENT_STATUSES as readonly string[]).includes(s))) {
      throw badRequest(`achievementStatus must be a comma-separated list of ${ACHIEVEMENT_STATUSES.join(', ')}`, '/query/achievementStatus');
    }
    const progressStatus = call.currentProgressStatus;
    if (progressStatus !== undefined && !['inprogress', 'completed', 'not_started'].includes(progressStatus)) {
      throw badRequest('currentProgressStatus must be inprogress, completed or not_started', '/query/currentProgressStatus');
    }
    const { pageSize, skip } = page(call.pageSize, call.skip);
    await this.requireProfile(call.app, call.integrationId);
    const now = this.clock.now();
    const rows = await this.db.query(
      `SELECT a.*, ${ACHIEVEMENT_CAMPAIGN_COLUMNS}, to_jsonb(r.*) AS latest
         FROM achievements a
         JOIN campaigns c ON c.id = a.campaign_id
         LEFT JOIN LATERAL (SELECT * FROM achievement_progress p
                             WHERE p.achievement_id = a.id AND p.integration_id = $2 ORDER BY p.id DESC LIMIT 1) r ON true
        WHERE a.application_id = $1
          AND ($3::int[] IS NULL OR a.campaign_id = ANY($3::int[]))
          AND ($4::int[] IS NULL OR a.id = ANY($4::int[]))
        ORDER BY a.id`,
      [call.app.applicationId, call.integrationId, campaignIds ?? null, achievementIds ?? null],
    );
    const all = rows
      .map((a) => {
        const latest = (a.latest as Record<string, unknown> | null) ?? undefined;
        return { ...achievementFields(a, campaignOf(a), now), currentProgress: currentProgressOf(a, latest, now) };
      })
      .filter((a) => statuses.includes((a as Record<string, unknown>).status as string))
      .filter((a) => progressStatus === undefined || (a.currentProgress as { status: string }).status === progressStatus);
    return { totalResultSize: all.length, data: all.slice(skip, skip + pageSize) };
  }

  /** GET /v1/customer_profiles/{integrationId}/achievements/{achievementId}: the profile's runs, newest first. */
  async history(call: CustomerAchievementHistoryCall): Promise<Record<string, unknown>> {
    if (!Number.isSafeInteger(call.achievementId) || call.achievementId < 1 || call.achievementId > 2_147_483_647) {
      throw badRequest('achievementId must be a positive integer', '/path/achievementId');
    }
    if (call.progressStatus !== undefined && !['inprogress', 'completed', 'expired'].includes(call.progressStatus)) {
      throw badRequest('progressStatus must be inprogress, completed or expired', '/query/progressStatus');
    }
    for (const k of ['startDate', 'endDate'] as const) {
      const v = call[k];
      if (v !== undefined && Number.isNaN(Date.parse(v))) throw badRequest(`${k} must be a date-time`, `/query/${k}`);
    }
    const { pageSize, skip } = page(call.pageSize, call.skip);
    await this.requireProfile(call.app, call.integrationId);
    const [a] = await this.db.query(
      `SELECT a.id, a.end_date, ${ACHIEVEMENT_CAMPAIGN_COLUMNS} FROM achievements a JOIN campaigns c ON c.id = a.campaign_id WHERE a.id = $1 AND a.application_id = $2`,
      [call.achievementId, call.app.applicationId],
    );
    if (!a) throw notFound('Achievement', '/path/achievementId');
    const now = this.clock.now();
    const rows = await this.db.query(
      `SELECT * FROM achievement_progress
        WHERE achievement_id = $1 AND integration_id = $2
          AND ($3::timestamptz IS NULL OR created >= $3::timestamptz)
          AND ($4::timestamptz IS NULL OR created <= $4::timestamptz)
        ORDER BY id DESC`,
      [call.achievementId, call.integrationId, call.startDate ?? null, call.endDate ?? null],
    );
    const all = rows.map((r) => runView(boundedRun(r, a), now)).filter((r) => call.progressStatus === undefined || r.status === call.progressStatus);
    return { totalResultSize: all.length, data: all.slice(skip, skip + pageSize) };
  }
}
