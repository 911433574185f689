// What makes effects final (rules.md section 7), inside the caller's transaction: redemptions and
// budgets counted with conditional updates, created coupons and referrals stored, campaign
// statistics kept. Every change is recorded as a counter entry so that cancel, returns and reopen
// give back exactly what was taken.
import type { Effect } from '../engine/index.js';
import { randomBytes } from 'node:crypto';
import { addExact, AppError } from '../shared/index.js';
import {
  addDuration,
  checkTier,
  couponNotificationPages,
  couponView,
  enqueueNotifications,
  enqueueOutbound,
  grantPoints,
  lockLedger,
  loyaltySubscriptions,
  notifyPointsChanges,
  payDebts,
  ownerColumn,
  referralView,
  settleLedger,
  spendPoints,
  STATS_DELTA_COLUMNS,
  statsDeltaJson,
  statsDeltaSelect,
  subscribedLoyaltyTypesSql,
  subscribes,
  type CampaignStatsDelta,
  type LedgerKey,
  type LoyaltySubscriptions,
  type PointsChange,
  type Queryable,
} from '../store/index.js';
import { counterId, normalizeCode, type LoadedFacts, type LimitKey } from './facts.js';
import type { ApplicationSettings, CampaignSnapshot } from './snapshot.js';
import { commitAchievementProgress, rollbackAchievementProgress, type AchievementEntry } from './achievements.js';
import { webhookEffects, webhookRequests } from './webhooks.js';
import { ledgerProfile } from './loyalty.js';
import type { WebhookDefinition } from './snapshot.js';

/**
 * A counter ran out between evaluation and commit (another session took the last use of a coupon
 * or the last of a budget): the caller evaluates again with fresh facts, which then reject.
 */
export class CommitRaceError extends AppError {
  constructor(what: string) {
    // Retried by the caller; should it escape, it is a retryable conflict for the client.
    super('conflict', `limit reached concurrently: ${what}; retry`, [{ title: 'Conflict', details: `limit reached concurrently: ${what}`, source: { pointer: '' } }]);
  }
}

/** One change a commit made to a shared counter, as stored with the session for its rollback. */
export type CounterEntry =
  | { t: 'coupon'; id: number; campaignId: number; discount: number }
  | { t: 'referral'; id: number; campaignId: number; friend: string }
  | { t: 'limit'; campaignId: number; couponId: number; action: string; period: string; entity: string; amount: number }
  | ({ t: 'stats' } & CampaignStatsDelta)
  /** A membership that addToAudience made (added) or removeFromAudience ended (not added). */
  | { t: 'audience'; campaignId: number; audienceId: number; profile: string; added: boolean }
  /** Progress that increaseAchievementProgress added to a run (issue 6, area K). */
  | AchievementEntry
  /**
   * A loyalty transaction that addLoyaltyPoints (kind add: a grant) or deductLoyaltyPoints (kind
   * deduct: a subtraction) wrote; `amount` is what of it is still committed.
   */
  | {
      t: 'loyalty';
      campaignId: number;
      kind: 'add' | 'deduct';
      programId: number;
      /** The ledger's profile; 0 for a card's ledger. */
      profileId: number;
      /** The ledger's card, in a card-based program. */
      cardId?: number;
      subledgerId: string;
      transactionId: number;
      amount: number;
    };

export const DISCOUNT_EFFECTS: ReadonlySet<string> = new Set(['setDiscount', 'setDiscountPerItem', 'setDiscountPerAdditionalCost']);
/** Amounts that returns give back pro rata; counts (redemptions) stay. */
const AMOUNT_LIMIT_ACTIONS: ReadonlySet<string> = new Set(['setDiscount', 'addLoyaltyPoints']);

export interface EffectsCommit {
  app: ApplicationSettings;
  campaigns: readonly CampaignSnapshot[];
  /** The Application's webhooks (triggerWebhook effects call them). */
  webhooks: ReadonlyMap<number, WebhookDefinition>;
  /** The notification types the Application's notification webhooks subscribe to (the snapshot's). */
  notificationTypes: ReadonlySet<string>;
  sessionId: string;
  profileId: string;
  effects: readonly Effect[];
  loaded: LoadedFacts;
  now: Date;
  /** The Integration API request that makes the effects final (webhook logs name it). */
  requestUuid?: string | undefined;
}

export interface EffectsCommitResult {
  counters: CounterEntry[];
  createdCoupons: Array<Record<string, unknown>>;
  createdReferrals: Array<Record<string, unknown>>;
  /** Outbound requests (webhook calls, notifications) written to the outbox: the caller wakes the dispatcher after its commit. */
  outbound: number;
  /** The loyalty transactions written: the ledger entries of the commit's event. */
  ledgerEntries: LedgerWrite[];
}

const sum = (values: number[]) => (values.length === 0 ? 0 : addExact(...values));

/** How much of a limit's action the effects use (what rules.md 6.4 counts). */
function amountFor(key: LimitKey, effects: readonly Effect[], acceptedCoupon: Map<number, string>): number {
  if (key.couponValue !== undefined && acceptedCoupon.get(key.campaignId) !== key.couponValue) return 0;
  const mine = effects.filter((e) => e.campaignId === key.campaignId);
  switch (key.action) {
    case 'redeemCoupon':
      return mine.filter((e) => e.effectType === 'acceptCoupon').length;
    case 'redeemReferral':
      return mine.filter((e) => e.effectType === 'acceptReferral').length;
    case 'setDiscount':
      return sum(mine.filter((e) => DISCOUNT_EFFECTS.has(e.effectType)).map((e) => e.props.value as number));
    case 'setDiscountEffect':
      return mine.filter((e) => DISCOUNT_EFFECTS.has(e.effectType)).length;
    case 'createCoupon':
      return mine.filter((e) => e.effectType === 'couponCreated').length;
    case 'createReferral':
      return mine.filter((e) => e.effectType === 'referralCreated').length;
    case 'addLoyaltyPoints':
      return sum(mine.filter((e) => e.effectType === 'addLoyaltyPoints').map((e) => e.props.value as number));
    default:
      return 0;
  }
}

/** Every random code tried was taken: rare, and a retry draws new ones. */
export const noFreeCode = (kind: 'coupon' | 'referral'): AppError =>
  new AppError('conflict', `Could not find a free ${kind} code; retry`, [{ title: 'Conflict', details: 'every code tried was taken', source: { pointer: '' } }]);

const DEFAULT_CHARS = [...'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'];

/** A random code of the pattern (each `#` a character of validCharacters), from crypto randomness. */
export function randomCode(pattern = '####-####', validCharacters: readonly string[] = DEFAULT_CHARS): string {
  const chars = validCharacters.length > 0 ? validCharacters : DEFAULT_CHARS;
  const bytes = randomBytes(pattern.length * 2);
  let i = 0;
  let out = '';
  for (const c of pattern) {
    if (c !== '#') out += c;
    else out += chars[bytes.readUInt16BE(2 * i++) % chars.length];
  }
  return out;
}

/**
 * The attributes that updateAttribute effects set on the Session or the Profile, by name, the
 * last effect winning.
 */
export function attributeUpdates(effects: readonly Effect[], root: 'Session' | 'Profile'): Record<string, unknown> {
  const prefix = `${root}.Attributes.`;
  const out: Record<string, unknown> = {};
  for (const e of effects) {
    const path = e.props.path;
    if (e.effectType === 'updateAttribute' && typeof path === 'string' && path.startsWith(prefix)) out[path.slice(prefix.length)] = e.props.value;
  }
  return out;
}

interface EffectsPlan {
  redemptions: Array<{ campaignId: number; value: string; id: number; discount: number }>;
  referral: LoadedFacts['facts']['referral'] | undefined;
  limits: Array<{ key: LimitKey; amount: number }>;
  profileAttributes: Record<string, unknown>;
  creations: Effect[];
  stats: CampaignStatsDelta[];
  audiences: Array<{ campaignId: number; audienceId: number; profile: string; add: boolean }>;
  loyalty: Effect[];
}

/** What committing the effects writes, in the order it is written. */
function planEffects(c: EffectsCommit): EffectsPlan {
  const acceptedCoupon = new Map<number, string>();
  for (const e of c.effects) if (e.effectType === 'acceptCoupon') acceptedCoupon.set(e.campaignId, e.props.value as string);
  const discountOf = (campaignId: number) =>
    sum(c.effects.filter((e) => e.campaignId === campaignId && DISCOUNT_EFFECTS.has(e.effectType)).map((e) => e.props.value as number));

  const redemptions = [...acceptedCoupon]
    .map(([campaignId, value]) => ({ campaignId, value, id: c.loaded.couponIds.get(value) }))
    .filter((r): r is { campaignId: number; value: string; id: number } => r.id !== undefined)
    .sort((a, b) => a.id - b.id)
    .map((r) => ({ ...r, discount: discountOf(r.campaignId) }));
  const accepted = c.effects.some((e) => e.effectType === 'acceptReferral');
  const referral = accepted ? c.loaded.facts.referral : undefined;
  const limits = [...c.loaded.limitKeys]
    .sort((a, b) =>
      counterId(a.campaignId, a.couponId, a.action, a.period, a.entity) < counterId(b.campaignId, b.couponId, b.action, b.period, b.entity) ? -1 : 1,
    )
    .map((key) => ({ key, amount: amountFor(key, c.effects, acceptedCoupon) }))
    .filter((l) => l.amount !== 0);
  const profileAttributes = c.profileId === '' ? {} : attributeUpdates(c.effects, 'Profile');
  const creations = c.effects.filter((e) => e.effectType === 'couponCreated' || e.effectType === 'referralCreated');

  const stats: CampaignStatsDelta[] = [];
  const campaignIds = [...new Set(c.effects.map((e) => e.campaignId))].filter((id) => id > 0).sort((a, b) => a - b);
  for (const id of campaignIds) {
    const mine = c.effects.filter((e) => e.campaignId === id);
    const entry: CampaignStatsDelta = {
      campaignId: id,
      coupons: mine.filter((e) => e.effectType === 'acceptCoupon').length,
      referrals: mine.filter((e) => e.effectType === 'acceptReferral').length,
      discount: discountOf(id),
      discountEffects: mine.filter((e) => DISCOUNT_EFFECTS.has(e.effectType)).length,
      createdCoupons: mine.filter((e) => e.effectType === 'couponCreated').length,
    };
    if (entry.coupons + entry.referrals + entry.discountEffects + entry.createdCoupons > 0) stats.push(entry);
  }
  const audiences = c.effects
    .filter((e) => e.effectType === 'addToAudience' || e.effectType === 'removeFromAudience')
    .map((e) => ({
      campaignId: e.campaignId,
      audienceId: Number(e.props.audienceId),
      profile: typeof e.props.profileIntegrationId === 'string' && e.props.profileIntegrationId !== '' ? e.props.profileIntegrationId : c.profileId,
      add: e.effectType === 'addToAudience',
    }))
    .filter((a) => a.profile !== '' && Number.isSafeInteger(a.audienceId));
  const loyalty = c.effects.filter((e) => e.effectType === 'addLoyaltyPoints' || e.effectType === 'deductLoyaltyPoints');
  return { redemptions, referral, limits, profileAttributes, creations, stats, audiences, loyalty };
}

/**
 * When committing the effects changes nothing but campaign statistics (no redemption, limit,
 * attribute or creation), those statistics, which a session's own commit statement can carry:
 * such a close needs no transaction of its own. Undefined otherwise.
 */
export function statisticsOnly(c: EffectsCommit): { stats: CampaignStatsDelta[]; counters: CounterEntry[] } | undefined {
  const plan = planEffects(c);
  const more = plan.redemptions.length + plan.limits.length + Object.keys(plan.profileAttributes).length + plan.creations.length + plan.audiences.length + plan.loyalty.length;
  if (more > 0 || plan.referral) return undefined;
  if (c.profileId !== '' && c.effects.some((e) => e.effectType === 'increaseAchievementProgress')) return undefined;
  if (webhookEffects(c.effects).some((e) => c.webhooks.get(Number(e.props.webhookId))?.enabled)) return undefined;
  return { stats: plan.stats, counters: plan.stats.map((s) => ({ t: 'stats', ...s })) };
}

/**
 * Commits the effects of one session close (or profile update or event) in the caller's
 * transaction. Rows are touched in a fixed order (coupons, referrals, limits, campaigns, each
 * by id) so that concurrent commits cannot deadlock.
 */
export async function commitEffects(tx: Queryable, c: EffectsCommit): Promise<EffectsCommitResult> {
  const plan = planEffects(c);
  const counters: CounterEntry[] = [];

  // Coupon redemptions: usage and discount counters, only while they stay within their limits.
  for (const r of plan.redemptions) {
    const rows = await tx.query(
      `UPDATE coupons SET usage_counter = usage_counter + 1, discount_counter = discount_counter + $2::numeric
        WHERE id = $1 AND (usage_limit = 0 OR usage_counter < usage_limit)
          AND (discount_limit = 0 OR discount_counter + $2::numeric <= discount_limit)
        RETURNING id`,
      [r.id, String(r.discount)],
    );
    if (rows.length === 0) throw new CommitRaceError(`coupon ${r.value}`);
    counters.push({ t: 'coupon', id: r.id, campaignId: r.campaignId, discount: r.discount });
  }

  // Referral redemptions: usage counter and the one-referral-per-friend key.
  const fact = plan.referral;
  if (fact) {
    const rows = await tx.query(
      `UPDATE referrals SET usage_counter = usage_counter + 1 WHERE id = $1 AND (usage_limit = 0 OR usage_counter < usage_limit) RETURNING id`,
      [fact.id],
    );
    if (rows.length === 0) throw new CommitRaceError(`referral ${fact.code}`);
    if (c.profileId !== '') {
      const inserted = await tx.query(
        `INSERT INTO referral_redemptions (campaign_id, friend_profile_integration_id, referral_id, application_id, session_id)
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING referral_id`,
        [fact.campaignId, c.profileId, fact.id, c.app.id, c.sessionId],
      );
      if (inserted.length === 0) throw new CommitRaceError(`referral of ${c.profileId}`);
    }
    counters.push({ t: 'referral', id: fact.id, campaignId: fact.campaignId, friend: c.profileId });
  }

  // Campaign and coupon limits in their period, each only while it stays within its limit.
  for (const { key: k, amount } of plan.limits) {
    const rows = await tx.query(
      `INSERT INTO limit_counters (campaign_id, coupon_id, action, period, entity, counter)
       SELECT $1, $2, $3, $4, $5, $6::numeric WHERE $6::numeric <= $7::numeric
       ON CONFLICT (campaign_id, coupon_id, action, period, entity_hash)
       DO UPDATE SET counter = limit_counters.counter + EXCLUDED.counter
        WHERE limit_counters.counter + EXCLUDED.counter <= $7::numeric
       RETURNING counter`,
      [k.campaignId, k.couponId, k.action, k.period, k.entity, String(amount), String(k.limit)],
    );
    if (rows.length === 0) throw new CommitRaceError(`limit ${k.action} of campaign ${k.campaignId}`);
    counters.push({ t: 'limit', campaignId: k.campaignId, couponId: k.couponId, action: k.action, period: k.period, entity: k.entity, amount });
  }

  // Profile attributes set by updateAttribute, merged key by key (no read-modify-write).
  if (Object.keys(plan.profileAttributes).length > 0) {
    await tx.query(
      `INSERT INTO customer_profiles (account_id, integration_id, created, last_activity, attributes) VALUES ($1, $2, $3, $3, $4::jsonb)
       ON CONFLICT (account_id, integration_id) DO UPDATE SET attributes = customer_profiles.attributes || EXCLUDED.attributes`,
      [c.app.accountId, c.profileId, c.now.toISOString(), JSON.stringify(plan.profileAttributes)],
    );
  }

  // Audience memberships of addToAudience / removeFromAudience, in effect order; only an actual
  // change is recorded (and so rolled back by a cancel).
  for (const a of plan.audiences) {
    const changed = await changeMembership(tx, c.app.accountId, a.audienceId, a.profile, a.add, c.now.toISOString());
    if (changed) counters.push({ t: 'audience', campaignId: a.campaignId, audienceId: a.audienceId, profile: a.profile, added: a.add });
  }

  // Achievement progress (issue 6, area K), each achievement under its profile row lock.
  counters.push(...(await commitAchievementProgress(tx, c.app.id, c.profileId, c.effects, c.now)));
  // Loyalty points added and deducted (issue 6, area J), ledgers locked in a fixed order.
  const ledgerEntries: LedgerWrite[] = [];
  let loyaltyNotifications = 0;
  if (plan.loyalty.length > 0) {
    const loyalty = await commitLoyalty(tx, c, plan.loyalty);
    counters.push(...loyalty.counters);
    ledgerEntries.push(...loyalty.entries);
    loyaltyNotifications = loyalty.outbound;
  }

  // Created coupons and referrals become real.
  const createdCoupons: Array<Record<string, unknown>> = [];
  const createdReferrals: Array<Record<string, unknown>> = [];
  const settingsOf = (id: number) => c.campaigns.find((x) => x.id === id);
  for (const e of plan.creations) {
    if (e.effectType === 'couponCreated') {
      const p = e.props;
      let value = normalizeCode(c.app, String(p.value));
      for (let attempt = 0; ; attempt++) {
        const [row] = await tx.query(
          `INSERT INTO coupons (application_id, campaign_id, value, usage_limit, discount_limit, expiry_date, recipient_integration_id,
             created_by, created_in_session, created)
           VALUES ($1, $2, $3, $4, $5::numeric, $6, $7, 'rule_engine', $8, $9)
           ON CONFLICT (application_id, value) DO NOTHING RETURNING *`,
          [c.app.id, e.campaignId, value, Number(p.usageLimit ?? 1), String(p.discountLimit ?? 0), p.expiryDate ?? null, String(p.profileId ?? ''), c.sessionId, c.now.toISOString()],
        );
        if (row) {
          p.value = value;
          createdCoupons.push(couponView(row));
          break;
        }
        // The seeded code is taken: another of the same pattern.
        if (attempt >= 10) throw noFreeCode('coupon');
        const settings = settingsOf(e.campaignId)?.couponSettings;
        value = normalizeCode(c.app, randomCode(settings?.couponPattern, settings?.validCharacters));
      }
    } else if (e.effectType === 'referralCreated') {
      const p = e.props;
      let code = String(p.value);
      for (let attempt = 0; ; attempt++) {
        const [row] = await tx.query(
          `INSERT INTO referrals (application_id, campaign_id, code, advocate_profile_integration_id, friend_profile_integration_id,
             created_by, created_in_session, created)
           VALUES ($1, $2, $3, $4, $5, 'rule_engine', $6, $7)
           ON CONFLICT (application_id, code) DO NOTHING RETURNING *`,
          [c.app.id, e.campaignId, code, String(p.advocateProfileIntegrationId ?? c.profileId), String(p.friendProfileIntegrationId ?? ''), c.sessionId, c.now.toISOString()],
        );
        if (row) {
          p.value = code;
          createdReferrals.push(referralView(row));
          break;
        }
        if (attempt >= 10) throw noFreeCode('referral');
        const settings = settingsOf(e.campaignId)?.referralSettings;
        code = randomCode(settings?.couponPattern, settings?.validCharacters);
      }
    }
  }

  // Webhooks the rules triggered: their requests, rendered as of now, go out once this commits.
  const outbound = await webhookRequests(tx, c, webhookEffects(c.effects));
  await enqueueOutbound(tx, outbound, c.now);
  let notifications = 0;
  if (createdCoupons.length > 0 && c.notificationTypes.has('CouponCreated')) {
    const pages = couponNotificationPages({ notificationType: 'CouponCreated', typeOfChange: 'rule_engine', employeeName: '' }, createdCoupons);
    notifications = await enqueueNotifications(tx, { accountId: c.app.accountId, applicationId: c.app.id, notificationType: 'CouponCreated', bodies: pages }, c.now);
  }

  // Campaign statistics.
  for (const entry of plan.stats) counters.push({ t: 'stats', ...entry });
  await appendStats(tx, plan.stats, c.now);
  return { counters, createdCoupons, createdReferrals, ledgerEntries, outbound: outbound.length + notifications + loyaltyNotifications };
}

/** Appends changes of campaign statistics in one statement; foldCampaignStats moves them into campaigns. */
async function appendStats(tx: Queryable, stats: readonly CampaignStatsDelta[], now: Date | undefined): Promise<void> {
  if (stats.length === 0) return;
  await tx.query(`INSERT INTO campaign_stat_deltas (${STATS_DELTA_COLUMNS}) ${statsDeltaSelect('$1', '$2::timestamptz')}`, [
    statsDeltaJson(stats),
    now?.toISOString() ?? null,
  ]);
}

export interface RollbackOptions {
  /** The share of each campaign's amounts that goes back (default 1: all of it). */
  share?: (campaignId: number) => number;
  /** Returns keep redemptions and created things counted: the purchase still happened. */
  keepCounts?: boolean;
  /** Rounds an amount to the currency's minor unit. */
  round?: (n: number) => number;
  /** When the rollback happens (default: the system clock's now). */
  now?: Date;
  /** Collects the ledger entries of the loyalty rollbacks. */
  ledger?: LedgerEntrySink;
}

/**
 * Gives back what a commit took: everything (cancel, reopen), or the amounts by a share with the
 * counts kept (returns). Returns the entries that remain committed.
 */
export async function rollbackCounters(tx: Queryable, counters: readonly CounterEntry[], options: RollbackOptions = {}): Promise<CounterEntry[]> {
  const remaining: CounterEntry[] = [];
  const stats: CampaignStatsDelta[] = [];
  const round = options.round ?? ((n: number) => n);
  const keep = options.keepCounts ?? false;
  // The ledgers are locked together, in the commits' order and where a commit locks them (after
  // the other counters): a shared card's ledger may be rolled back while another profile's close
  // writes it and its own ledger.
  const ledgers = new Map(counters.filter((k): k is LoyaltyCounter => k.t === 'loyalty').map((k) => [keyOf(counterKey(k)), counterKey(k)]));
  let ledgersLocked = false;
  const changes: PointsChange[] = [];
  for (const k of counters) {
    if (k.t === 'loyalty' && !ledgersLocked) {
      for (const key of [...ledgers.keys()].sort()) await lockLedger(tx, ledgers.get(key)!, { integrationId: '', now: options.now ?? new Date(), create: false });
      ledgersLocked = true;
    }
    const share = Math.min(1, Math.max(0, options.share?.(k.campaignId) ?? 1));
    const back = (amount: number) => (share >= 1 ? amount : round(amount * share));
    switch (k.t) {
      case 'coupon': {
        const discount = back(k.discount);
        await tx.query(
          `UPDATE coupons SET usage_counter = greatest(usage_counter - $2, 0), discount_counter = greatest(discount_counter - $3::numeric, 0) WHERE id = $1`,
          [k.id, keep ? 0 : 1, String(discount)],
        );
        if (keep) remaining.push({ ...k, discount: addExact(k.discount, -discount) });
        break;
      }
      case 'referral':
        if (!keep) {
          await tx.query(`UPDATE referrals SET usage_counter = greatest(usage_counter - 1, 0) WHERE id = $1`, [k.id]);
          await tx.query(`DELETE FROM referral_redemptions WHERE campaign_id = $1 AND friend_profile_integration_id = $2 AND referral_id = $3`, [k.campaignId, k.friend, k.id]);
        } else remaining.push(k);
        break;
      case 'limit': {
        const amount = !keep ? k.amount : AMOUNT_LIMIT_ACTIONS.has(k.action) ? back(k.amount) : 0;
        if (amount !== 0) {
          await tx.query(
            `UPDATE limit_counters SET counter = greatest(counter - $6::numeric, 0)
              WHERE campaign_id = $1 AND coupon_id = $2 AND action = $3 AND period = $4 AND entity_hash = text_sha256($5) AND entity = $5`,
            [k.campaignId, k.couponId, k.action, k.period, k.entity, String(amount)],
          );
        }
        if (keep) remaining.push({ ...k, amount: addExact(k.amount, -amount) });
        break;
      }
      case 'audience':
        if (keep) remaining.push(k);
        else await changeMembership(tx, null, k.audienceId, k.profile, !k.added, new Date().toISOString());
        break;
      case 'achievement':
        if (keep) remaining.push(k);
        else await rollbackAchievementProgress(tx, k);
        break;
      case 'loyalty': {
        const amount = back(k.amount);
        if (amount > 0) await rollbackLoyalty(tx, k, amount, options.now ?? new Date(), options.ledger, changes);
        if (keep && k.amount - amount > 0) remaining.push({ ...k, amount: addExact(k.amount, -amount) });
        break;
      }
      case 'stats': {
        // Created coupons stay: they exist now, whatever happens to the session that made them.
        const discount = back(k.discount);
        const counts = keep ? 0 : -1;
        stats.push({ campaignId: k.campaignId, coupons: counts * k.coupons, referrals: counts * k.referrals, discount: -discount, discountEffects: counts * k.discountEffects, createdCoupons: 0 });
        if (keep) remaining.push({ ...k, discount: addExact(k.discount, -discount) });
        break;
      }
    }
  }
  await appendStats(tx, stats, undefined);
  if (ledgers.size > 0) {
    const now = options.now ?? new Date();
    const subs = await loyaltySubscriptions(tx, [...ledgers.values()].map((k) => k.programId));
    let outbound = await notifyPointsChanges(tx, changes, subs, now);
    for (const key of [...ledgers.keys()].sort()) {
      const k = ledgers.get(key)!;
      if (subscribes(subs, k.programId, 'TierUpgrade', 'TierDowngrade')) outbound += await checkTier(tx, k, now, k.cardId !== undefined ? (options.ledger?.profileId ?? '') : '');
    }
    if (options.ledger) options.ledger.outbound = (options.ledger.outbound ?? 0) + outbound;
  }
  return remaining;
}

// The views moved to the store so that the Management API shows coupons and referrals the same way.
export { couponView, referralView };

/**
 * Adds the profile (created when missing) to an audience of its account, or removes it; true when
 * that changed anything. accountId null: the audience's own account (a rollback).
 */
export async function changeMembership(tx: Queryable, accountId: number | null, audienceId: number, profile: string, add: boolean, now: string): Promise<boolean> {
  if (add) {
    const rows = await tx.query(
      `WITH a AS (SELECT id, account_id FROM audiences WHERE id = $1 AND ($2::int IS NULL OR account_id = $2)),
       p AS (
         -- DO UPDATE (a no-op) rather than DO NOTHING: it returns the row a concurrent writer made.
         INSERT INTO customer_profiles (account_id, integration_id, created, last_activity)
         SELECT a.account_id, $3, $4, $4 FROM a
         ON CONFLICT (account_id, integration_id) DO UPDATE SET last_activity = customer_profiles.last_activity RETURNING id
       )
       INSERT INTO audience_memberships (audience_id, profile_id, created)
       SELECT a.id, p.id, $4 FROM a, p
       ON CONFLICT DO NOTHING RETURNING audience_id`,
      [audienceId, accountId, profile, now],
    );
    return rows.length > 0;
  }
  const rows = await tx.query(
    `DELETE FROM audience_memberships m USING audiences a, customer_profiles p
      WHERE m.audience_id = $1 AND a.id = m.audience_id AND ($2::int IS NULL OR a.account_id = $2)
        AND p.id = m.profile_id AND p.account_id = a.account_id AND p.integration_id = $3
      RETURNING m.audience_id`,
    [audienceId, accountId, profile],
  );
  return rows.length > 0;
}

// ---- loyalty (issue 6, area J) ----

const pointsRound = (x: number): number => Math.round(x * 1e9) / 1e9;

/**
 * A ledger entry of the spec's Event object: one loyalty transaction that the event caused.
 * `amount` is signed (points added are positive, points taken negative); `reason` is the
 * effect's name, or its type when it has none, or `rollback`; `referenceId` is the id of the
 * entry it balances (the grant a rollback takes back, or the deduction a rollback gives back: that
 * entry shrinks rather than a new one being written, so the entry carries the deduction's id).
 */
export interface LedgerEntry {
  id: number;
  created: string;
  profileId: string;
  accountId: number;
  loyaltyProgramId: number;
  eventId?: number;
  amount: number;
  reason: string;
  expiryDate?: string;
  referenceId?: number;
  subLedgerId?: string;
  cardIdentifier?: string;
}

/** A ledger entry, and whether its transaction was written by this commit (and so takes its event's id). */
export interface LedgerWrite {
  entry: LedgerEntry;
  written: boolean;
}

type LoyaltyCounter = Extract<CounterEntry, { t: 'loyalty' }>;
/** The order every writer of several ledgers locks them in, so that concurrent writers cannot deadlock. */
const keyOf = (k: LedgerKey) => `${String(k.programId).padStart(10, '0')}|${k.cardId !== undefined ? 'c' : 'p'}${String(k.cardId ?? k.profileId).padStart(20, '0')}|${k.subledgerId}`;
const counterKey = (k: LoyaltyCounter): LedgerKey =>
  k.cardId !== undefined ? { programId: k.programId, cardId: k.cardId, subledgerId: k.subledgerId } : { programId: k.programId, profileId: k.profileId, subledgerId: k.subledgerId };

/**
 * Writes the loyalty effects of one commit: each program must be one the Application subscribes
 * to (effects of any other program are not applied). In a profile-based program the recipient
 * profile's ledger changes (created when missing); in a card-based one the ledger of the card the
 * evaluation chose (`cardIdentifier`), which must still be active: a card blocked since the
 * evaluation makes the commit run again, and the evaluation then refuses the effect. An addition
 * without its own pendingDuration / expiryDuration takes the program's defaultPending /
 * defaultValidity. A deduction takes the active points; the evaluation refused those the balance
 * did not cover, so when they are gone now (a concurrent close spent them) the commit is retried
 * with fresh facts. In a program that allows a negative balance, a deduction always applies and
 * what the points do not cover is a debt. Every ledger is settled (expiry, debts) first and its
 * debts paid from new active points last. Then, for programs whose Applications subscribe to
 * them, LoyaltyPointsAdded / Deducted for each change and a check of each main ledger's tier
 * against the tier last notified, still under the ledgers' locks.
 */
async function commitLoyalty(tx: Queryable, c: EffectsCommit, effects: readonly Effect[]): Promise<{ counters: CounterEntry[]; entries: LedgerWrite[]; outbound: number }> {
  const none = { counters: [], entries: [], outbound: 0 };
  const programIds = [...new Set(effects.map((e) => Number(e.props.programId)))].filter((id) => Number.isSafeInteger(id) && id > 0 && id <= 2_147_483_647);
  if (programIds.length === 0) return none;
  const programs = new Map(
    (
      await tx.query<{
        id: number;
        allow_subledger: boolean;
        default_pending: string;
        default_validity: string;
        card_based: boolean;
        allow_negative_balance: boolean;
        notify: string[];
      }>(
        // The loyalty notification types subscribed for the program ride on this query: a close
        // whose programs nobody watches writes no notification and reads nothing more.
        `SELECT p.id, p.allow_subledger, p.default_pending, p.default_validity, p.card_based, p.allow_negative_balance,
                ${subscribedLoyaltyTypesSql('p.id')} AS notify
           FROM loyalty_programs p
           JOIN loyalty_program_applications a ON a.program_id = p.id AND a.application_id = $1
          WHERE p.account_id = $2 AND p.id = ANY($3::int[])`,
        [c.app.id, c.app.accountId, programIds],
      )
    ).map((r) => [Number(r.id), r]),
  );
  type Item = { e: Effect; key: LedgerKey; owner: string; card?: string };
  const items: Item[] = [];
  const profileIds = new Map<string, number>();
  const cardIds = new Map<string, number>();
  for (const e of effects) {
    const program = programs.get(Number(e.props.programId));
    const subledgerId = typeof e.props.subLedgerId === 'string' ? e.props.subLedgerId : '';
    if (!program || (subledgerId !== '' && !program.allow_subledger)) continue;
    if (program.card_based) {
      const identifier = e.props.cardIdentifier;
      if (typeof identifier !== 'string' || identifier === '') continue;
      const cardKey = `${program.id}|${identifier}`;
      let cardId = cardIds.get(cardKey);
      if (cardId === undefined) {
        // Shared with other commits, exclusive against a block: a card is never blocked halfway through a commit.
        const [card] = await tx.query<{ id: number; status: string }>(`SELECT id, status FROM loyalty_cards WHERE program_id = $1 AND identifier = $2 FOR SHARE`, [
          program.id,
          identifier,
        ]);
        if (!card || card.status !== 'active') throw new CommitRaceError(`loyalty card ${identifier}`);
        cardId = Number(card.id);
        cardIds.set(cardKey, cardId);
      }
      items.push({ e, key: { programId: program.id, cardId, subledgerId }, owner: identifier, card: identifier });
      continue;
    }
    const recipient = ledgerProfile(e, c.profileId);
    if (recipient === '') continue;
    let profileId = profileIds.get(recipient);
    if (profileId === undefined) {
      const [row] = await tx.query<{ id: number }>(
        `INSERT INTO customer_profiles (account_id, integration_id, created, last_activity) VALUES ($1, $2, $3, $3)
         ON CONFLICT (account_id, integration_id) DO UPDATE SET last_activity = customer_profiles.last_activity RETURNING id`,
        [c.app.accountId, recipient, c.now.toISOString()],
      );
      profileId = Number(row!.id);
      profileIds.set(recipient, profileId);
    }
    items.push({ e, key: { programId: program.id, profileId, subledgerId }, owner: recipient });
  }
  // Lock every ledger first, in one order, so that concurrent commits cannot deadlock.
  const ledgers = new Map<string, Item>();
  for (const i of items) if (!ledgers.has(keyOf(i.key))) ledgers.set(keyOf(i.key), i);
  const order = [...ledgers.keys()].sort();
  for (const k of order) {
    const i = ledgers.get(k)!;
    await lockLedger(tx, i.key, { integrationId: i.owner, now: c.now, create: true });
    await settleLedger(tx, i.key, c.now);
  }
  const counters: CounterEntry[] = [];
  const entries: LedgerWrite[] = [];
  const changes: PointsChange[] = [];
  const created = c.now.toISOString();
  for (const { e, key, owner, card } of items) {
    const value = Number(e.props.value);
    const name = typeof e.props.name === 'string' ? e.props.name : '';
    const program = programs.get(key.programId)!;
    const entry = {
      created,
      profileId: card === undefined ? owner : c.profileId,
      accountId: c.app.accountId,
      loyaltyProgramId: key.programId,
      reason: name || e.effectType,
      ...(key.subledgerId !== '' ? { subLedgerId: key.subledgerId } : {}),
      ...(card !== undefined ? { cardIdentifier: card } : {}),
    };
    const owned = { t: 'loyalty' as const, campaignId: e.campaignId, programId: key.programId, profileId: key.profileId ?? 0, ...(key.cardId !== undefined ? { cardId: key.cardId } : {}), subledgerId: key.subledgerId };
    if (e.effectType === 'addLoyaltyPoints') {
      const stated = new Date(String(e.props.startDate));
      const pendingGiven = Number.isFinite(stated.getTime()) && stated.getTime() > c.now.getTime();
      const startDate = pendingGiven ? stated : program.default_pending === 'immediate' ? c.now : addDuration(c.now, program.default_pending, '/defaultPending');
      const expiryDate =
        e.props.expiryDate !== 'unlimited' && e.props.expiryDate !== undefined
          ? new Date(String(e.props.expiryDate))
          : program.default_validity === 'unlimited'
            ? null
            : addDuration(startDate, program.default_validity, '/defaultValidity');
      const id = await grantPoints(tx, key, { points: value, name, startDate, expiryDate, customerSessionId: c.sessionId, now: c.now });
      counters.push({ ...owned, kind: 'add', transactionId: id, amount: value });
      entries.push({ entry: { id, ...entry, amount: value, ...(expiryDate ? { expiryDate: expiryDate.toISOString() } : {}) }, written: true });
      changes.push({ ...change(key, entry, c), notificationType: 'LoyaltyPointsAdded', amount: value, transactionId: id, startDate, expiryDate });
    } else {
      const id = await spendPoints(tx, key, { points: value, name, customerSessionId: c.sessionId, now: c.now, allowNegative: program.allow_negative_balance });
      if (id === null) throw new CommitRaceError(`loyalty balance of program ${key.programId}`);
      counters.push({ ...owned, kind: 'deduct', transactionId: id, amount: value });
      entries.push({ entry: { id, ...entry, amount: -value }, written: true });
      changes.push({ ...change(key, entry, c), notificationType: 'LoyaltyPointsDeducted', amount: value, transactionId: id });
    }
  }
  // New active points pay the ledger's debts before anything else can spend them.
  for (const k of order) await payDebts(tx, ledgers.get(k)!.key, c.now);
  const subs: LoyaltySubscriptions = new Map([...programs.values()].filter((p) => p.notify.length > 0).map((p) => [Number(p.id), new Set(p.notify)]));
  let outbound = subs.size === 0 ? 0 : await notifyPointsChanges(tx, changes, subs, c.now);
  for (const k of order) {
    const { key, card } = ledgers.get(k)!;
    if (subscribes(subs, key.programId, 'TierUpgrade', 'TierDowngrade')) outbound += await checkTier(tx, key, c.now, card !== undefined ? c.profileId : '');
  }
  return { counters, entries, outbound };
}

/** What a commit's points changes share: the ledger, and who and what caused them. */
const change = (key: LedgerKey, entry: Pick<LedgerEntry, 'profileId' | 'reason' | 'cardIdentifier'>, c: EffectsCommit) => ({
  programId: key.programId,
  subledgerId: key.subledgerId,
  profileIntegrationId: entry.profileId,
  ...(entry.cardIdentifier !== undefined ? { cardIdentifier: entry.cardIdentifier } : {}),
  reason: entry.reason,
  typeOfChange: 'rule_engine' as const,
  employeeName: '',
  sessionIntegrationId: c.sessionId,
  created: c.now,
});

/** Where rollbackCounters reports the ledger entries its loyalty rollbacks make. */
export interface LedgerEntrySink {
  entries: LedgerWrite[];
  /** The profile of the session rolled back: the entries of card ledgers name it. */
  profileId: string;
  accountId: number;
  /** Set by the rollback: the loyalty notifications it wrote (the caller wakes the dispatcher after its commit). */
  outbound?: number;
}

/**
 * Gives back `amount` of a committed loyalty transaction, on its locked ledger. An addition: what
 * is left of the grant (up to `amount`) is taken back by a `subtraction` named rollback; points
 * already spent stay spent, except in a program that allows a negative balance, where the rest
 * is taken from the other active points and then becomes a debt. A deduction: its debt shrinks
 * first, then the points go back to the grants they came from (latest expiry first), and the
 * subtraction shrinks or disappears. Either is added to `changes` as the opposite change
 * (rollbackCounters notifies them with reason `rollback`).
 */
async function rollbackLoyalty(tx: Queryable, k: LoyaltyCounter, amount: number, now: Date, sink: LedgerEntrySink | undefined, changes: PointsChange[]): Promise<void> {
  const key = counterKey(k);
  if (!(await lockLedger(tx, key, { integrationId: '', now, create: false }))) return;
  await settleLedger(tx, key, now);
  const [ledger] = await tx.query<{ integration_id: string; allow_negative_balance: boolean; card: string | null; subtraction: boolean; session: string | null }>(
    `SELECT l.integration_id, p.allow_negative_balance, (SELECT identifier FROM loyalty_cards WHERE id = l.card_id) AS card,
            EXISTS (SELECT 1 FROM loyalty_transactions WHERE id = $4 AND type = 'subtraction') AS subtraction,
            (SELECT customer_session_id FROM loyalty_transactions WHERE id = $4) AS session
       FROM loyalty_ledgers l JOIN loyalty_programs p ON p.id = l.program_id
      WHERE l.program_id = $1 AND l.${ownerColumn(key)} = $2 AND l.subledger_id = $3`,
    [key.programId, key.cardId ?? key.profileId, key.subledgerId, k.transactionId],
  );
  // A rollback of an addition is a deduction, and the other way round: notified as such, reason `rollback`.
  const notify = (id: number, points: number) =>
    changes.push({
      notificationType: points > 0 ? 'LoyaltyPointsAdded' : 'LoyaltyPointsDeducted',
      programId: k.programId,
      subledgerId: k.subledgerId,
      profileIntegrationId: ledger?.card ? (sink?.profileId ?? '') : (ledger?.integration_id ?? ''),
      ...(ledger?.card ? { cardIdentifier: ledger.card } : {}),
      amount: Math.abs(points),
      reason: 'rollback',
      typeOfChange: 'rule_engine',
      employeeName: '',
      sessionIntegrationId: ledger?.session ?? '',
      transactionId: id,
      created: now,
    });
  const entry = (id: number, points: number, referenceId: number, written: boolean) => {
    notify(id, points);
    sink?.entries.push({
      entry: {
        id,
        created: now.toISOString(),
        profileId: ledger?.card ? sink.profileId : (ledger?.integration_id ?? ''),
        accountId: sink.accountId,
        loyaltyProgramId: k.programId,
        amount: points,
        reason: 'rollback',
        referenceId,
        ...(k.subledgerId !== '' ? { subLedgerId: k.subledgerId } : {}),
        ...(ledger?.card ? { cardIdentifier: ledger.card } : {}),
      },
      written,
    });
  };
  if (k.kind === 'add') {
    if (ledger?.allow_negative_balance) {
      const [g] = await tx.query<{ customer_session_id: string }>(`SELECT customer_session_id FROM loyalty_transactions WHERE id = $1`, [k.transactionId]);
      const id = await spendPoints(tx, key, { points: amount, name: 'rollback', customerSessionId: g?.customer_session_id ?? '', now, allowNegative: true, prefer: k.transactionId });
      if (id !== null) entry(id, -amount, k.transactionId, true);
      return;
    }
    const [g] = await tx.query<{ remaining: string }>(`SELECT remaining::text AS remaining FROM loyalty_transactions WHERE id = $1`, [k.transactionId]);
    const take = pointsRound(Math.min(amount, Number(g?.remaining ?? 0)));
    if (take <= 0) return;
    const [t] = await tx.query<{ id: number }>(
      `INSERT INTO loyalty_transactions (program_id, profile_id, card_id, subledger_id, type, amount, start_date, name, customer_session_id, created)
       SELECT program_id, profile_id, card_id, subledger_id, 'subtraction', $2::numeric, $3, 'rollback', customer_session_id, $3 FROM loyalty_transactions WHERE id = $1
       RETURNING id`,
      [k.transactionId, String(take), now.toISOString()],
    );
    await tx.query(`UPDATE loyalty_transactions SET remaining = remaining - $2::numeric WHERE id = $1`, [k.transactionId, String(take)]);
    await tx.query(`INSERT INTO loyalty_consumptions (transaction_id, grant_id, amount) VALUES ($1, $2, $3::numeric)`, [t!.id, k.transactionId, String(take)]);
    entry(t!.id, -take, k.transactionId, true);
    return;
  }
  if (!ledger?.subtraction) return;
  // The debt it left goes first: it was never covered by points that could be given back.
  const [debt] = await tx.query<{ back: string }>(
    `WITH before AS (SELECT id, uncovered FROM loyalty_transactions WHERE id = $1)
     UPDATE loyalty_transactions t SET uncovered = t.uncovered - LEAST(before.uncovered, $2::numeric) FROM before WHERE t.id = before.id
     RETURNING LEAST(before.uncovered, $2::numeric)::text AS back`,
    [k.transactionId, String(amount)],
  );
  let left = pointsRound(amount - Number(debt?.back ?? 0));
  const parts = await tx.query<{ grant_id: number; amount: string }>(
    `SELECT c.grant_id, c.amount::text AS amount FROM loyalty_consumptions c JOIN loyalty_transactions g ON g.id = c.grant_id
      WHERE c.transaction_id = $1 ORDER BY g.expiry_date DESC NULLS FIRST, g.id DESC`,
    [k.transactionId],
  );
  for (const p of parts) {
    if (left <= 0) break;
    const give = pointsRound(Math.min(left, Number(p.amount)));
    left = pointsRound(left - give);
    await tx.query(`UPDATE loyalty_transactions SET remaining = remaining + $2::numeric WHERE id = $1`, [p.grant_id, String(give)]);
    if (give >= Number(p.amount)) await tx.query(`DELETE FROM loyalty_consumptions WHERE transaction_id = $1 AND grant_id = $2`, [k.transactionId, p.grant_id]);
    else await tx.query(`UPDATE loyalty_consumptions SET amount = amount - $3::numeric WHERE transaction_id = $1 AND grant_id = $2`, [k.transactionId, p.grant_id, String(give)]);
  }
  const [rest] = await tx.query<{ amount: string }>(`UPDATE loyalty_transactions SET amount = amount - $2::numeric WHERE id = $1 AND amount > $2::numeric RETURNING amount::text AS amount`, [
    k.transactionId,
    String(amount),
  ]);
  if (!rest) await tx.query(`DELETE FROM loyalty_transactions WHERE id = $1`, [k.transactionId]);
  entry(k.transactionId, amount, k.transactionId, false);
  // Points given back pay the ledger's other debts first.
  await payDebts(tx, key, now);
}
