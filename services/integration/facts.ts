// The facts an evaluation needs beyond the session and profile (DESIGN, walk step 4): the stored
// coupons and referral that the session names, and what is left of each limit in play for this
// session's period and entities. Loaded in as few round trips as the session needs.
import type { CouponFact, EvaluationFacts, LimitFact, LoyaltyFact, ReferralFact } from '../engine/index.js';
import { netOfDebt, normalizeCode, roundPoints, ROWS_MARK, tierOf, type Queryable, type Tier } from '../store/index.js';
import type { ApplicationSettings, CampaignSnapshot, LimitSpec } from './snapshot.js';
import { isHardReserved } from './reservations.js';
import { loadAchievementFacts, usesAchievements } from './achievements.js';

/** One counter row of limit_counters that a limit in play reads and a commit increments. */
export interface LimitKey {
  campaignId: number;
  /** 0 for a campaign limit. */
  couponId: number;
  couponValue?: string;
  action: string;
  period: string;
  entity: string;
  limit: number;
  perProfile: boolean;
}

export interface LoadedFacts {
  facts: EvaluationFacts;
  /** Coupon ids by stored value. */
  couponIds: Map<string, number>;
  limitKeys: LimitKey[];
  /** Profile.Loyalty of the rules: program name → {Balance, PendingBalance, Tier}. */
  profileLoyalty?: Record<string, { Balance: number; PendingBalance: number; Tier: string }>;
}

const iso = (v: unknown): string | undefined => (v == null ? undefined : v instanceof Date ? v.toISOString() : String(v));

// Lives in the store: the Management API creates coupons under the same rule.
export { normalizeCode };

export function couponFactOf(r: Record<string, unknown>, code?: string): CouponFact {
  const discountLimit = Number(r.discount_limit);
  return {
    id: Number(r.id),
    ...(code !== undefined ? { code } : {}),
    value: r.value as string,
    campaignId: r.campaign_id as number,
    usageCounter: r.usage_counter as number,
    usageLimit: r.usage_limit as number,
    ...(discountLimit > 0 ? { discountLimit, discountCounter: Number(r.discount_counter) } : {}),
    ...(r.start_date ? { startDate: iso(r.start_date) } : {}),
    ...(r.expiry_date ? { expiryDate: iso(r.expiry_date) } : {}),
    ...(r.recipient_integration_id ? { recipientIntegrationId: r.recipient_integration_id as string } : {}),
    attributes: (r.attributes as Record<string, unknown>) ?? {},
  };
}

/** The key of a period of `period` containing `now`, in the Application's timezone. */
export function periodKey(period: string | undefined, now: Date, timezone: string): string {
  if (!period || !['daily', 'weekly', 'monthly', 'yearly'].includes(period)) return '';
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-CA', { timeZone: timezone, year: 'numeric', month: '2-digit', day: '2-digit' })
      .formatToParts(now)
      .map((p) => [p.type, p.value]),
  ) as Record<string, string>;
  const { year, month, day } = parts as { year: string; month: string; day: string };
  if (period === 'yearly') return year;
  if (period === 'monthly') return `${year}-${month}`;
  if (period === 'daily') return `${year}-${month}-${day}`;
  // ISO week of the local calendar date.
  const d = new Date(Date.UTC(Number(year), Number(month) - 1, Number(day)));
  const weekday = d.getUTCDay() || 7;
  d.setUTCDate(d.getUTCDate() + 4 - weekday);
  const yearStart = Date.UTC(d.getUTCFullYear(), 0, 1);
  const week = Math.ceil(((d.getTime() - yearStart) / 86_400_000 + 1) / 7);
  return `${d.getUTCFullYear()}-W${String(week).padStart(2, '0')}`;
}

interface SessionFacts {
  profileId: string;
  couponCodes: readonly string[];
  referralCode: string;
  identifiers: readonly string[];
  loyaltyCards?: readonly string[];
}

/**
 * Loads the coupon, referral and limit facts of a session for the candidate campaigns. Codes not
 * found have no fact (the engine rejects them with CouponNotFound / ReferralNotFound).
 */
export async function loadFacts(
  db: Queryable,
  app: ApplicationSettings,
  campaigns: readonly CampaignSnapshot[],
  session: SessionFacts,
  now: Date,
  seed: string,
): Promise<LoadedFacts> {
  const facts: EvaluationFacts = { seed };
  const couponIds = new Map<string, number>();
  const couponRows: Array<Record<string, unknown>> = [];
  const codes = [...new Set(session.couponCodes.filter((c) => typeof c === 'string' && c !== ''))];
  if (codes.length > 0) {
    const normalized = codes.map((c) => normalizeCode(app, c));
    const rows = await db.query(
      // `held`: the session's profile holds a reservation of the coupon (issue 6, area G).
      `SELECT c.*, EXISTS (SELECT 1 FROM coupon_reservations r WHERE r.coupon_id = c.id AND r.integration_id = $3 AND $3 <> '') AS held
         FROM coupons c WHERE c.application_id = $1 AND c.value IN (SELECT jsonb_array_elements_text($2::jsonb))`,
      [app.id, JSON.stringify([...new Set(normalized)]), session.profileId],
    );
    const byValue = new Map(rows.map((r) => [r.value as string, r]));
    facts.coupons = [];
    codes.forEach((code, i) => {
      const row = byValue.get(normalized[i]!);
      if (!row) return;
      couponIds.set(row.value as string, Number(row.id));
      couponRows.push(row);
      const fact = couponFactOf(row, code);
      // A hard reservation restricts redemption to the coupon's holders (CouponReservationRequired).
      if (isHardReserved(row) && row.held !== true) fact.reservationRequired = true;
      facts.coupons!.push(fact);
    });
  }
  if (session.referralCode) {
    const [row] = await db.query(
      `SELECT r.*, EXISTS (SELECT 1 FROM referral_redemptions x
                            WHERE x.campaign_id = r.campaign_id AND x.friend_profile_integration_id = $3 AND $3 <> '') AS already,
              NOT EXISTS (SELECT 1 FROM customer_profiles p WHERE p.account_id = $4 AND p.integration_id = r.advocate_profile_integration_id) AS advocate_missing
         FROM referrals r WHERE r.application_id = $1 AND r.code = $2`,
      [app.id, session.referralCode, session.profileId, app.accountId],
    );
    if (row) facts.referral = referralFactOf(row);
  }
  const audienceIds = [...new Set(campaigns.flatMap(audienceIdsOf))];
  if (audienceIds.length > 0) {
    // The audiences that addToAudience / removeFromAudience effects name (the engine needs their names).
    const rows = await db.query<{ id: number; name: string }>(`SELECT id, name FROM audiences WHERE account_id = $1 AND id = ANY($2::int[])`, [
      app.accountId,
      audienceIds,
    ]);
    facts.audiences = Object.fromEntries(rows.map((r) => [String(r.id), { name: r.name }]));
  }
  // The profile's current progress on the achievements of the campaigns in play (issue 6, area K).
  if (campaigns.some(usesAchievements)) {
    facts.achievements = await loadAchievementFacts(db, app.id, campaigns.map((c) => c.id), session.profileId, now);
  }
  let profileLoyalty: LoadedFacts['profileLoyalty'];
  if (campaigns.some(usesLoyalty)) {
    const loyalty = await loyaltyFacts(db, app, session.profileId, session.loyaltyCards ?? [], now);
    facts.loyalty = loyalty.facts;
    profileLoyalty = loyalty.profile;
  }
  const limitKeys = limitKeysOf(app, campaigns, couponRows, session, now);
  if (limitKeys.length > 0) {
    const counters = await db.query<{ campaign_id: number; coupon_id: number; action: string; period: string; entity: string; counter: string }>(LIMIT_COUNTERS_SQL, [
      JSON.stringify(limitKeys.map((k) => ({ campaign_id: k.campaignId, coupon_id: k.couponId, action: k.action, period: k.period, entity: k.entity, mark: ROWS_MARK }))),
      ROWS_MARK,
    ]);
    const used = new Map(counters.map((c) => [counterId(c.campaign_id, Number(c.coupon_id), c.action, c.period, c.entity), Number(c.counter)]));
    facts.limits = limitKeys.map(
      (k): LimitFact => ({
        campaignId: k.campaignId,
        ...(k.couponValue !== undefined ? { couponValue: k.couponValue } : {}),
        action: k.action,
        remaining: k.limit - (used.get(counterId(k.campaignId, k.couponId, k.action, k.period, k.entity)) ?? 0),
        ...(k.perProfile ? { perProfile: true } : {}),
      }),
    );
  }
  return { facts, couponIds, limitKeys, ...(profileLoyalty ? { profileLoyalty } : {}) };
}

/**
 * The counters of the limits an evaluation checks: $1 their keys as JSON rows, $2 ROWS_MARK (planned
 * for a few keys, so that the counters are looked up by their primary key at any size).
 */
export const LIMIT_COUNTERS_SQL = `SELECT l.campaign_id, l.coupon_id, l.action, l.period, l.entity, l.counter
   FROM limit_counters l
   JOIN jsonb_to_recordset($1::jsonb) AS k(campaign_id int, coupon_id bigint, action text, period text, entity text, mark int)
     ON l.campaign_id = k.campaign_id AND l.coupon_id = k.coupon_id AND l.action = k.action AND l.period = k.period
    AND l.entity_hash = text_sha256(k.entity) AND l.entity = k.entity
  WHERE k.mark = $2`;

export function referralFactOf(r: Record<string, unknown>): ReferralFact {
  return {
    id: Number(r.id),
    code: r.code as string,
    campaignId: r.campaign_id as number,
    advocateProfileIntegrationId: r.advocate_profile_integration_id as string,
    ...(r.friend_profile_integration_id ? { friendProfileIntegrationId: r.friend_profile_integration_id as string } : {}),
    usageCounter: r.usage_counter as number,
    usageLimit: r.usage_limit as number,
    ...(r.start_date ? { startDate: iso(r.start_date) } : {}),
    ...(r.expiry_date ? { expiryDate: iso(r.expiry_date) } : {}),
    attributes: (r.attributes as Record<string, unknown>) ?? {},
    ...(r.already ? { alreadyReferred: true } : {}),
    ...(r.advocate_missing ? { advocateMissing: true } : {}),
  };
}

export const counterId = (campaignId: number, couponId: number, action: string, period: string, entity: string): string =>
  `${campaignId}|${couponId}|${action}|${period}|${entity}`;

/**
 * The counters the limits in play read: each campaign limit of a candidate campaign, and each
 * limit of a coupon the session carries, in this period and for this session's entities. A limit
 * per profile or identifier that the session lacks is kept with an empty entity: the engine then
 * refuses it as ProfileRequired where that applies.
 */
function limitKeysOf(
  app: ApplicationSettings,
  campaigns: readonly CampaignSnapshot[],
  couponRows: ReadonlyArray<Record<string, unknown>>,
  session: SessionFacts,
  now: Date,
): LimitKey[] {
  const keys: LimitKey[] = [];
  const entityOf = (l: LimitSpec, couponValue: string | undefined): { entity: string; perProfile: boolean } => {
    const parts: string[] = [];
    const entities = l.entities ?? [];
    const perProfile = entities.includes('Profile');
    if (perProfile) parts.push(`p:${session.profileId}`);
    if (entities.includes('Identifier')) parts.push(`i:${session.identifiers[0] ?? ''}`);
    if (entities.includes('Coupon') && couponValue !== undefined) parts.push(`c:${couponValue}`);
    return { entity: parts.join('|'), perProfile };
  };
  const byCampaign = new Map<number, Record<string, unknown>>();
  for (const r of couponRows) if (!byCampaign.has(r.campaign_id as number)) byCampaign.set(r.campaign_id as number, r);
  for (const c of campaigns) {
    for (const l of c.limits) {
      const coupon = byCampaign.get(c.id);
      const { entity, perProfile } = entityOf(l, (l.entities ?? []).includes('Coupon') ? (coupon?.value as string | undefined) : undefined);
      keys.push({ campaignId: c.id, couponId: 0, action: l.action, period: periodKey(l.period, now, app.timezone), entity, limit: l.limit, perProfile });
    }
  }
  for (const r of couponRows) {
    for (const l of (r.limits as LimitSpec[] | null) ?? []) {
      if (!l || typeof l.action !== 'string' || typeof l.limit !== 'number') continue;
      const { entity, perProfile } = entityOf(l, undefined);
      keys.push({
        campaignId: r.campaign_id as number,
        couponId: Number(r.id),
        couponValue: r.value as string,
        action: l.action,
        period: periodKey(l.period, now, app.timezone),
        entity,
        limit: l.limit,
        perProfile,
      });
    }
  }
  return keys;
}

const audienceIdCache = new WeakMap<CampaignSnapshot, number[]>();

/** The literal audience ids of a campaign's addToAudience / removeFromAudience effects (cached per snapshot). */
export function audienceIdsOf(c: CampaignSnapshot): number[] {
  const cached = audienceIdCache.get(c);
  if (cached) return cached;
  const ids = new Set<number>();
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) {
      const [op, first] = node as unknown[];
      if ((op === 'addToAudience' || op === 'removeFromAudience') && (typeof first === 'number' || typeof first === 'string')) {
        const id = Number(first);
        if (Number.isSafeInteger(id) && id > 0 && id <= 2_147_483_647) ids.add(id);
      }
      node.forEach(visit);
    } else if (node !== null && typeof node === 'object') Object.values(node).forEach(visit);
  };
  visit(c.ruleset);
  const out = [...ids];
  audienceIdCache.set(c, out);
  return out;
}

/**
 * The literal audience ids that a campaign's rules test with `inAudience` (strikethrough prices
 * are evaluated for each, as a member). An id computed at evaluation time cannot be known here.
 */
export function inAudienceIdsOf(c: CampaignSnapshot): number[] {
  const ids = new Set<number>();
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) {
      const [op, first] = node as unknown[];
      if (op === 'inAudience' && (typeof first === 'number' || typeof first === 'string')) {
        const id = Number(first);
        if (Number.isSafeInteger(id) && id > 0 && id <= 2_147_483_647) ids.add(id);
      }
      node.forEach(visit);
    } else if (node !== null && typeof node === 'object') Object.values(node).forEach(visit);
  };
  visit(c.ruleset);
  return [...ids];
}

const loyaltyUseCache = new WeakMap<CampaignSnapshot, boolean>();

/** The campaign's rules read or change loyalty balances (cached per snapshot). */
function usesLoyalty(c: CampaignSnapshot): boolean {
  let uses = loyaltyUseCache.get(c);
  if (uses === undefined) {
    uses = /"(loyaltyBalance|addLoyaltyPoints|deductLoyaltyPoints|Loyalty)"/.test(JSON.stringify(c.ruleset ?? null));
    loyaltyUseCache.set(c, uses);
  }
  return uses;
}

type BalanceRow = { subledger_id: string | null; active: string | null; pending: string | null; debt: string | null };

/**
 * The balances of the programs the Application subscribes to, as of `now`, as the rules see them
 * and the effects will change them: the profile's ledgers in profile-based programs, and in a
 * card-based program the ledgers of the first active card of it that the session names
 * (`loyaltyCards`, in the order sent). `balance` is the active balance less the debt. Gives
 * loyaltyBalance its facts by program id (and subledger) and Profile.Loyalty by program name.
 */
export async function loyaltyFacts(
  db: Queryable,
  app: Pick<ApplicationSettings, 'id' | 'accountId'>,
  profileIntegrationId: string,
  cards: readonly string[],
  now: Date,
): Promise<{ facts: NonNullable<EvaluationFacts['loyalty']>; profile: NonNullable<LoadedFacts['profileLoyalty']> }> {
  const balanceColumns = `t.subledger_id,
            sum(t.remaining) FILTER (WHERE t.type = 'addition' AND t.start_date <= $4 AND (t.expiry_date IS NULL OR t.expiry_date > $4))::text AS active,
            sum(t.remaining) FILTER (WHERE t.type = 'addition' AND t.start_date > $4)::text AS pending,
            sum(t.uncovered) FILTER (WHERE t.type = 'subtraction')::text AS debt`;
  const open = `((t.type = 'addition' AND t.remaining > 0) OR (t.type = 'subtraction' AND t.uncovered > 0))`;
  const rows = await db.query<BalanceRow & { id: number; name: string; tiers: Tier[]; card_based: boolean; allow_negative_balance: boolean }>(
    `SELECT p.id, p.name, p.tiers, p.card_based, p.allow_negative_balance, ${balanceColumns}
       FROM loyalty_programs p
       JOIN loyalty_program_applications a ON a.program_id = p.id AND a.application_id = $1
       LEFT JOIN customer_profiles cp ON cp.account_id = $2 AND cp.integration_id = $3 AND $3 <> '' AND NOT p.card_based
       LEFT JOIN loyalty_transactions t ON t.program_id = p.id AND t.profile_id = cp.id AND ${open}
      WHERE p.account_id = $2
      GROUP BY p.id, p.name, p.tiers, p.card_based, p.allow_negative_balance, t.subledger_id`,
    [app.id, app.accountId, profileIntegrationId, now.toISOString()],
  );
  const named = [...new Set(cards.filter((c) => typeof c === 'string' && c !== ''))];
  const cardRows =
    named.length > 0 && rows.some((r) => r.card_based)
      ? await db.query<BalanceRow & { program_id: number; identifier: string; status: string }>(
          `SELECT c.program_id, c.identifier, c.status, ${balanceColumns}
             FROM loyalty_cards c
             JOIN loyalty_programs p ON p.id = c.program_id AND p.account_id = $2 AND p.card_based
             JOIN loyalty_program_applications a ON a.program_id = p.id AND a.application_id = $1
             LEFT JOIN loyalty_transactions t ON t.program_id = c.program_id AND t.card_id = c.id AND c.status = 'active' AND ${open}
            WHERE c.identifier = ANY($3::text[])
            GROUP BY c.program_id, c.identifier, c.status, t.subledger_id`,
          [app.id, app.accountId, named, now.toISOString()],
        )
      : [];
  const facts: NonNullable<EvaluationFacts['loyalty']> = {};
  const profile: NonNullable<LoadedFacts['profileLoyalty']> = {};
  const net = (r: BalanceRow) => {
    const { activePoints, negativePoints } = netOfDebt(Number(r.active ?? 0), Number(r.debt ?? 0));
    return { active: activePoints, balance: roundPoints(activePoints - negativePoints), pending: Number(r.pending ?? 0) };
  };
  const fill = (fact: LoyaltyFact, name: string, tiers: Tier[], balanceRows: readonly BalanceRow[]) => {
    for (const r of balanceRows) {
      const b = net(r);
      if (r.subledger_id === null || r.subledger_id === '') {
        fact.balance = b.balance;
        profile[name] = { Balance: b.balance, PendingBalance: b.pending, Tier: tierOf(tiers, b.active).tier?.name ?? '' };
      } else (fact.subledgers ??= {})[r.subledger_id] = b.balance;
    }
    profile[name] ??= { Balance: 0, PendingBalance: 0, Tier: tierOf(tiers, 0).tier?.name ?? '' };
  };
  const programs = new Map<number, { name: string; tiers: Tier[]; rows: BalanceRow[]; cardBased: boolean; allowNegative: boolean }>();
  for (const r of rows) {
    const p = programs.get(Number(r.id)) ?? { name: r.name, tiers: r.tiers ?? [], rows: [], cardBased: r.card_based, allowNegative: r.allow_negative_balance };
    p.rows.push(r);
    programs.set(Number(r.id), p);
  }
  for (const [id, p] of programs) {
    const fact: LoyaltyFact = { balance: 0, ...(p.allowNegative ? { allowNegative: true } : {}) };
    facts[String(id)] = fact;
    if (!p.cardBased) {
      fill(fact, p.name, p.tiers, p.rows);
      continue;
    }
    fact.cardBased = true;
    const mine = cardRows.filter((r) => Number(r.program_id) === id);
    const card = named.find((c) => mine.some((r) => r.identifier === c && r.status === 'active'));
    const blocked = named.find((c) => mine.some((r) => r.identifier === c));
    if (card !== undefined) fact.card = card;
    else if (blocked !== undefined) fact.blockedCard = blocked;
    fill(fact, p.name, p.tiers, card === undefined ? [] : mine.filter((r) => r.identifier === card));
  }
  return { facts, profile };
}
