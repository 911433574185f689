// Loyalty notifications (addendum "Loyalty notifications"): LoyaltyPointsAdded / Deducted for
// every change of a ledger's points, LoyaltyPointsExpiring once per grant before its expiry, and
// TierUpgrade / TierDowngrade when the active balance of a main ledger crosses a tier. A program is
// account-level and shared by Applications, and so is every change of its ledgers: each
// notification goes to the notification webhooks of every Application that subscribes to the
// program (one request per subscribed, enabled webhook). Every writer of a ledger calls these in
// its transaction, under the ledger's lock, and only when the program has subscribers of the type
// (loyaltySubscriptions, or the same subquery folded into a query the writer makes anyway).
import type { Queryable } from './db.js';
import { netOfDebt, ownerColumn, tierOf, type LedgerKey, type Tier } from './loyalty-ledger.js';

export const LOYALTY_NOTIFICATION_TYPES = ['LoyaltyPointsAdded', 'LoyaltyPointsDeducted', 'LoyaltyPointsExpiring', 'TierUpgrade', 'TierDowngrade'] as const;
export type LoyaltyNotificationType = (typeof LOYALTY_NOTIFICATION_TYPES)[number];

/** By program id, the loyalty notification types some Application of the program subscribes to. */
export type LoyaltySubscriptions = ReadonlyMap<number, ReadonlySet<string>>;

/**
 * SQL (a json array) of the loyalty notification types that enabled notification webhooks of the
 * Applications subscribing to the program `<programId>` (an SQL expression) subscribe to.
 */
export const subscribedLoyaltyTypesSql = (programId: string): string =>
  `(SELECT coalesce(json_agg(DISTINCT t.type), '[]'::json)
      FROM loyalty_program_applications spa
      JOIN notification_webhooks snw ON snw.application_id = spa.application_id AND snw.enabled
      CROSS JOIN LATERAL jsonb_array_elements_text(snw.notification_types) AS t(type)
     WHERE spa.program_id = ${programId} AND t.type IN (${LOYALTY_NOTIFICATION_TYPES.map((x) => `'${x}'`).join(', ')}))`;

/** The subscriptions of these programs (one query; none for an empty list). */
export async function loyaltySubscriptions(db: Queryable, programIds: readonly number[]): Promise<Map<number, Set<string>>> {
  const out = new Map<number, Set<string>>();
  if (programIds.length === 0) return out;
  const rows = await db.query<{ id: number; types: string[] }>(`SELECT p.id, ${subscribedLoyaltyTypesSql('p.id')} AS types FROM loyalty_programs p WHERE p.id = ANY($1::int[])`, [
    [...new Set(programIds)],
  ]);
  for (const r of rows) if (r.types.length > 0) out.set(Number(r.id), new Set(r.types));
  return out;
}

export const subscribes = (subs: LoyaltySubscriptions, programId: number, ...types: LoyaltyNotificationType[]): boolean =>
  types.some((t) => subs.get(programId)?.has(t) === true);

/**
 * Adds one request per body for every enabled notification webhook, subscribed to the type, of
 * every Application that subscribes to the program; call it in the transaction of the change.
 * Returns the requests written.
 */
export async function enqueueProgramNotifications(
  tx: Queryable,
  batch: { programId: number; notificationType: LoyaltyNotificationType; bodies: readonly unknown[] },
  now: Date,
): Promise<number> {
  if (batch.bodies.length === 0) return 0;
  const rows = await tx.query<{ n: number }>(
    `WITH ins AS (
       INSERT INTO outbox (notification_id, account_id, application_id, kind, endpoint_id, notification_type, method, url, headers, body, created, next_attempt_at)
       SELECT gen_random_uuid(), p.account_id, w.application_id, 'notification', w.id, $2, 'POST', w.url, w.headers, b.body::text, $4, $4
         FROM loyalty_programs p
         JOIN loyalty_program_applications pa ON pa.program_id = p.id
         JOIN notification_webhooks w ON w.application_id = pa.application_id AND w.enabled AND w.notification_types ? $2,
              json_array_elements($3::json) WITH ORDINALITY AS b(body, k)
        WHERE p.id = $1
        ORDER BY w.id, b.k
       RETURNING 1
     )
     SELECT count(*)::int AS n FROM ins`,
    [batch.programId, batch.notificationType, JSON.stringify(batch.bodies), now.toISOString()],
  );
  return rows[0]?.n ?? 0;
}

/** Who owns a ledger, as notifications name it. */
export interface LedgerOwnerNames {
  /** The profile's integration ID; in a card-based program, the profile that caused the change ('' for none). */
  profileIntegrationId: string;
  /** The card, in a card-based program. */
  cardIdentifier?: string | undefined;
}

const ownerFields = (o: LedgerOwnerNames) => ({
  ProfileIntegrationID: o.profileIntegrationId,
  ...(o.cardIdentifier !== undefined ? { CardIdentifier: o.cardIdentifier } : {}),
});

/** One change of a ledger's points: a grant, a deduction, or the rollback of either. */
export interface PointsChange extends LedgerOwnerNames {
  notificationType: 'LoyaltyPointsAdded' | 'LoyaltyPointsDeducted';
  programId: number;
  subledgerId: string;
  amount: number;
  /** The effect's or request's name, or `rollback`. */
  reason: string;
  typeOfChange: 'rule_engine' | 'management_api';
  employeeName: string;
  userId?: number | undefined;
  sessionIntegrationId: string;
  transactionId: number;
  /** New points only (not a deduction given back). */
  startDate?: Date | undefined;
  expiryDate?: Date | null | undefined;
  created: Date;
}

export function pointsChangedBody(c: PointsChange): Record<string, unknown> {
  return {
    NotificationType: c.notificationType,
    ProgramID: c.programId,
    ...ownerFields(c),
    SubLedgerID: c.subledgerId,
    Amount: c.amount,
    Reason: c.reason,
    TypeOfChange: c.typeOfChange,
    EmployeeName: c.employeeName,
    ...(c.userId !== undefined ? { UserID: c.userId } : {}),
    SessionIntegrationID: c.sessionIntegrationId,
    TransactionID: c.transactionId,
    ...(c.startDate !== undefined ? { StartDate: c.startDate.toISOString() } : {}),
    ...(c.expiryDate !== undefined ? { ExpiryDate: c.expiryDate?.toISOString() ?? null } : {}),
    Created: c.created.toISOString(),
  };
}

/** The changes as notifications, in their order, for the types their programs' Applications subscribe to. Returns the requests written. */
export async function notifyPointsChanges(tx: Queryable, changes: readonly PointsChange[], subs: LoyaltySubscriptions, now: Date): Promise<number> {
  const groups = new Map<string, { programId: number; type: PointsChange['notificationType']; bodies: unknown[] }>();
  for (const c of changes) {
    if (!subscribes(subs, c.programId, c.notificationType)) continue;
    const key = `${c.programId}|${c.notificationType}`;
    const g = groups.get(key) ?? { programId: c.programId, type: c.notificationType, bodies: [] };
    g.bodies.push(pointsChangedBody(c));
    groups.set(key, g);
  }
  let written = 0;
  for (const g of groups.values()) written += await enqueueProgramNotifications(tx, { programId: g.programId, notificationType: g.type, bodies: g.bodies }, now);
  return written;
}

/**
 * TierUpgrade / TierDowngrade when the tier of the (locked) main ledger's active balance is not
 * the one last notified: the ledger then records the new one, so each crossing is notified once
 * however many writers or nodes look. A renamed tier at the same minPoints is recorded without a
 * notification. `causedBy` names the profile in a card-based program. Returns the requests
 * written; call it only when the program has TierUpgrade or TierDowngrade subscribers (what a
 * ledger goes through unwatched is notified, from the tier last notified, at its next check).
 */
export async function checkTier(tx: Queryable, key: LedgerKey, now: Date, causedBy = ''): Promise<number> {
  if (key.subledgerId !== '') return 0;
  const owner = key.cardId ?? key.profileId;
  const [row] = await tx.query<{ integration_id: string; tier_name: string | null; tier_min_points: string | null; tiers: Tier[]; card: string | null }>(
    `SELECT l.integration_id, l.tier_name, l.tier_min_points::text AS tier_min_points, p.tiers, c.identifier AS card
       FROM loyalty_ledgers l JOIN loyalty_programs p ON p.id = l.program_id LEFT JOIN loyalty_cards c ON c.id = l.card_id
      WHERE l.program_id = $1 AND l.${ownerColumn(key)} = $2 AND l.subledger_id = ''`,
    [key.programId, owner],
  );
  if (!row || (row.tiers ?? []).length === 0) return 0;
  // Points written active (start = creation) count as active whatever `now` is: writers racing for
  // the lock took their `now` before waiting, so a grant committed just before may start a few
  // milliseconds after this writer's `now`, and would otherwise flip the tier back and forth.
  const [sums] = await tx.query<{ active: string; debt: string }>(
    `SELECT COALESCE(SUM(remaining) FILTER (WHERE type = 'addition' AND (start_date <= $3 OR start_date <= created) AND (expiry_date IS NULL OR expiry_date > $3)), 0)::text AS active,
            COALESCE(SUM(uncovered) FILTER (WHERE type = 'subtraction'), 0)::text AS debt
       FROM loyalty_transactions WHERE program_id = $1 AND ${ownerColumn(key)} = $2 AND subledger_id = ''`,
    [key.programId, owner, now.toISOString()],
  );
  const balances = netOfDebt(Number(sums?.active ?? 0), Number(sums?.debt ?? 0));
  const tier = tierOf(row.tiers, balances.activePoints).tier;
  if ((tier?.name ?? null) === row.tier_name) return 0;
  await tx.query(`UPDATE loyalty_ledgers SET tier_name = $3, tier_min_points = $4 WHERE program_id = $1 AND ${ownerColumn(key)} = $2 AND subledger_id = ''`, [
    key.programId,
    owner,
    tier?.name ?? null,
    tier ? String(tier.minPoints) : null,
  ]);
  const before = row.tier_min_points === null ? -Infinity : Number(row.tier_min_points);
  const after = tier ? tier.minPoints : -Infinity;
  if (before === after) return 0;
  const type = after > before ? 'TierUpgrade' : 'TierDowngrade';
  const body = {
    NotificationType: type,
    ProgramID: key.programId,
    ...ownerFields(row.card !== null ? { profileIntegrationId: causedBy, cardIdentifier: row.card } : { profileIntegrationId: row.integration_id }),
    OldTier: row.tier_name === null ? null : { Name: row.tier_name, MinPoints: before },
    NewTier: tier ? { Name: tier.name, MinPoints: tier.minPoints } : null,
    ActivePoints: balances.activePoints,
    Timestamp: now.toISOString(),
  };
  return enqueueProgramNotifications(tx, { programId: key.programId, notificationType: type, bodies: [body] }, now);
}

/**
 * LoyaltyPointsExpiring for every grant of the (locked) ledger with points left that expires
 * after `now` and by `until` and was not announced yet; each is marked announced in the same
 * statement, so a grant is announced once however many nodes look. Returns the requests written.
 */
export async function notifyExpiringPoints(tx: Queryable, key: LedgerKey, now: Date, until: Date): Promise<number> {
  const grants = await tx.query<{ id: number; remaining: string; start_date: Date | string; expiry_date: Date | string; name: string }>(
    `UPDATE loyalty_transactions SET expiry_notified = true
      WHERE program_id = $1 AND ${ownerColumn(key)} = $2 AND subledger_id = $3 AND type = 'addition' AND remaining > 0 AND NOT expiry_notified
        AND expiry_date > $4 AND expiry_date <= $5
      RETURNING id, remaining::text AS remaining, start_date, expiry_date, name`,
    [key.programId, key.cardId ?? key.profileId, key.subledgerId, now.toISOString(), until.toISOString()],
  );
  if (grants.length === 0) return 0;
  const [owner] = await tx.query<{ integration_id: string; card: string | null }>(
    `SELECT l.integration_id, c.identifier AS card FROM loyalty_ledgers l LEFT JOIN loyalty_cards c ON c.id = l.card_id
      WHERE l.program_id = $1 AND l.${ownerColumn(key)} = $2 AND l.subledger_id = $3`,
    [key.programId, key.cardId ?? key.profileId, key.subledgerId],
  );
  const names = owner?.card ? { profileIntegrationId: '', cardIdentifier: owner.card } : { profileIntegrationId: owner?.integration_id ?? '' };
  const iso = (v: Date | string) => new Date(v).toISOString();
  const bodies = grants
    .sort((a, b) => Number(a.id) - Number(b.id))
    .map((g) => ({
      NotificationType: 'LoyaltyPointsExpiring',
      ProgramID: key.programId,
      ...ownerFields(names),
      SubLedgerID: key.subledgerId,
      Amount: Number(g.remaining),
      Reason: g.name,
      StartDate: iso(g.start_date),
      ExpiryDate: iso(g.expiry_date),
      TransactionID: Number(g.id),
    }));
  return enqueueProgramNotifications(tx, { programId: key.programId, notificationType: 'LoyaltyPointsExpiring', bodies }, now);
}
