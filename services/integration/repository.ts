// SQL of the integration side: sessions, profiles and events, read one way and committed in one
// transaction with an optimistic check on the session's update count.
import { AppError } from '../shared/index.js';
import { ROWS_MARK, STATS_DELTA_COLUMNS, statsDeltaJson, statsDeltaRows, statsDeltaSelect, statsDeltaSumSelect, type CampaignStatsDelta, type Queryable } from '../store/index.js';
import type { LedgerEntry } from './commit-effects.js';
import type { SessionRecord, SessionState } from './session-model.js';

export interface ProfileRecord {
  id: number;
  accountId: number;
  integrationId: string;
  created: string;
  lastActivity: string;
  attributes: Record<string, unknown>;
  closedSessions: number;
  totalSales: number;
  sandbox: boolean;
  /** The audiences the profile belongs to, by id (loaded with the profile; absent when not loaded). */
  audiences?: Array<{ id: number; name: string }>;
}

/** The profile's audience memberships as a JSON array `[{id, name}]`, for a profile row aliased `p`. */
export const AUDIENCES_OF_P = `(SELECT coalesce(json_agg(json_build_object('id', a.id, 'name', a.name) ORDER BY a.id), '[]'::json)
     FROM audience_memberships m JOIN audiences a ON a.id = m.audience_id WHERE m.profile_id = p.id)`;

export interface EventRecord {
  id: number;
  created: string;
  applicationId: number;
  profileId: string;
  storeIntegrationId: string;
  type: string;
  attributes: Record<string, unknown>;
  sessionId: string;
  effects: unknown[];
  /** The loyalty transactions the event caused (issue 6), when its commit made any. */
  ledgerEntries?: LedgerEntry[];
}

/** The stored session changed under us (another node, or a stale cache): reload and retry. */
export class StaleSessionError extends AppError {
  constructor() {
    // Retried by the caller; should it escape, it is what it is to a client: a retryable conflict.
    super('conflict', 'The session changed concurrently; retry', [{ title: 'Conflict', details: 'session changed concurrently', source: { pointer: '' } }]);
  }
}

const iso = (v: unknown): string => (v instanceof Date ? v.toISOString() : new Date(String(v)).toISOString());

const sessionColumns = `id, application_id, integration_id, created, updated, profile_id, store_integration_id, state,
  coupon_codes, referral_code, loyalty_cards, identifiers, cart_items, additional_costs, attributes, total,
  cart_item_total, additional_cost_total, first_session, effects, update_count, committed_effects, committed_counters`;

function toSession(r: Record<string, unknown>): SessionRecord {
  return {
    id: r.id as number,
    applicationId: r.application_id as number,
    integrationId: r.integration_id as string,
    created: iso(r.created),
    updated: iso(r.updated),
    profileId: r.profile_id as string,
    storeIntegrationId: r.store_integration_id as string,
    state: r.state as SessionState,
    couponCodes: r.coupon_codes as string[],
    referralCode: r.referral_code as string,
    loyaltyCards: r.loyalty_cards as string[],
    identifiers: r.identifiers as string[],
    cartItems: r.cart_items as SessionRecord['cartItems'],
    additionalCosts: r.additional_costs as SessionRecord['additionalCosts'],
    attributes: r.attributes as Record<string, unknown>,
    total: Number(r.total),
    cartItemTotal: Number(r.cart_item_total),
    additionalCostTotal: Number(r.additional_cost_total),
    firstSession: r.first_session as boolean,
    effects: r.effects as unknown[],
    committedEffects: r.committed_effects as unknown[],
    committedCounters: r.committed_counters as unknown[],
    updateCount: r.update_count as number,
  };
}

export function toProfile(r: Record<string, unknown>): ProfileRecord {
  return {
    id: Number(r.id),
    accountId: r.account_id as number,
    integrationId: r.integration_id as string,
    created: iso(r.created),
    lastActivity: iso(r.last_activity),
    attributes: (r.attributes as Record<string, unknown>) ?? {},
    closedSessions: r.closed_sessions as number,
    totalSales: Number(r.total_sales),
    sandbox: r.sandbox as boolean,
    ...(Array.isArray(r.audiences) ? { audiences: (r.audiences as Array<{ id: number; name: string }>).map((a) => ({ id: Number(a.id), name: a.name })) } : {}),
  };
}

export function toEvent(r: Record<string, unknown>): EventRecord {
  return {
    id: Number(r.id),
    created: iso(r.created),
    applicationId: r.application_id as number,
    profileId: r.profile_id as string,
    storeIntegrationId: r.store_integration_id as string,
    type: r.type as string,
    attributes: (r.attributes as Record<string, unknown>) ?? {},
    sessionId: r.session_id as string,
    effects: (r.effects as unknown[]) ?? [],
  };
}

/**
 * SQL: the session of an Application with the ID in `id`. Sessions are indexed by a hash of their
 * ID (an ID has no length limit; a B-tree entry does): the index finds it, the ID itself makes the
 * match exact. Every lookup of a session by its ID goes through this.
 */
export const SESSION_ID_MATCH = (table: string, applicationId: string, id: string): string =>
  `${table}.application_id = ${applicationId} AND ${table}.integration_id_hash = text_sha256(${id}) AND ${table}.integration_id = ${id}`;

/** The unique key a new session's insert conflicts on. */
export const SESSION_KEY = '(application_id, integration_id_hash)';

export async function loadSession(db: Queryable, applicationId: number, integrationId: string): Promise<SessionRecord | undefined> {
  const [row] = await db.query(
    `SELECT ${sessionColumns} FROM customer_sessions WHERE ${SESSION_ID_MATCH('customer_sessions', '$1', '$2')}`,
    [applicationId, integrationId],
  );
  return row ? toSession(row) : undefined;
}

export async function loadProfile(db: Queryable, accountId: number, integrationId: string): Promise<ProfileRecord | undefined> {
  const [row] = await db.query(`SELECT p.*, ${AUDIENCES_OF_P} AS audiences FROM customer_profiles p WHERE account_id = $1 AND integration_id = $2`, [
    accountId,
    integrationId,
  ]);
  return row ? toProfile(row) : undefined;
}

/** The audiences a profile (by row id) belongs to, as shown in its view. */
export async function loadAudiences(db: Queryable, profileId: number): Promise<Array<{ id: number; name: string }>> {
  const [row] = await db.query<{ audiences: Array<{ id: number; name: string }> }>(
    `SELECT ${AUDIENCES_OF_P} AS audiences FROM (SELECT $1::bigint AS id) p`,
    [profileId],
  );
  return row?.audiences ?? [];
}

/**
 * The profile of a session and, for a new session, whether it is the profile's first in this
 * Application: one round trip.
 */
export async function loadProfileContext(
  db: Queryable,
  app: { accountId: number; applicationId: number },
  profileId: string,
  newSession: boolean,
): Promise<{ profile: ProfileRecord | undefined; firstSession: boolean }> {
  if (profileId === '') return { profile: undefined, firstSession: true };
  const [row] = await db.query<{ profile: Record<string, unknown> | null; first: boolean }>(
    `SELECT (SELECT to_jsonb(p) || jsonb_build_object('audiences', ${AUDIENCES_OF_P}) FROM customer_profiles p WHERE p.account_id = $1 AND p.integration_id = $2) AS profile,
            $4::boolean AND NOT EXISTS (SELECT 1 FROM customer_sessions WHERE application_id = $3 AND profile_id = $2) AS first`,
    [app.accountId, profileId, app.applicationId, newSession],
  );
  return { profile: row?.profile ? toProfile(row.profile) : undefined, firstSession: row?.first ?? false };
}

/** True when the profile has no session yet in this Application (anonymous sessions always are). */
export async function isFirstSession(db: Queryable, applicationId: number, profileId: string): Promise<boolean> {
  if (profileId === '') return true;
  const rows = await db.query(`SELECT 1 FROM customer_sessions WHERE application_id = $1 AND profile_id = $2 LIMIT 1`, [
    applicationId,
    profileId,
  ]);
  return rows.length === 0;
}

export interface SessionCommit {
  accountId: number;
  session: SessionRecord;
  /** The update count the session had when it was read; 0 inserts a new session. */
  expectedUpdateCount: number;
  closing: boolean;
  /**
   * The profile as read before the commit, if it was; returned when the commit has no reason to
   * write it. Without it, the commit writes (and returns) the profile only when `profileNeeded`.
   */
  knownProfile?: ProfileRecord | undefined;
  profileNeeded?: boolean;
  /** What the profile's purchase counters change by: +1/+total on close, back on cancel, -returned on returns. */
  profileDelta?: { closedSessions: number; totalSales: number } | undefined;
  events: Array<{ type: string; attributes: Record<string, unknown>; effects: unknown[] }>;
  now: string;
  /** Campaign statistics of a close that commits nothing else, written by the same statement. */
  stats?: readonly CampaignStatsDelta[] | undefined;
  /**
   * A new session whose first-session flag was not read before it was evaluated (no rule reads
   * it): the insert finds out, and the result carries it.
   */
  firstSessionUnknown?: boolean;
}

/** SQL: whether a new session of this profile is its first in the Application (anonymous ones always are). */
const FIRST_SESSION = (applicationId: string, profileId: string) =>
  `(${profileId} = '' OR NOT EXISTS (SELECT 1 FROM customer_sessions f WHERE f.application_id = ${applicationId} AND f.profile_id = ${profileId}))`;

export interface SessionCommitResult {
  session: SessionRecord;
  profile: ProfileRecord | undefined;
  events: EventRecord[];
}

/**
 * Writes the session, its profile and its events in one statement (atomic on its own, so an
 * update that commits nothing else needs no transaction). The profile and the events are written
 * only when the session is: a stale update count changes nothing and throws StaleSessionError.
 */
export async function commitSession(db: Queryable, c: SessionCommit): Promise<SessionCommitResult> {
  const s = c.session;
  const params: unknown[] = [
    s.applicationId,
    s.integrationId,
    s.profileId,
    s.storeIntegrationId,
    s.state,
    JSON.stringify(s.couponCodes),
    s.referralCode,
    JSON.stringify(s.loyaltyCards),
    JSON.stringify(s.identifiers),
    JSON.stringify(s.cartItems),
    JSON.stringify(s.additionalCosts),
    JSON.stringify(s.attributes),
    String(s.total),
    String(s.cartItemTotal),
    String(s.additionalCostTotal),
    s.firstSession,
    JSON.stringify(s.effects),
    c.now,
    c.closing ? c.now : null,
    // What a close commits is the session's effects ($17): sent once (NULL here), not twice.
    s.committedEffects === s.effects ? null : JSON.stringify(s.committedEffects),
    JSON.stringify(s.committedCounters),
  ];
  const $ = (value: unknown) => `$${params.push(value)}`;
  const write =
    c.expectedUpdateCount === 0
      ? `INSERT INTO customer_sessions (application_id, integration_id, profile_id, store_integration_id, state,
           coupon_codes, referral_code, loyalty_cards, identifiers, cart_items, additional_costs, attributes,
           total, cart_item_total, additional_cost_total, first_session, effects, created, updated, closed_at,
           committed_effects, committed_counters, update_count)
         VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8::jsonb, $9::jsonb, $10::json, $11::jsonb, $12::jsonb,
           $13::numeric, $14::numeric, $15::numeric,
           CASE WHEN ${$(c.firstSessionUnknown === true)}::boolean THEN ${FIRST_SESSION('$1', '$3')} ELSE $16 END,
           $17::json, $18, $18, $19, coalesce($20::json, $17::json), $21::json, 1)
         ON CONFLICT ${SESSION_KEY} DO NOTHING
         RETURNING id, created, updated, update_count, first_session`
      : `UPDATE customer_sessions SET profile_id = $3, store_integration_id = $4, state = $5, coupon_codes = $6::jsonb,
           referral_code = $7, loyalty_cards = $8::jsonb, identifiers = $9::jsonb, cart_items = $10::json,
           additional_costs = $11::jsonb, attributes = $12::jsonb, total = $13::numeric, cart_item_total = $14::numeric,
           additional_cost_total = $15::numeric, first_session = $16, effects = $17::json, updated = $18,
           closed_at = COALESCE($19, closed_at), committed_effects = coalesce($20::json, $17::json), committed_counters = $21::json,
           update_count = update_count + 1
         WHERE ${SESSION_ID_MATCH('customer_sessions', '$1', '$2')} AND update_count = ${$(c.expectedUpdateCount)}
         RETURNING id, created, updated, update_count, first_session`;
  const account = $(c.accountId);
  // An event's effects are the session's ($17, sent once) or none, as every caller builds them.
  const eventRows = c.events.map((e, i) => `(${$(e.type)}::text, ${$(JSON.stringify(e.attributes))}::jsonb, ${eventEffects(e, s, () => '$17::json', (x) => `${$(x)}::json`)}, ${i})`);
  // The profile. With counters to change (close, cancel, returns) it is upserted. Otherwise it is
  // updated only when its lastActivity is a minute old or the caller needs the row back, and
  // inserted when missing: index probes cost far less than an upsert, which locks (and logs) the
  // row even when it changes nothing.
  const counting = (c.profileDelta?.closedSessions ?? 0) !== 0 || (c.profileDelta?.totalSales ?? 0) !== 0;
  const closed = counting ? $(c.profileDelta!.closedSessions) : '';
  const sales = counting ? $(String(c.profileDelta!.totalSales)) : '';
  const needed = counting ? '' : $(c.knownProfile === undefined && c.profileNeeded === true);
  const profileSql = counting
    ? `pu AS (
       INSERT INTO customer_profiles (account_id, integration_id, created, last_activity, closed_sessions, total_sales)
       SELECT ${account}, $3, $18, $18, greatest(${closed}::int, 0), ${sales}::numeric FROM s WHERE $3 <> ''
       ON CONFLICT (account_id, integration_id) DO UPDATE SET last_activity = EXCLUDED.last_activity,
         closed_sessions = greatest(customer_profiles.closed_sessions + ${closed}::int, 0),
         total_sales = customer_profiles.total_sales + ${sales}::numeric
       RETURNING *
     ),
     pi AS (SELECT * FROM pu WHERE false)`
    : `pu AS (
       UPDATE customer_profiles SET last_activity = $18
        WHERE account_id = ${account} AND integration_id = $3 AND $3 <> '' AND EXISTS (SELECT 1 FROM s)
          AND (${needed}::boolean OR last_activity < $18::timestamptz - interval '60 seconds')
       RETURNING *
     ),
     pi AS (
       INSERT INTO customer_profiles (account_id, integration_id, created, last_activity)
       SELECT ${account}, $3, $18, $18 FROM s
        WHERE $3 <> '' AND NOT EXISTS (SELECT 1 FROM customer_profiles WHERE account_id = ${account} AND integration_id = $3)
       ON CONFLICT (account_id, integration_id) DO NOTHING
       RETURNING *
     )`;
  const [row] = await db.query<{ session: Record<string, unknown> | null; profile: Record<string, unknown> | null; events: Array<{ id: number; created: string; type: string }> }>(
    `WITH s AS (${write}),
     ${profileSql}${
       eventRows.length === 0
         ? ''
         : `,
     e AS (
       INSERT INTO events (application_id, created, profile_id, session_id, store_integration_id, type, attributes, effects)
       SELECT $1, $18, $3, $2, $4, v.type, v.attributes, v.effects
         FROM s, (VALUES ${eventRows.join(', ')}) AS v(type, attributes, effects, n)
        ORDER BY v.n
       RETURNING id, created, type
     )`
     }${
       c.stats && c.stats.length > 0
         ? `,
     sd AS (INSERT INTO campaign_stat_deltas (${STATS_DELTA_COLUMNS}) ${statsDeltaSelect($(statsDeltaJson(c.stats)), '$18::timestamptz', 's')})`
         : ''
     }
     SELECT (SELECT row_to_json(s) FROM s) AS session,
            coalesce((SELECT row_to_json(pu) FROM pu), (SELECT row_to_json(pi) FROM pi)) AS profile,
            ${eventRows.length === 0 ? `'[]'::json` : `(SELECT coalesce(json_agg(json_build_object('id', e.id, 'created', e.created, 'type', e.type) ORDER BY e.id), '[]'::json) FROM e)`} AS events`,
    params,
  );
  if (!row?.session) throw new StaleSessionError();
  return committedResult(db, c, row.session, row.profile, row.events);
}

/** SQL for an event's effects: the session's (one reference, no second copy), none, or its own. */
function eventEffects(e: { effects: unknown[] }, s: SessionRecord, sessions: () => string, own: (json: string) => string): string {
  if (e.effects === s.effects) return sessions();
  return e.effects.length === 0 ? `'[]'::json` : own(JSON.stringify(e.effects));
}

export function profileView(p: ProfileRecord): Record<string, unknown> {
  return {
    id: p.id,
    created: p.created,
    integrationId: p.integrationId,
    attributes: p.attributes,
    accountId: p.accountId,
    closedSessions: p.closedSessions,
    totalSales: p.totalSales,
    loyaltyMemberships: null,
    audienceMemberships: p.audiences ?? [],
    lastActivity: p.lastActivity,
    sandbox: p.sandbox,
  };
}

export function profileRoot(p: ProfileRecord | undefined, integrationId: string): Record<string, unknown> {
  return {
    IntegrationId: integrationId,
    Attributes: p?.attributes ?? {},
    ClosedSessions: p?.closedSessions ?? 0,
    TotalSales: p?.totalSales ?? 0,
    Audiences: (p?.audiences ?? []).map((a) => a.id),
    Created: p?.created ?? null,
    LastActivity: p?.lastActivity ?? null,
    Loyalty: {},
  };
}

export function eventView(e: EventRecord): Record<string, unknown> {
  return { ...e, ledgerEntries: e.ledgerEntries ?? [], meta: { campaigns: [], coupons: [], warnings: [] } };
}

/**
 * The statement of commitSessionsTogether: $1 the batch's rows as JSON, $2 ROWS_MARK (planned for a
 * few rows, not 100).
 */
export const SESSIONS_TOGETHER_SQL = `WITH x AS (
       SELECT * FROM json_to_recordset($1::json) AS x(n int, application_id int, integration_id text, profile_id text,
         store_integration_id text, state text, coupon_codes jsonb, referral_code text, loyalty_cards jsonb, identifiers jsonb,
         cart_items json, additional_costs jsonb, attributes jsonb, total numeric, cart_item_total numeric,
         additional_cost_total numeric, first_session boolean, first_unknown boolean, effects json, now timestamptz, closed_at timestamptz,
         committed_effects json, committed_counters json, expected int, account_id int, needed boolean, closed int, sales numeric,
         stats jsonb, events json, mark int)
       WHERE x.mark = $2
     ),
     u AS (
       UPDATE customer_sessions s SET profile_id = x.profile_id, store_integration_id = x.store_integration_id, state = x.state,
         coupon_codes = x.coupon_codes, referral_code = x.referral_code, loyalty_cards = x.loyalty_cards, identifiers = x.identifiers,
         cart_items = x.cart_items, additional_costs = x.additional_costs, attributes = x.attributes, total = x.total,
         cart_item_total = x.cart_item_total, additional_cost_total = x.additional_cost_total, first_session = x.first_session,
         effects = x.effects, updated = x.now, closed_at = COALESCE(x.closed_at, s.closed_at), committed_effects = coalesce(x.committed_effects, x.effects),
         committed_counters = x.committed_counters, update_count = s.update_count + 1
         FROM x
        WHERE x.expected > 0 AND ${SESSION_ID_MATCH('s', 'x.application_id', 'x.integration_id')} AND s.update_count = x.expected
       RETURNING x.n, s.id, s.created, s.updated, s.update_count, s.first_session
     ),
     i AS (
       INSERT INTO customer_sessions (application_id, integration_id, profile_id, store_integration_id, state,
         coupon_codes, referral_code, loyalty_cards, identifiers, cart_items, additional_costs, attributes,
         total, cart_item_total, additional_cost_total, first_session, effects, created, updated, closed_at,
         committed_effects, committed_counters, update_count)
       SELECT application_id, integration_id, profile_id, store_integration_id, state, coupon_codes, referral_code, loyalty_cards,
         identifiers, cart_items, additional_costs, attributes, total, cart_item_total, additional_cost_total,
         CASE WHEN x.first_unknown THEN ${FIRST_SESSION('x.application_id', 'x.profile_id')} ELSE x.first_session END,
         effects, now, now, closed_at, coalesce(committed_effects, effects), committed_counters, 1
         FROM x WHERE x.expected = 0
       ON CONFLICT ${SESSION_KEY} DO NOTHING
       RETURNING application_id, integration_id, id, created, updated, update_count, first_session
     ),
     r AS (
       SELECT * FROM u
       UNION ALL
       -- An inserted row belongs to the first new commit of its session (a batch never holds two,
       -- as a session's actor runs one call at a time; if it did, the others would be stale).
       SELECT * FROM (
         SELECT DISTINCT ON (i.application_id, i.integration_id) x.n, i.id, i.created, i.updated, i.update_count, i.first_session
           FROM i JOIN x ON x.expected = 0 AND x.application_id = i.application_id AND x.integration_id = i.integration_id
          ORDER BY i.application_id, i.integration_id, x.n
       ) first_new
     ),
     w AS (
       SELECT x.*, r.id AS session_row_id, r.created AS session_created, r.updated AS session_updated, r.update_count AS session_update_count,
              r.first_session AS session_first
         FROM x JOIN r ON r.n = x.n
     ),
     -- One row per profile: what its counters change by (an upsert may touch a row once).
     pd AS (
       SELECT account_id, profile_id, max(now) AS now, bool_or(needed) AS needed, sum(closed)::int AS closed, sum(sales) AS sales,
              bool_or(closed <> 0 OR sales <> 0) AS counting
         FROM w WHERE profile_id <> '' GROUP BY account_id, profile_id
     ),
     -- Every profile this batch writes, in one upsert in key order: so every batch locks the
     -- profiles it shares with another (a node's two in flight, other nodes' lanes) in the same
     -- order, and none waits for a row another holds while holding one that other waits for.
     -- Written are profiles with counters to change, missing ones, those the caller needs back,
     -- and those whose lastActivity is a minute old (see commitSession); the rest are read, never
     -- locked: an upsert locks (and logs) every row it finds, even one it then leaves as it is.
     pw AS (
       INSERT INTO customer_profiles (account_id, integration_id, created, last_activity, closed_sessions, total_sales)
       SELECT pd.account_id, pd.profile_id, pd.now, pd.now, pd.closed, pd.sales
         FROM pd LEFT JOIN customer_profiles p ON p.account_id = pd.account_id AND p.integration_id = pd.profile_id
        WHERE pd.counting OR pd.needed OR p.id IS NULL OR p.last_activity < pd.now - interval '60 seconds'
        ORDER BY pd.account_id, pd.profile_id
       ON CONFLICT (account_id, integration_id) DO UPDATE SET last_activity = EXCLUDED.last_activity,
         closed_sessions = customer_profiles.closed_sessions + EXCLUDED.closed_sessions,
         total_sales = customer_profiles.total_sales + EXCLUDED.total_sales
       RETURNING *
     ),
     sd AS (INSERT INTO campaign_stat_deltas (${STATS_DELTA_COLUMNS}) ${statsDeltaSumSelect('w.stats', 'w.now', 'w')}),
     e AS (
       INSERT INTO events (application_id, created, profile_id, session_id, store_integration_id, type, attributes, effects)
       SELECT w.application_id, w.now, w.profile_id, w.integration_id, w.store_integration_id, v.type, v.attributes,
              CASE WHEN v.same THEN w.effects ELSE coalesce(v.effects, '[]'::json) END
         FROM w, ROWS FROM (json_to_recordset(w.events) AS (type text, attributes jsonb, effects json, same boolean)) WITH ORDINALITY AS v(type, attributes, effects, same, k)
        ORDER BY w.n, v.k
       RETURNING application_id, session_id, id, created, type
     )
     SELECT (SELECT json_agg(json_build_object('n', w.n, 'id', w.session_row_id, 'created', w.session_created, 'updated', w.session_updated,
                                               'update_count', w.session_update_count, 'first_session', w.session_first)) FROM w) AS sessions,
            (SELECT json_agg(row_to_json(pw)) FROM pw) AS profiles,
            (SELECT json_agg(json_build_object('n', w.n, 'id', e.id, 'created', e.created, 'type', e.type) ORDER BY e.id)
               FROM e JOIN w ON w.application_id = e.application_id AND w.integration_id = e.session_id) AS events`;

/**
 * Commits many sessions' updates in one statement: what the group commit sends when several
 * arrive together. One round trip, one wake-up of the server and one WAL flush for all of them.
 * Plain updates and closes that commit nothing but the session, its profile's counters and
 * campaign statistics (no counter with a limit) can be in one batch. Each result is the commit's,
 * or a StaleSessionError for a session whose update count moved (nothing of it is written).
 * Closes of one profile in one batch add up; each gets the profile as it is after all of them.
 */
export async function commitSessionsTogether(db: Queryable, commits: readonly SessionCommit[]): Promise<Array<SessionCommitResult | StaleSessionError>> {
  const rows = commits.map((c, n) => {
    // Counters only go up here (a close); what takes them back (cancel, returns) commits alone.
    if ((c.profileDelta?.closedSessions ?? 0) < 0 || (c.profileDelta?.totalSales ?? 0) < 0) {
      throw new Error('commitSessionsTogether takes no profile counter going down');
    }
    const s = c.session;
    return {
      n,
      mark: ROWS_MARK,
      application_id: s.applicationId,
      integration_id: s.integrationId,
      profile_id: s.profileId,
      store_integration_id: s.storeIntegrationId,
      state: s.state,
      coupon_codes: s.couponCodes,
      referral_code: s.referralCode,
      loyalty_cards: s.loyaltyCards,
      identifiers: s.identifiers,
      cart_items: s.cartItems,
      additional_costs: s.additionalCosts,
      attributes: s.attributes,
      total: s.total,
      cart_item_total: s.cartItemTotal,
      additional_cost_total: s.additionalCostTotal,
      first_session: s.firstSession,
      first_unknown: c.firstSessionUnknown === true,
      effects: s.effects,
      now: c.now,
      closed_at: c.closing ? c.now : null,
      // A close's committed effects are its effects: sent once (null here), not twice.
      committed_effects: s.committedEffects === s.effects ? null : s.committedEffects,
      committed_counters: s.committedCounters,
      expected: c.expectedUpdateCount,
      account_id: c.accountId,
      needed: c.knownProfile === undefined && c.profileNeeded === true,
      closed: c.profileDelta?.closedSessions ?? 0,
      sales: c.profileDelta?.totalSales ?? 0,
      stats: c.stats && c.stats.length > 0 ? statsDeltaRows(c.stats) : null,
      // Each event's effects are the session's (not sent twice) or its own.
      events: c.events.map((e) => ({ type: e.type, attributes: e.attributes, ...(e.effects === s.effects ? { same: true } : { effects: e.effects }) })),
    };
  });
  const [out] = await db.query<{ sessions: Array<Record<string, unknown>> | null; profiles: Array<Record<string, unknown>> | null; events: Array<{ n: number; id: number; created: string; type: string }> | null }>(
    SESSIONS_TOGETHER_SQL,
    [JSON.stringify(rows), ROWS_MARK],
  );
  const written = new Map((out?.sessions ?? []).map((r) => [r.n as number, r]));
  const profiles = new Map((out?.profiles ?? []).map((p) => [`${p.account_id as number}|${p.integration_id as string}`, p]));
  return Promise.all(
    commits.map(async (c, n) => {
      const r = written.get(n);
      if (!r) return new StaleSessionError();
      return committedResult(db, c, r, profiles.get(`${c.accountId}|${c.session.profileId}`), (out?.events ?? []).filter((e) => e.n === n));
    }),
  );
}

/** What a commit returns: the session with its stored ids and counts, the profile, the events. */
async function committedResult(
  db: Queryable,
  c: SessionCommit,
  stored: Record<string, unknown>,
  profileRow: Record<string, unknown> | null | undefined,
  events: ReadonlyArray<{ id: number; created: string; type: string }>,
): Promise<SessionCommitResult> {
  const s = c.session;
  const byType = new Map(c.events.map((e) => [e.type, e]));
  let profile = profileRow
    ? { ...toProfile(profileRow), ...(c.knownProfile?.audiences ? { audiences: c.knownProfile.audiences } : {}) }
    : s.profileId === ''
      ? undefined
      : (c.knownProfile ?? (c.profileNeeded ? await loadProfile(db, c.accountId, s.profileId) : undefined));
  // Memberships not read with the profile, or changed by this commit (a close or its undo commits
  // audience effects): read as they are now, when the response may show the profile.
  const counting = (c.profileDelta?.closedSessions ?? 0) !== 0 || (c.profileDelta?.totalSales ?? 0) !== 0;
  if (profile && c.profileNeeded !== false && (profile.audiences === undefined || c.closing || counting)) {
    profile = { ...profile, audiences: await loadAudiences(db, profile.id) };
  }
  return {
    session: {
      ...s,
      id: Number(stored.id),
      created: iso(stored.created),
      updated: iso(stored.updated),
      updateCount: stored.update_count as number,
      firstSession: typeof stored.first_session === 'boolean' ? stored.first_session : s.firstSession,
    },
    profile,
    events: events.map((e) => ({
      id: Number(e.id),
      created: iso(e.created),
      applicationId: s.applicationId,
      profileId: s.profileId,
      storeIntegrationId: s.storeIntegrationId,
      type: e.type,
      attributes: byType.get(e.type)?.attributes ?? {},
      sessionId: s.integrationId,
      effects: byType.get(e.type)?.effects ?? [],
    })),
  };
}
