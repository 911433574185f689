// A loyalty ledger's transactions, as every writer changes them (Management add/deduct, session
// close and its rollback, events, the scheduler): durations, the per-ledger row lock, grants,
// deductions earliest-expiring first and the settlement of expired grants. In the store so that
// both the Management API and the Integration use cases use the same code (DESIGN layering).
import { badRequest } from '../shared/index.js';
import type { Queryable } from './db.js';

const iso = (v: unknown): string | undefined => (v == null ? undefined : v instanceof Date ? v.toISOString() : String(v));

// ---- durations ----

/**
 * A duration is a positive whole number followed by one unit letter: s seconds, m minutes,
 * h hours, D days, W weeks, M calendar months, Y calendar years (UTC). `m` and `M` differ, so the
 * letter is case-sensitive. The OpenAPI `Duration` schema has the same pattern.
 */
const durationPattern = /^([1-9][0-9]{0,5})([smhDWMY])$/;
const fixedUnitMs: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, D: 86_400_000, W: 604_800_000 };

export function isDuration(value: string): boolean {
  return durationPattern.test(value);
}

/** `from` plus the duration; a malformed duration or a date past year 9999 is a 400 on `pointer`. */
export function addDuration(from: Date, duration: string, pointer: string): Date {
  const m = durationPattern.exec(duration);
  if (!m) throw badRequest(`${JSON.stringify(duration)} is not a duration: a number followed by one of s, m, h, D, W, M, Y (e.g. 40m, 1h, 30D)`, pointer);
  const n = Number(m[1]);
  const unit = m[2]!;
  const d = new Date(from.getTime());
  if (unit === 'M' || unit === 'Y') {
    // Calendar months: the same day of the month, or the month's last day when it is shorter
    // (31 January + 1M is 28 or 29 February, not 3 March).
    const day = d.getUTCDate();
    d.setUTCDate(1);
    if (unit === 'M') d.setUTCMonth(d.getUTCMonth() + n);
    else d.setUTCFullYear(d.getUTCFullYear() + n);
    const lastDay = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 0)).getUTCDate();
    d.setUTCDate(Math.min(day, lastDay));
  } else d.setTime(d.getTime() + n * fixedUnitMs[unit]!);
  if (!Number.isFinite(d.getTime()) || d.getUTCFullYear() > 9999) throw badRequest(`${duration} from ${from.toISOString()} is past the year 9999`, pointer);
  return d;
}

// ---- ledgers ----

/**
 * Who a ledger belongs to: a profile, or (in a card-based program) a card, whose points every
 * profile on the card shares.
 */
export type LedgerOwner = { profileId: number; cardId?: undefined } | { cardId: number; profileId?: undefined };

/** One ledger: the main ledger of a program for its owner has subledgerId ''. */
export type LedgerKey = LedgerOwner & {
  programId: number;
  subledgerId: string;
};

/** The column that names a ledger's owner: its card's for a card ledger, else its profile's. */
export const ownerColumn = (owner: LedgerOwner): 'card_id' | 'profile_id' => (owner.cardId !== undefined ? 'card_id' : 'profile_id');
/** The ledger's rows: `program_id = $1 AND <owner> = $2 AND subledger_id = $3` with keyParams. */
export const ledgerWhere = (key: LedgerOwner): string => `program_id = $1 AND ${ownerColumn(key)} = $2 AND subledger_id = $3`;
export const keyParams = (key: LedgerKey): unknown[] => [key.programId, key.cardId ?? key.profileId, key.subledgerId];
/** Values of (program_id, profile_id, card_id, subledger_id) for an insert. */
const ownerValues = (key: LedgerKey): unknown[] => [key.programId, key.profileId ?? null, key.cardId ?? null, key.subledgerId];

/**
 * Locks the ledger's row for the rest of the transaction, creating it (the profile joins the
 * program, or the card's ledger opens) when `create` is set. `integrationId` names the owner in the
 * row: the profile's integration ID or the card's identifier. Returns false when the ledger does
 * not exist and is not created.
 */
export async function lockLedger(tx: Queryable, key: LedgerKey, options: { integrationId: string; now: Date; create: boolean }): Promise<boolean> {
  if (options.create) {
    await tx.query(
      `INSERT INTO loyalty_ledgers (program_id, profile_id, card_id, subledger_id, integration_id, joined) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
      [...ownerValues(key), options.integrationId, options.now.toISOString()],
    );
  }
  const rows = await tx.query(`SELECT 1 FROM loyalty_ledgers WHERE ${ledgerWhere(key)} FOR UPDATE`, keyParams(key));
  return rows.length > 0;
}

/** Writes the `expire` transaction of every grant of the (locked) ledger that expired by `now` with points left. */
export async function settleExpired(tx: Queryable, key: LedgerKey, now: Date): Promise<void> {
  const expired = await tx.query<{ id: number; remaining: string; expiry_date: Date | string; name: string }>(
    `SELECT id, remaining::text AS remaining, expiry_date, name FROM loyalty_transactions
     WHERE ${ledgerWhere(key)} AND type = 'addition' AND remaining > 0 AND expiry_date <= $4 ORDER BY expiry_date, id`,
    [...keyParams(key), now.toISOString()],
  );
  for (const g of expired) {
    const at = iso(g.expiry_date)!;
    const [t] = await tx.query<{ id: number }>(
      `INSERT INTO loyalty_transactions (program_id, profile_id, card_id, subledger_id, type, amount, start_date, expiry_date, name, created)
       VALUES ($1, $2, $3, $4, 'expire', $5, $6, $6, $7, $6) RETURNING id`,
      [...ownerValues(key), g.remaining, at, g.name],
    );
    await tx.query(`INSERT INTO loyalty_consumptions (transaction_id, grant_id, amount) VALUES ($1, $2, $3)`, [t!.id, g.id, g.remaining]);
    await tx.query(`UPDATE loyalty_transactions SET remaining = 0 WHERE id = $1`, [g.id]);
  }
}

/**
 * Pays the (locked) ledger's debts with its active points: the oldest debt first, from the
 * earliest-expiring grants, each payment a consumption of the grant by the indebted subtraction.
 * Pending points pay nothing until they start; whoever writes the ledger next, or the scheduler,
 * makes the payment then (balances read in between already net the two, see balancesOf).
 */
export async function payDebts(tx: Queryable, key: LedgerKey, now: Date): Promise<void> {
  const where = ledgerWhere(key);
  // Debts and active points laid end to end: each pair of overlapping stretches is one payment.
  const pays = await tx.query<{ debt_id: number; grant_id: number; amount: string }>(
    `WITH d AS (
       SELECT id, uncovered AS amount, sum(uncovered) OVER (ORDER BY created, id) AS hi FROM loyalty_transactions
        WHERE ${where} AND type = 'subtraction' AND uncovered > 0
     ), g AS (
       SELECT id, remaining AS amount, sum(remaining) OVER (ORDER BY expiry_date ASC NULLS LAST, start_date, id) AS hi FROM loyalty_transactions
        WHERE ${where} AND type = 'addition' AND remaining > 0 AND start_date <= $4 AND (expiry_date IS NULL OR expiry_date > $4)
     )
     SELECT d.id AS debt_id, g.id AS grant_id, (LEAST(d.hi, g.hi) - GREATEST(d.hi - d.amount, g.hi - g.amount))::text AS amount
       FROM d JOIN g ON d.hi - d.amount < g.hi AND g.hi - g.amount < d.hi
      ORDER BY d.hi, g.hi`,
    [...keyParams(key), now.toISOString()],
  );
  for (const p of pays) {
    await tx.query(
      `INSERT INTO loyalty_consumptions (transaction_id, grant_id, amount, created) VALUES ($1, $2, $3::numeric, $4)
       ON CONFLICT (transaction_id, grant_id) DO UPDATE SET amount = loyalty_consumptions.amount + EXCLUDED.amount`,
      [p.debt_id, p.grant_id, p.amount, now.toISOString()],
    );
    await tx.query(`UPDATE loyalty_transactions SET remaining = remaining - $2::numeric WHERE id = $1`, [p.grant_id, p.amount]);
    await tx.query(`UPDATE loyalty_transactions SET uncovered = uncovered - $2::numeric WHERE id = $1`, [p.debt_id, p.amount]);
  }
}

/** What every writer does first under the ledger's lock: write off expired points, then pay debts. */
export async function settleLedger(tx: Queryable, key: LedgerKey, now: Date): Promise<void> {
  await settleExpired(tx, key, now);
  await payDebts(tx, key, now);
}

export interface Grant {
  /** Points as a decimal string or number; exact numerics in the database. */
  points: string | number;
  name: string;
  startDate: Date;
  expiryDate: Date | null;
  customerSessionId?: string;
  eventId?: number;
  userId?: number;
  now: Date;
}

/**
 * Adds a grant to a ledger locked by lockLedger. When it is active at once and the ledger has
 * debts, the caller's closing payDebts takes them from it before anything can spend it. A pending
 * grant is marked for the scheduler, which sees it become active (its start may move the tier).
 */
export async function grantPoints(tx: Queryable, key: LedgerKey, g: Grant): Promise<number> {
  const [row] = await tx.query<{ id: number }>(
    `INSERT INTO loyalty_transactions (program_id, profile_id, card_id, subledger_id, type, amount, remaining, start_date, expiry_date, name,
       customer_session_id, event_id, user_id, created, activation_pending)
     VALUES ($1, $2, $3, $4, 'addition', $5, $5, $6, $7, $8, $9, $10, $11, $12, $6::timestamptz > $12::timestamptz) RETURNING id`,
    [
      ...ownerValues(key),
      String(g.points),
      g.startDate.toISOString(),
      g.expiryDate?.toISOString() ?? null,
      g.name,
      g.customerSessionId ?? '',
      g.eventId ?? null,
      g.userId ?? null,
      g.now.toISOString(),
    ],
  );
  return row!.id;
}

export interface Spend {
  points: string | number;
  name: string;
  customerSessionId?: string;
  eventId?: number;
  userId?: number;
  now: Date;
  /**
   * The program allows a negative balance: what the active points do not cover becomes the
   * subtraction's `uncovered` part, a debt that later active points pay.
   */
  allowNegative?: boolean;
  /** A grant to take from first, even while it is pending (a rollback of that grant). */
  prefer?: number;
}

/**
 * Takes `points` from the active grants of a ledger locked by lockLedger, earliest expiry first
 * (never-expiring last), recording how much came from each grant. Without allowNegative it
 * returns null, changing nothing, when the active balance is smaller than `points`.
 */
export async function spendPoints(tx: Queryable, key: LedgerKey, s: Spend): Promise<number | null> {
  const now = s.now.toISOString();
  const points = String(s.points);
  const usable = `${ledgerWhere(key)} AND type = 'addition' AND remaining > 0
    AND ((start_date <= $4 AND (expiry_date IS NULL OR expiry_date > $4)) OR id = $6)`;
  const params = [...keyParams(key), now, points, s.prefer ?? null];
  const [have] = await tx.query<{ ok: boolean; uncovered: string }>(
    `SELECT COALESCE(sum(remaining), 0) >= $5::numeric AS ok, GREATEST($5::numeric - COALESCE(sum(remaining), 0), 0)::text AS uncovered
       FROM loyalty_transactions WHERE ${usable}`,
    params,
  );
  if (!have?.ok && !s.allowNegative) return null;
  // The running sum picks the grants needed and how much of the last one; exact numerics throughout.
  const takes = await tx.query<{ id: number; take: string }>(
    `SELECT id, LEAST(remaining, $5::numeric - (running - remaining))::text AS take FROM (
       SELECT id, remaining, sum(remaining) OVER (ORDER BY (id = $6) IS TRUE DESC, expiry_date ASC NULLS LAST, start_date, id) AS running
       FROM loyalty_transactions WHERE ${usable}
     ) g WHERE running - remaining < $5::numeric ORDER BY running`,
    params,
  );
  const [row] = await tx.query<{ id: number }>(
    `INSERT INTO loyalty_transactions (program_id, profile_id, card_id, subledger_id, type, amount, uncovered, start_date, name,
       customer_session_id, event_id, user_id, created)
     VALUES ($1, $2, $3, $4, 'subtraction', $5, $6, $7, $8, $9, $10, $11, $7) RETURNING id`,
    [...ownerValues(key), points, have?.ok ? '0' : (have?.uncovered ?? points), now, s.name, s.customerSessionId ?? '', s.eventId ?? null, s.userId ?? null],
  );
  for (const t of takes) {
    await tx.query(`UPDATE loyalty_transactions SET remaining = remaining - $2::numeric WHERE id = $1`, [t.id, t.take]);
    await tx.query(`INSERT INTO loyalty_consumptions (transaction_id, grant_id, amount) VALUES ($1, $2, $3)`, [row!.id, t.id, t.take]);
  }
  return row!.id;
}

// ---- balances ----

export interface Balances {
  activePoints: number;
  pendingPoints: number;
  spentPoints: number;
  expiredPoints: number;
  /** The debt of a program that allows negative balances: deductions no points covered yet. */
  negativePoints: number;
}

export const EMPTY_BALANCES: Readonly<Balances> = { activePoints: 0, pendingPoints: 0, spentPoints: 0, expiredPoints: 0, negativePoints: 0 };

/** Sums of decimal points arrive as doubles: drop the binary noise (0.1 + 0.2). */
export const roundPoints = (n: unknown): number => Math.round(Number(n ?? 0) * 1e9) / 1e9;

/**
 * Active points and debts of one ledger as they stand once the debts are paid: a debt and active
 * points live side by side only between a pending grant's start and the next settlement of its
 * ledger, and are shown as that settlement will leave them.
 */
export function netOfDebt(active: number, debt: number): { activePoints: number; negativePoints: number } {
  return { activePoints: roundPoints(Math.max(0, active - debt)), negativePoints: roundPoints(Math.max(0, debt - active)) };
}

/**
 * Balances per (program, subledger) of one owner (a profile or a card) as of `at`, for the given
 * programs. Spent is every subtraction until `at` (with the part still owed); expired the
 * `expire` transactions plus what is left of grants past their expiry (not settled yet);
 * negative the debt left after the active points pay it. With `historic` (a past `at`, the
 * balances' `endDate`) transactions created after `at` do not count: grants made later are left
 * out, and what later subtractions, expiries and debt payments took from a grant is given back.
 */
export async function balancesOf(db: Queryable, programIds: readonly number[], owner: LedgerOwner, at: Date, historic = false): Promise<Map<number, Map<string, Balances>>> {
  const id = owner.cardId ?? owner.profileId;
  return (await balancesOfOwners(db, programIds, ownerColumn(owner), [id], at, historic)).get(id) ?? new Map<number, Map<string, Balances>>();
}

/**
 * balancesOf for several owners of one kind (cards, or profiles) in one query: owner ID → program
 * → subledger → balances.
 */
export async function balancesOfOwners(
  db: Queryable,
  programIds: readonly number[],
  owned: 'card_id' | 'profile_id',
  ownerIds: readonly number[],
  at: Date,
  historic = false,
): Promise<Map<number, Map<number, Map<string, Balances>>>> {
  const out = new Map<number, Map<number, Map<string, Balances>>>();
  if (programIds.length === 0 || ownerIds.length === 0) return out;
  const ofOwners = (t: string) => `${t}${owned} = ANY($2::bigint[])`;
  const source = historic
    ? `(SELECT t.program_id, t.${owned}, t.subledger_id, t.type, t.amount, t.start_date, t.expiry_date, t.created,
               CASE WHEN t.type = 'addition' THEN t.remaining + COALESCE((SELECT SUM(c.amount) FROM loyalty_consumptions c
                   JOIN loyalty_transactions x ON x.id = c.transaction_id WHERE c.grant_id = t.id AND COALESCE(c.created, x.created) > $3), 0) END AS remaining,
               t.uncovered + COALESCE((SELECT SUM(c.amount) FROM loyalty_consumptions c WHERE c.transaction_id = t.id AND c.created > $3), 0) AS uncovered
          FROM loyalty_transactions t WHERE t.program_id = ANY($1::int[]) AND ${ofOwners('t.')} AND t.created <= $3) AS loyalty_transactions`
    : 'loyalty_transactions';
  const rows = await db.query<{ owner: number | string; program_id: number; subledger_id: string; active: string; pending: string; spent: string; expired: string; debt: string }>(
    `SELECT ${owned} AS owner, program_id, subledger_id,
            COALESCE(SUM(remaining) FILTER (WHERE type = 'addition' AND start_date <= $3 AND (expiry_date IS NULL OR expiry_date > $3)), 0)::text AS active,
            COALESCE(SUM(remaining) FILTER (WHERE type = 'addition' AND start_date > $3), 0)::text AS pending,
            COALESCE(SUM(amount) FILTER (WHERE type = 'subtraction' AND created <= $3), 0)::text AS spent,
            (COALESCE(SUM(amount) FILTER (WHERE type = 'expire' AND created <= $3), 0)
              + COALESCE(SUM(remaining) FILTER (WHERE type = 'addition' AND expiry_date <= $3), 0))::text AS expired,
            COALESCE(SUM(uncovered) FILTER (WHERE type = 'subtraction' AND created <= $3), 0)::text AS debt
       FROM ${source} WHERE program_id = ANY($1::int[]) AND ${ofOwners('')}
      GROUP BY ${owned}, program_id, subledger_id`,
    [programIds, ownerIds, at.toISOString()],
  );
  for (const r of rows) {
    const byProgram = out.get(Number(r.owner)) ?? new Map<number, Map<string, Balances>>();
    const byLedger = byProgram.get(Number(r.program_id)) ?? new Map<string, Balances>();
    const { activePoints, negativePoints } = netOfDebt(Number(r.active), Number(r.debt));
    byLedger.set(r.subledger_id, { activePoints, pendingPoints: roundPoints(r.pending), spentPoints: roundPoints(r.spent), expiredPoints: roundPoints(r.expired), negativePoints });
    byProgram.set(Number(r.program_id), byLedger);
    out.set(Number(r.owner), byProgram);
  }
  return out;
}

/** What an open session's loyalty effects would leave of a ledger: the tentative balances. */
export interface Tentative {
  currentBalance: number;
  pendingBalance: number;
  negativeBalance: number;
}

/**
 * The ledger object of the spec (IntegrationStateV2 `loyalty`): balances, tier and points to the
 * next tier. `tentative` is what the ledger would hold if the open session's effects were
 * committed; without it (nothing uncommitted) the tentative balances are the committed ones.
 */
export function ledgerObject(b: Balances, tiers: readonly Tier[], tentative?: Tentative): Record<string, unknown> {
  const t = tierOf(tiers, b.activePoints);
  return {
    currentBalance: b.activePoints,
    pendingBalance: b.pendingPoints,
    negativeBalance: b.negativePoints,
    expiredBalance: b.expiredPoints,
    spentBalance: b.spentPoints,
    tentativeCurrentBalance: tentative?.currentBalance ?? b.activePoints,
    tentativePendingBalance: tentative?.pendingBalance ?? b.pendingPoints,
    tentativeNegativeBalance: tentative?.negativeBalance ?? b.negativePoints,
    ...(t.tier ? { currentTier: { name: t.tier.name, minPoints: t.tier.minPoints } } : {}),
    ...(t.pointsToNextTier !== undefined ? { pointsToNextTier: t.pointsToNextTier } : {}),
  };
}

/**
 * The ledger objects of one owner in one program as of `at`: the main ledger (with the program's
 * tiers) and each subledger, with the tentative balances of each where given (by subledger id).
 */
export async function ledgerObjectsOf(
  db: Queryable,
  programId: number,
  owner: LedgerOwner,
  tiers: readonly Tier[],
  at: Date,
  tentative?: ReadonlyMap<string, Tentative>,
): Promise<{ ledger: Record<string, unknown>; subledgers: Record<string, Record<string, unknown>> }> {
  return ledgerObjects((await balancesOf(db, [programId], owner, at)).get(programId) ?? new Map<string, Balances>(), tiers, tentative);
}

/** The ledger objects of one owner's ledgers in a program (balances by subledger id, '' the main ledger). */
export function ledgerObjects(
  ledgers: ReadonlyMap<string, Balances>,
  tiers: readonly Tier[],
  tentative?: ReadonlyMap<string, Tentative>,
): { ledger: Record<string, unknown>; subledgers: Record<string, Record<string, unknown>> } {
  const subledgers: Record<string, Record<string, unknown>> = {};
  const ids = [...new Set([...ledgers.keys(), ...(tentative?.keys() ?? [])])].filter((id) => id !== '').sort();
  for (const id of ids) subledgers[id] = ledgerObject(ledgers.get(id) ?? EMPTY_BALANCES, [], tentative?.get(id));
  return { ledger: ledgerObject(ledgers.get('') ?? EMPTY_BALANCES, tiers, tentative?.get('')), subledgers };
}

// ---- tiers ----

export interface Tier {
  name: string;
  minPoints: number;
}

/**
 * The tier of an active balance (the highest whose minPoints it reaches; none below the first)
 * and how many points the next tier needs (absent at the top tier).
 */
export function tierOf(tiers: readonly Tier[], balance: number): { tier?: Tier; pointsToNextTier?: number; nextTier?: string } {
  let tier: Tier | undefined;
  let next: Tier | undefined;
  for (const t of tiers) {
    if (balance >= t.minPoints) tier = t;
    else if (!next) next = t;
  }
  return {
    ...(tier ? { tier } : {}),
    ...(next ? { nextTier: next.name, pointsToNextTier: Math.round((next.minPoints - balance) * 1e9) / 1e9 } : {}),
  };
}
