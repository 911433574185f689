// Loyalty on the Integration side (issue 6, area J): a profile's balances in a program as of a
// time (the balances endpoint), and the `loyalty` part of the v2 integration state. Balances are
// computed from the grants' remaining amounts and the deductions' debts (see
// services/store/loyalty-ledger.ts): pending points become active and points expire at their
// dates without any write.
import type { Effect } from '../engine/index.js';
import type { AppRef, LoyaltyBalancesCall } from '../actors/port.js';
import { badRequest, notFound, type Clock } from '../shared/index.js';
import {
  addDuration,
  balancesOf,
  balancesOfOwners,
  checkTier,
  EMPTY_BALANCES,
  keyParams,
  ledgerObject,
  ledgerObjects,
  ledgerWhere,
  lockLedger,
  loyaltySubscriptions,
  notifyExpiringPoints,
  roundPoints,
  settleLedger,
  subscribes,
  tierOf,
  type Balances,
  type Db,
  type LedgerKey,
  type Queryable,
  type Tentative,
  type Tier,
} from '../store/index.js';

// The balances and the ledger object moved to the store: the Management API shows card ledgers too.
export { balancesOf, ledgerObject, type Balances };

type ProgramRow = {
  id: number;
  name: string;
  title: string;
  tiers: Tier[];
  card_based: boolean;
  default_pending: string;
};

/** What the `loyalty` part of a v2 state is about. */
export interface LoyaltyStateRequest {
  /** The profile (integration ID) of the session, profile update or event; '' for none. */
  profileId: string;
  /** The session's (or event's) loyaltyCards: shown, with their ledgers, besides the profile's own cards. */
  cards?: readonly string[] | undefined;
  /**
   * Effects that are not committed (an open session's, a dry run's): the tentative balances are
   * the balances as they would be if these were committed. Committed effects count already.
   */
  uncommitted?: readonly LoyaltyEffect[] | undefined;
}

/** What the tentative balances read of an effect. */
export type LoyaltyEffect = Pick<Effect, 'effectType' | 'props'>;

const iso = (v: unknown) => (v instanceof Date ? v.toISOString() : new Date(String(v)).toISOString());

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
    const ledgers = (await balancesOf(this.db, [program.id], { profileId }, at, call.endDate !== undefined)).get(program.id) ?? new Map<string, Balances>();
    const main = ledgers.get('') ?? EMPTY_BALANCES;
    const t = tierOf(program.tiers ?? [], main.activePoints);
    const balance = {
      ...main,
      ...(t.tier ? { currentTier: { name: t.tier.name, minPoints: t.tier.minPoints } } : {}),
      ...(t.pointsToNextTier !== undefined ? { pointsToNextTier: t.pointsToNextTier, nextTierName: t.nextTier } : {}),
    };
    const subLedgerBalances: Record<string, Balances> = {};
    for (const [id, b] of [...ledgers].sort(([a], [b]) => (a < b ? -1 : 1))) if (id !== '' && (call.subledgerId === undefined || call.subledgerId === id)) subLedgerBalances[id] = b;
    if (call.subledgerId !== undefined && call.subledgerId !== '') return { subLedgerBalances: { [call.subledgerId]: ledgers.get(call.subledgerId) ?? EMPTY_BALANCES } };
    return { balance, subLedgerBalances };
  }

  /**
   * IntegrationStateV2 `loyalty`: `programs`, the profile's programs of this Application by name,
   * and `cards`, the cards of the Application's card-based programs that the profile shares or
   * that the call names, each with its own ledger and subledgers. The ledger objects carry the
   * tentative balances of the uncommitted effects.
   */
  async state(app: AppRef, request: LoyaltyStateRequest): Promise<{ cards: unknown[]; programs: Record<string, unknown> }> {
    const now = this.clock.now();
    const profileId = request.profileId === '' ? undefined : await this.profileId(app, request.profileId);
    const uncommitted = (request.uncommitted ?? []).filter((e) => e.effectType === 'addLoyaltyPoints' || e.effectType === 'deductLoyaltyPoints');
    const touched = [...new Set(uncommitted.map((e) => Number(e.props.programId)))].filter((id) => Number.isSafeInteger(id) && id > 0 && id <= 2_147_483_647);
    const rows =
      profileId === undefined && touched.length === 0
        ? []
        : await this.db.query<ProgramRow & { joined: Date | string | null }>(
            `SELECT p.id, p.name, p.title, p.tiers, p.card_based, p.default_pending,
                    (SELECT min(l.joined) FROM loyalty_ledgers l WHERE l.program_id = p.id AND l.profile_id = $2) AS joined
               FROM loyalty_programs p
               JOIN loyalty_program_applications a ON a.program_id = p.id AND a.application_id = $1
              WHERE p.account_id = $3
                AND (EXISTS (SELECT 1 FROM loyalty_ledgers l WHERE l.program_id = p.id AND l.profile_id = $2) OR p.id = ANY($4::int[]))
              ORDER BY p.id`,
            [app.applicationId, profileId ?? null, app.accountId, touched],
          );
    const programs: Record<string, unknown> = {};
    const profileLedgers = profileId === undefined ? new Map<number, Map<string, Balances>>() : await balancesOf(this.db, rows.map((r) => Number(r.id)), { profileId }, now);
    for (const r of rows) {
      if (r.card_based && r.joined === null) continue;
      const ledgers = profileLedgers.get(Number(r.id)) ?? new Map<string, Balances>();
      const mine = uncommitted.filter((e) => Number(e.props.programId) === Number(r.id) && !r.card_based && ledgerProfile(e, request.profileId) === request.profileId);
      if (r.joined === null && mine.length === 0) continue;
      const { ledger, subledgers } = ledgerObjects(ledgers, r.tiers ?? [], tentativeOf(ledgers, mine, r, now));
      programs[r.name] = {
        id: Number(r.id),
        title: r.title,
        name: r.name,
        // A program the profile joins only when the session closes has no join date yet.
        ...(r.joined !== null ? { joinDate: iso(r.joined) } : {}),
        ledger,
        ...(Object.keys(subledgers).length > 0 ? { subledgers } : {}),
      };
    }
    return { cards: await this.cards(app, profileId, request.cards ?? [], uncommitted, now), programs };
  }

  /**
   * The cards the profile shares or that are named, in programs of this Application, with their
   * ledgers. Also the inventory's cards (issue 6: a card's balances are read there and in the v2 state).
   */
  async cards(app: AppRef, profileId: number | undefined, named: readonly string[], uncommitted: readonly LoyaltyEffect[] = [], now = this.clock.now()): Promise<Array<Record<string, unknown>>> {
    const identifiers = [...new Set(named.filter((c) => typeof c === 'string' && c !== ''))];
    if (profileId === undefined && identifiers.length === 0) return [];
    const rows = await this.db.query<Record<string, unknown>>(
      `SELECT c.id, c.created, c.modified, c.identifier, c.status, c.block_reason, p.id AS program_id, p.name, p.title, p.users_per_card_limit,
              p.tiers, p.card_based, p.default_pending,
              (SELECT jsonb_agg(jsonb_build_object('integrationId', cp.integration_id, 'timestamp', x.created) ORDER BY x.created, cp.integration_id)
                 FROM loyalty_card_profiles x JOIN customer_profiles cp ON cp.id = x.profile_id WHERE x.card_id = c.id) AS profiles
         FROM loyalty_cards c
         JOIN loyalty_programs p ON p.id = c.program_id AND p.account_id = $4
         JOIN loyalty_program_applications a ON a.program_id = p.id AND a.application_id = $1
        WHERE c.id IN (SELECT card_id FROM loyalty_card_profiles WHERE profile_id = $2::bigint) OR c.identifier = ANY($3::text[])
        ORDER BY c.id`,
      [app.applicationId, profileId ?? null, identifiers, app.accountId],
    );
    // Every card's ledgers in one query (a card's transactions are all of its own program).
    const balances = await balancesOfOwners(this.db, [...new Set(rows.map((r) => Number(r.program_id)))], 'card_id', rows.map((r) => Number(r.id)), now);
    const out: Array<Record<string, unknown>> = [];
    for (const r of rows) {
      const programId = Number(r.program_id);
      const cardId = Number(r.id);
      const mine = uncommitted.filter((e) => Number(e.props.programId) === programId && e.props.cardIdentifier === r.identifier);
      const ledgers = balances.get(cardId)?.get(programId) ?? new Map<string, Balances>();
      const { ledger, subledgers } = ledgerObjects(ledgers, (r.tiers as Tier[] | null) ?? [], tentativeOf(ledgers, mine, { default_pending: String(r.default_pending) }, now));
      out.push({
        id: cardId,
        created: iso(r.created),
        modified: iso(r.modified),
        programID: programId,
        programName: r.name,
        programTitle: r.title,
        status: r.status,
        ...(r.block_reason ? { blockReason: r.block_reason } : {}),
        identifier: r.identifier,
        ...(r.users_per_card_limit !== null ? { usersPerCardLimit: r.users_per_card_limit } : {}),
        profiles: ((r.profiles as Array<{ integrationId: string; timestamp: string }> | null) ?? []).map((p) => ({ integrationId: p.integrationId, timestamp: iso(p.timestamp) })),
        ledger,
        subledgers,
      });
    }
    return out;
  }
}

/** The profile whose ledger a profile-based effect changes: an addition's recipient, else the session's. */
export const ledgerProfile = (e: LoyaltyEffect, sessionProfile: string): string =>
  e.effectType === 'addLoyaltyPoints' && typeof e.props.recipientIntegrationId === 'string' && e.props.recipientIntegrationId !== '' ? e.props.recipientIntegrationId : sessionProfile;

/**
 * The tentative balances of a ledger's subledgers under uncommitted effects, as the commit would
 * apply them: an addition that starts now (no pendingDuration, and the program's defaultPending
 * immediate) pays the debt first and adds the rest to the current balance, a later one is
 * pending; a deduction takes the current balance and leaves the rest as debt (the evaluation
 * refused deductions a program without negative balances could not cover).
 */
function tentativeOf(ledgers: ReadonlyMap<string, Balances>, effects: readonly LoyaltyEffect[], program: Pick<ProgramRow, 'default_pending'>, now: Date): Map<string, Tentative> {
  const out = new Map<string, Tentative>();
  for (const e of effects) {
    const sub = typeof e.props.subLedgerId === 'string' ? e.props.subLedgerId : '';
    const b = ledgers.get(sub) ?? EMPTY_BALANCES;
    const t = out.get(sub) ?? { currentBalance: b.activePoints, pendingBalance: b.pendingPoints, negativeBalance: b.negativePoints };
    const value = Number(e.props.value);
    if (e.effectType === 'addLoyaltyPoints') {
      const start = Date.parse(String(e.props.startDate));
      const pending = (Number.isFinite(start) && start > now.getTime()) || program.default_pending !== 'immediate';
      if (pending) t.pendingBalance = roundPoints(t.pendingBalance + value);
      else {
        const pay = Math.min(t.negativeBalance, value);
        t.negativeBalance = roundPoints(t.negativeBalance - pay);
        t.currentBalance = roundPoints(t.currentBalance + value - pay);
      }
    } else {
      const take = Math.min(t.currentBalance, value);
      t.currentBalance = roundPoints(t.currentBalance - take);
      t.negativeBalance = roundPoints(t.negativeBalance + value - take);
    }
    out.set(sub, t);
  }
  return out;
}

export interface SettleOptions {
  /** Most ledgers one round settles (default 100); the next round takes the rest. */
  batch?: number;
  /** Called when a round wrote notifications, so that they leave at once. */
  outboundWritten?: () => void;
}

type DueLedger = { program_id: number; profile_id: number | null; card_id: number | null; subledger_id: string };

/**
 * The loyalty scheduler's step (run every few seconds by each node): each due ledger, of a
 * profile or a card, in its own transaction under the ledger's row lock. A ledger is due when a
 * grant expired by `now` with points left (written off), a debt can be paid by active points
 * (pending points that started since), a pending grant has become active (which may move the
 * tier), or a grant expires within its program's expiringPointsNotice and nobody was told yet.
 * Under the lock it settles the ledger, sends LoyaltyPointsExpiring for the grants due one and,
 * for a main ledger, TierUpgrade / TierDowngrade when the active balance crossed a tier since the
 * tier last notified (only for programs whose Applications subscribe to those types). Balances
 * need no other write (they are computed at read time). Exactly once across nodes: settlement only
 * touches grants with points left and debts not paid, announcements only grants not announced, the
 * tier only when it differs from the one recorded, all under the lock, so a second node (or a
 * ledger writer) that gets the lock next finds nothing to do. Returns the number of ledgers seen.
 */
export async function settleDueLedgers(db: Db, now: Date, options: SettleOptions = {}): Promise<number> {
  const batch = options.batch ?? 100;
  const at = now.toISOString();
  const due = await db.query<DueLedger>(
    `(SELECT program_id, profile_id, card_id, subledger_id FROM loyalty_transactions
       WHERE type = 'addition' AND remaining > 0 AND expiry_date <= $1)
     UNION
     (SELECT d.program_id, d.profile_id, d.card_id, d.subledger_id FROM loyalty_transactions d
       WHERE d.type = 'subtraction' AND d.uncovered > 0
         AND EXISTS (SELECT 1 FROM loyalty_transactions g
                      WHERE g.program_id = d.program_id AND g.subledger_id = d.subledger_id
                        AND ((d.profile_id IS NOT NULL AND g.profile_id = d.profile_id) OR (d.card_id IS NOT NULL AND g.card_id = d.card_id))
                        AND g.type = 'addition' AND g.remaining > 0 AND g.start_date <= $1 AND (g.expiry_date IS NULL OR g.expiry_date > $1)))
     UNION
     (SELECT program_id, profile_id, card_id, subledger_id FROM loyalty_transactions WHERE activation_pending AND start_date <= $1)
     LIMIT $2`,
    [at, batch],
  );
  // Announcements are due only in programs whose Applications listen for them.
  const announcing = await db.query<{ id: number; notice: string }>(
    `SELECT p.id, p.expiring_points_notice AS notice FROM loyalty_programs p
      WHERE EXISTS (SELECT 1 FROM loyalty_program_applications pa
                      JOIN notification_webhooks w ON w.application_id = pa.application_id AND w.enabled AND w.notification_types ? 'LoyaltyPointsExpiring'
                     WHERE pa.program_id = p.id)`,
  );
  const until = new Map<number, Date>();
  for (const p of announcing) {
    const end = addDuration(now, p.notice, '/expiringPointsNotice');
    until.set(Number(p.id), end);
    if (due.length >= batch) continue;
    due.push(
      ...(await db.query<DueLedger>(
        `SELECT DISTINCT program_id, profile_id, card_id, subledger_id FROM loyalty_transactions
          WHERE program_id = $1 AND type = 'addition' AND remaining > 0 AND NOT expiry_notified AND expiry_date > $2 AND expiry_date <= $3
          LIMIT $4`,
        [p.id, at, end.toISOString(), batch - due.length],
      )),
    );
  }
  const seen = new Map<string, LedgerKey>();
  for (const d of due) {
    const key: LedgerKey =
      d.card_id !== null
        ? { programId: Number(d.program_id), cardId: Number(d.card_id), subledgerId: d.subledger_id }
        : { programId: Number(d.program_id), profileId: Number(d.profile_id), subledgerId: d.subledger_id };
    seen.set(`${key.programId}|${d.card_id ?? ''}|${d.profile_id ?? ''}|${key.subledgerId}`, key);
  }
  const subs = await loyaltySubscriptions(db, [...new Set([...seen.values()].map((k) => k.programId))]);
  let outbound = 0;
  for (const key of seen.values()) {
    outbound += await db.transaction(async (tx) => {
      if (!(await lockLedger(tx, key, { integrationId: '', now, create: false }))) return 0;
      await settleLedger(tx, key, now);
      await tx.query(
        `UPDATE loyalty_transactions SET activation_pending = false
          WHERE ${ledgerWhere(key)} AND activation_pending AND start_date <= $4`,
        [...keyParams(key), at],
      );
      let written = 0;
      const end = until.get(key.programId);
      if (end) written += await notifyExpiringPoints(tx, key, now, end);
      if (subscribes(subs, key.programId, 'TierUpgrade', 'TierDowngrade')) written += await checkTier(tx, key, now);
      return written;
    });
  }
  if (outbound > 0) options.outboundWritten?.();
  return seen.size;
}
