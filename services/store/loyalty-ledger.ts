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

/** One ledger: the main ledger of a program for a profile has subledgerId ''. */
export interface LedgerKey {
  programId: number;
  profileId: number;
  subledgerId: string;
}

/**
 * Locks the ledger's row for the rest of the transaction, creating it (the profile joins the
 * program) when `create` is set. Returns false when the ledger does not exist and is not created.
 */
export async function lockLedger(tx: Queryable, key: LedgerKey, options: { integrationId: string; now: Date; create: boolean }): Promise<boolean> {
  if (options.create) {
    await tx.query(
      `INSERT INTO loyalty_ledgers (program_id, profile_id, subledger_id, integration_id, joined) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
      [key.programId, key.profileId, key.subledgerId, options.integrationId, options.now.toISOString()],
    );
  }
  const rows = await tx.query(`SELECT 1 FROM loyalty_ledgers WHERE program_id = $1 AND profile_id = $2 AND subledger_id = $3 FOR UPDATE`, [
    key.programId,
    key.profileId,
    key.subledgerId,
  ]);
  return rows.length > 0;
}

const ledgerWhere = `program_id = $1 AND profile_id = $2 AND subledger_id = $3`;

/** Writes the `expire` transaction of every grant of the (locked) ledger that expired by `now` with points left. */
export async function settleExpired(tx: Queryable, key: LedgerKey, now: Date): Promise<void> {
  const expired = await tx.query<{ id: number; remaining: string; expiry_date: Date | string; name: string }>(
    `SELECT id, remaining::text AS remaining, expiry_date, name FROM loyalty_transactions
     WHERE ${ledgerWhere} AND type = 'addition' AND remaining > 0 AND expiry_date <= $4 ORDER BY expiry_date, id`,
    [key.programId, key.profileId, key.subledgerId, now.toISOString()],
  );
  for (const g of expired) {
    const at = iso(g.expiry_date)!;
    const [t] = await tx.query<{ id: number }>(
      `INSERT INTO loyalty_transactions (program_id, profile_id, subledger_id, type, amount, start_date, expiry_date, name, created)
       VALUES ($1, $2, $3, 'expire', $4, $5, $5, $6, $5) RETURNING id`,
      [key.programId, key.profileId, key.subledgerId, g.remaining, at, g.name],
    );
    await tx.query(`INSERT INTO loyalty_consumptions (transaction_id, grant_id, amount) VALUES ($1, $2, $3)`, [t!.id, g.id, g.remaining]);
    await tx.query(`UPDATE loyalty_transactions SET remaining = 0 WHERE id = $1`, [g.id]);
  }
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

/** Adds a grant to a ledger locked by lockLedger. */
export async function grantPoints(tx: Queryable, key: LedgerKey, g: Grant): Promise<number> {
  const [row] = await tx.query<{ id: number }>(
    `INSERT INTO loyalty_transactions (program_id, profile_id, subledger_id, type, amount, remaining, start_date, expiry_date, name,
       customer_session_id, event_id, user_id, created)
     VALUES ($1, $2, $3, 'addition', $4, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id`,
    [
      key.programId,
      key.profileId,
      key.subledgerId,
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

/**
 * Takes `points` from the active grants of a ledger locked by lockLedger, earliest expiry first
 * (never-expiring last), recording how much came from each grant. Returns null, changing
 * nothing, when the active balance is smaller than `points`.
 */
export async function spendPoints(
  tx: Queryable,
  key: LedgerKey,
  s: { points: string | number; name: string; customerSessionId?: string; eventId?: number; userId?: number; now: Date },
): Promise<number | null> {
  const now = s.now.toISOString();
  const points = String(s.points);
  const active = `${ledgerWhere} AND type = 'addition' AND remaining > 0 AND start_date <= $4 AND (expiry_date IS NULL OR expiry_date > $4)`;
  const params = [key.programId, key.profileId, key.subledgerId, now, points];
  const [enough] = await tx.query<{ ok: boolean }>(`SELECT COALESCE(sum(remaining), 0) >= $5::numeric AS ok FROM loyalty_transactions WHERE ${active}`, params);
  if (!enough?.ok) return null;
  // The running sum picks the grants needed and how much of the last one; exact numerics throughout.
  const takes = await tx.query<{ id: number; take: string }>(
    `SELECT id, LEAST(remaining, $5::numeric - (running - remaining))::text AS take FROM (
       SELECT id, remaining, sum(remaining) OVER (ORDER BY expiry_date ASC NULLS LAST, start_date, id) AS running
       FROM loyalty_transactions WHERE ${active}
     ) g WHERE running - remaining < $5::numeric ORDER BY running`,
    params,
  );
  const [row] = await tx.query<{ id: number }>(
    `INSERT INTO loyalty_transactions (program_id, profile_id, subledger_id, type, amount, start_date, name, customer_session_id, event_id, user_id, created)
     VALUES ($1, $2, $3, 'subtraction', $4, $5, $6, $7, $8, $9, $5) RETURNING id`,
    [key.programId, key.profileId, key.subledgerId, points, now, s.name, s.customerSessionId ?? '', s.eventId ?? null, s.userId ?? null],
  );
  for (const t of takes) {
    await tx.query(`UPDATE loyalty_transactions SET remaining = remaining - $2::numeric WHERE id = $1`, [t.id, t.take]);
    await tx.query(`INSERT INTO loyalty_consumptions (transaction_id, grant_id, amount) VALUES ($1, $2, $3)`, [row!.id, t.id, t.take]);
  }
  return row!.id;
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
