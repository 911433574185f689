// Loyalty on the Integration side (issue 6, area J): a profile's balances in a program as of a
// time (the balances endpoint), and the `loyalty` part of the v2 integration state. Balances are
// computed from the grants' remaining amounts (see services/store/loyalty-ledger.ts): pending
// points become active and points expire at their dates without any write.
import type { AppRef, LoyaltyBalancesCall } from '../actors/port.js';
import { badRequest, notFound, type Clock } from '../shared/index.js';
import { lockLedger, settleExpired, tierOf, type Db, type Queryable, type Tier } from '../store/index.js';



export interface Balances {
  activePoints: number;
  pendingPoints: number;
  spentPoints: number;
  expiredPoints: number;
  negativePoints: number;
}

const round = (n: unknown): number => Math.round(Number(n ?? 0) * 1e9) / 1e9;
const EMPTY: Balances = { activePoints: 0, pendingPoints: 0, spentPoints: 0, expiredPoints: 0, negativePoints: 0 };

/**
 * Balances per (program, subledger) of one profile as of `at`, for the given programs. Spent is
 * every subtraction until `at`; expired the `expire` transactions plus what is left of grants
 * past their expiry (not settled yet). With `historic` (a past `at`, the balances' `endDate`)
 * transactions created after `at` do not count: grants made later are left out, and what later
 * subtractions and expiries took from a grant is given back to its remaining points.
 */
export async function balancesOf(db: Queryable, programIds: readonly number[], profileId: number, at: Date, historic = false): Promise<Map<number, Map<string, Balances>>> {
  const out = new Map<number, Map<string, Balances>>();
  if (programIds.length === 0) return out;
  const source = historic
    ? `(SELECT t.program_id, t.profile_id, t.subledger_id, t.type, t.amount, t.start_date, t.expiry_date, t.created,
               CASE WHEN t.type = 'addition' THEN t.remaining + COALESCE((SELECT SUM(c.amount) FROM loyalty_consumptions c
                   JOIN loyalty_transactions x ON x.id = c.transaction_id WHERE c.grant_id = t.id AND x.created > $3), 0) END AS remaining
          FROM loyalty_transactions t WHERE t.program_id = ANY($1::int[]) AND t.profile_id = $2 AND t.created <= $3) AS loyalty_transactions`
    : 'loyalty_transactions';
  const rows = await db.query<{ program_id: number; subledger_id: string; active: string; pending: string; spent: string; expired: string }>(
    `SELECT program_id, subledger_id,
            COALESCE(SUM(remaining) FILTER (WHERE type = 'addition' AND start_date <= $3 AND (expiry_date IS NULL OR expiry_date > $3)), 0)::text AS active,
            COALESCE(SUM(remaining) FILTER (WHERE type = 'addition' AND start_date > $3), 0)::text AS pending,
            COALESCE(SUM(amount) FILTER (WHERE type = 'subtraction' AND created <= $3), 0)::text AS spent,
            (COALESCE(SUM(amount) FILTER (WHERE type = 'expire' AND created <= $3), 0)
              + COALESCE(SUM(remaining) FILTER (WHERE type = 'addition' AND expiry_date <= $3), 0))::text AS expired
       FROM ${source} WHERE program_id = ANY($1::int[]) AND profile_id = $2
      GROUP BY program_id, subledger_id`,
    [programIds, profileId, at.toISOString()],
  );
  for (const r of rows) {
    const byLedger = out.get(Number(r.program_id)) ?? new Map<string, Balances>();
    byLedger.set(r.subledger_id, { activePoints: round(r.active), pendingPoints: round(r.pending), spentPoints: round(r.spent), expiredPoints: round(r.expired), negativePoints: 0 });
    out.set(Number(r.program_id), byLedger);
  }
  return out;
}

/** The ledger object of the spec (IntegrationStateV2 `loyalty`): balances, tier and points to the next tier. */
export function ledgerObject(b: Balances, tiers: readonly Tier[]): Record<string, unknown> {
  const t = tierOf(tiers, b.activePoints);
  return {
    currentBalance: b.activePoints,
    pendingBalance: b.pendingPoints,
    negativeBalance: b.negativePoints,
    expiredBalance: b.expiredPoints,
    spentBalance: b.spentPoints,
    // Nothing of a session is tentative once its response is written: what the close committed is counted above.
    tentativeCurrentBalance: b.activePoints,
    tentativePendingBalance: b.pendingPoints,
    tentativeNegativeBalance: b.negativePoints,
    ...(t.tier ? { currentTier: { name: t.tier.name, minPoints: t.tier.minPoints } } : {}),
    ...(t.pointsToNextTier !== undefined ? { pointsToNextTier: t.pointsToNextTier } : {}),
  };
}

type ProgramRow = {
  id: number;
  name: string;
  title: string;
  tiers: Tier[];
};

export class LoyaltyService {
  constructor(
    private readonly db: Queryable,
    private readonly clock: Clock,
  ) {}

  private async profileId(app: AppRef, integrationId: string): Promise<number | undefined> {
    const [row] = await this.db.query<{ id: number }>(`SELECT id FROM customer_profiles WHERE account_id = $1 AND integration_id = $2`, [app.accountId, integrationId]);
    return row ? Number(row.id) : undefined;
  }

  /**
   * GET /v1/loyalty_programs/{programID}/profile/{integrationID}/balances: a program the
   * Application subscribes to (404 otherwise), a profile of the account (404 otherwise).
   */
  async balances(call: LoyaltyBalancesCall): Promise<Record<string, unknown>> {
    let at = this.clock.now();
    if (call.endDate !== undefined) {
      at = new Date(call.endDate);
      if (!Number.isFinite(at.getTime())) throw badRequest('endDate must be a date-time', '/endDate');
    }
    const [program] = await this.db.query<ProgramRow>(
      `SELECT p.id, p.name, p.title, p.tiers FROM loyalty_programs p
         JOIN loyalty_program_applications a ON a.program_id = p.id AND a.application_id = $1
        WHERE p.id = $2 AND p.account_id = $3`,
      [call.app.applicationId, call.programId, call.app.accountId],
    );
    if (!program) throw notFound('Loyalty program', '/programID');
    const profileId = await this.profileId(call.app, call.integrationId);
    if (profileId === undefined) throw notFound('Customer profile', '/integrationID');
    const ledgers = (await balancesOf(this.db, [program.id], profileId, at, call.endDate !== undefined)).get(program.id) ?? new Map<string, Balances>();
    const main = ledgers.get('') ?? EMPTY;
    const t = tierOf(program.tiers ?? [], main.activePoints);
    const balance = {
      ...main,
      ...(t.tier ? { currentTier: { name: t.tier.name, minPoints: t.tier.minPoints } } : {}),
      ...(t.pointsToNextTier !== undefined ? { pointsToNextTier: t.pointsToNextTier, nextTierName: t.nextTier } : {}),
    };
    const subLedgerBalances: Record<string, Balances> = {};
    for (const [id, b] of [...ledgers].sort(([a], [b]) => (a < b ? -1 : 1))) if (id !== '' && (call.subledgerId === undefined || call.subledgerId === id)) subLedgerBalances[id] = b;
    if (call.subledgerId !== undefined && call.subledgerId !== '') return { subLedgerBalances: { [call.subledgerId]: ledgers.get(call.subledgerId) ?? EMPTY } };
    return { balance, subLedgerBalances };
  }

  /** IntegrationStateV2 `loyalty`: the profile's programs of this Application by name (cards: none yet). */
  async state(app: AppRef, integrationId: string): Promise<{ cards: unknown[]; programs: Record<string, unknown> }> {
    const programs: Record<string, unknown> = {};
    if (integrationId === '') return { cards: [], programs };
    const profileId = await this.profileId(app, integrationId);
    if (profileId === undefined) return { cards: [], programs };
    const rows = await this.db.query<ProgramRow & { joined: Date | string }>(
      `SELECT p.id, p.name, p.title, p.tiers, min(l.joined) AS joined FROM loyalty_programs p
         JOIN loyalty_program_applications a ON a.program_id = p.id AND a.application_id = $1
         JOIN loyalty_ledgers l ON l.program_id = p.id AND l.profile_id = $2
        GROUP BY p.id, p.name, p.title, p.tiers ORDER BY p.id`,
      [app.applicationId, profileId],
    );
    const balances = await balancesOf(this.db, rows.map((r) => Number(r.id)), profileId, this.clock.now());
    for (const r of rows) {
      const ledgers = balances.get(Number(r.id)) ?? new Map<string, Balances>();
      const subledgers: Record<string, unknown> = {};
      for (const [id, b] of ledgers) if (id !== '') subledgers[id] = ledgerObject(b, []);
      programs[r.name] = {
        id: Number(r.id),
        title: r.title,
        name: r.name,
        joinDate: r.joined instanceof Date ? r.joined.toISOString() : String(r.joined),
        ledger: ledgerObject(ledgers.get('') ?? EMPTY, r.tiers ?? []),
        ...(Object.keys(subledgers).length > 0 ? { subledgers } : {}),
      };
    }
    return { cards: await this.cards(app, profileId), programs };
  }

  /** The cards the profile shares, in programs of this Application (their ledgers: not built yet). */
  private async cards(app: AppRef, profileId: number): Promise<unknown[]> {
    const rows = await this.db.query<Record<string, unknown>>(
      `SELECT c.id, c.created, c.modified, c.identifier, c.status, c.block_reason, p.id AS program_id, p.name, p.title, p.users_per_card_limit,
              (SELECT jsonb_agg(jsonb_build_object('integrationId', cp.integration_id, 'timestamp', x.created) ORDER BY x.created, cp.integration_id)
                 FROM loyalty_card_profiles x JOIN customer_profiles cp ON cp.id = x.profile_id WHERE x.card_id = c.id) AS profiles
         FROM loyalty_card_profiles mine
         JOIN loyalty_cards c ON c.id = mine.card_id
         JOIN loyalty_programs p ON p.id = c.program_id
         JOIN loyalty_program_applications a ON a.program_id = p.id AND a.application_id = $1
        WHERE mine.profile_id = $2 ORDER BY c.id`,
      [app.applicationId, profileId],
    );
    const iso = (v: unknown) => (v instanceof Date ? v.toISOString() : String(v));
    return rows.map((r) => ({
      id: Number(r.id),
      created: iso(r.created),
      modified: iso(r.modified),
      programID: Number(r.program_id),
      programName: r.name,
      programTitle: r.title,
      status: r.status,
      ...(r.block_reason ? { blockReason: r.block_reason } : {}),
      identifier: r.identifier,
      ...(r.users_per_card_limit !== null ? { usersPerCardLimit: r.users_per_card_limit } : {}),
      profiles: ((r.profiles as Array<{ integrationId: string; timestamp: string }> | null) ?? []).map((p) => ({ integrationId: p.integrationId, timestamp: new Date(p.timestamp).toISOString() })),
    }));
  }
}

/**
 * The loyalty scheduler's step (run every few seconds by each node): writes the `expire`
 * transaction of every grant that expired by `now` with points left, ledger by ledger, each in its
 * own transaction under the ledger's row lock. Pending points becoming active and tiers following
 * the active balance need no write (balances are computed at read time); expiry is the change the
 * ledger must record. Exactly once across nodes: settleExpired only touches grants with points
 * left and zeroes them under the lock, so a second node (or a ledger writer) that gets the lock
 * next finds nothing to settle. Returns the number of ledgers settled.
 */
export async function settleDueLedgers(db: Db, now: Date, batch = 100): Promise<number> {
  const due = await db.query<{ program_id: number; profile_id: number; subledger_id: string }>(
    `SELECT DISTINCT program_id, profile_id, subledger_id FROM loyalty_transactions
      WHERE type = 'addition' AND remaining > 0 AND expiry_date <= $1 LIMIT $2`,
    [now.toISOString(), batch],
  );
  for (const d of due) {
    const key = { programId: Number(d.program_id), profileId: Number(d.profile_id), subledgerId: d.subledger_id };
    await db.transaction(async (tx) => {
      if (await lockLedger(tx, key, { integrationId: '', now, create: false })) await settleExpired(tx, key, now);
    });
  }
  return due.length;
}
