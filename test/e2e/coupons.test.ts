import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresUp } from '../helpers/services.js';
import { setupShop, startTestNode, unwrap, type ShopSetup, type TestNode } from '../helpers/node.js';
import { cart } from '../helpers/fixtures.js';
import { addCampaign, campaignStats, couponCounters, effectSummary, hoursFromNow, insertCoupon, rule } from '../helpers/promotions.js';

const couponRuleset = (effects: unknown[] = [['setDiscount', 'coupon', 10]], condition: unknown = ['couponValid']) => ({
  rules: [rule(condition, effects, 'with coupon')],
  bindings: [],
  activate: true,
});

describe.skipIf(!postgresUp)('coupons in sessions', () => {
  let t: TestNode;

  beforeAll(async () => {
    t = await startTestNode('postgres');
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  const shop = (options: Parameters<typeof setupShop>[2] = {}) => setupShop(t.url, t.admin, { ruleset: couponRuleset(), ...options });
  const put = async (s: ShopSetup, id: string, customerSession: Record<string, unknown>, query: Record<string, unknown> = {}, responseContent?: string[]) => {
    const r = await s.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
      params: { path: { customerSessionId: id }, query: query as never },
      body: { customerSession: customerSession as never, ...(responseContent ? { responseContent: responseContent as never } : {}) },
    });
    return unwrap(r);
  };
  const db = () => t.node.db;

  it('accepts a valid coupon, counts its redemption on close and gives it back on cancel', async () => {
    const s = await shop();
    const id = await insertCoupon(db(), s.applicationId, s.campaignId, { value: 'SAVE10', usageLimit: 2 });
    const open = await put(s, 'c-1', cart([40], { couponCodes: ['SAVE10'] }));
    expect(effectSummary(open.effects)).toEqual(['acceptCoupon', 'setDiscount']);
    expect(await couponCounters(db(), id)).toEqual({ usageCounter: 0, discountCounter: 0 });

    const closed = await put(s, 'c-1', { state: 'closed' }, {}, ['customerProfile']);
    expect(effectSummary(closed.effects)).toEqual(['acceptCoupon', 'setDiscount']);
    expect(await couponCounters(db(), id)).toEqual({ usageCounter: 1, discountCounter: 10 });
    expect(await campaignStats(t.admin, s.applicationId, s.campaignId)).toMatchObject({ couponRedemptionCount: 1, discountCount: 10, discountEffectCount: 1 });
    expect(closed.customerProfile).toMatchObject({ closedSessions: 1, totalSales: 40 });

    const cancelled = await put(s, 'c-1', { state: 'cancelled' }, {}, ['customerProfile']);
    expect(cancelled.effects.map((e) => [e.effectType, e.props])).toEqual([
      ['rollbackCoupon', { value: 'SAVE10' }],
      ['rollbackDiscount', { name: 'coupon', value: 10 }],
    ]);
    expect(await couponCounters(db(), id)).toEqual({ usageCounter: 0, discountCounter: 0 });
    expect(cancelled.customerProfile).toMatchObject({ closedSessions: 0, totalSales: 0 });
    expect(await campaignStats(t.admin, s.applicationId, s.campaignId)).toMatchObject({ couponRedemptionCount: 0, discountCount: 0, discountEffectCount: 0 });
  });

  it('counts a close that only discounts (one statement, no transaction) and gives it back on cancel', async () => {
    const s = await shop({ ruleset: couponRuleset([['setDiscount', 'plain', 7]], true) });
    await put(s, 'plain-1', cart([30]));
    const closed = await put(s, 'plain-1', { state: 'closed' }, {}, ['customerProfile']);
    expect(effectSummary(closed.effects)).toEqual(['setDiscount']);
    expect(closed.customerProfile).toMatchObject({ closedSessions: 1, totalSales: 30 });
    expect(await campaignStats(t.admin, s.applicationId, s.campaignId)).toMatchObject({ discountCount: 7, discountEffectCount: 1, couponRedemptionCount: 0 });

    // A second close of the same session is refused and counts nothing more.
    const again = await s.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
      params: { path: { customerSessionId: 'plain-1' } },
      body: { customerSession: { state: 'closed' } as never },
    });
    expect(again.response.status).toBe(400);
    expect(await campaignStats(t.admin, s.applicationId, s.campaignId)).toMatchObject({ discountCount: 7, discountEffectCount: 1 });

    const cancelled = await put(s, 'plain-1', { state: 'cancelled' }, {}, ['customerProfile']);
    expect(cancelled.effects.map((e) => [e.effectType, e.props])).toEqual([['rollbackDiscount', { name: 'plain', value: 7 }]]);
    expect(cancelled.customerProfile).toMatchObject({ closedSessions: 0, totalSales: 0 });
    expect(await campaignStats(t.admin, s.applicationId, s.campaignId)).toMatchObject({ discountCount: 0, discountEffectCount: 0 });
  });

  it('shows the coupons and referral of the session when responseContent asks', async () => {
    const s = await shop();
    await insertCoupon(db(), s.applicationId, s.campaignId, { value: 'SHOW1', usageLimit: 4, attributes: { kind: 'welcome' } });
    const r = await put(s, 'show-1', cart([20], { couponCodes: ['SHOW1', 'MISSING'], referralCode: 'NOPE' }), {}, ['coupons', 'referral', 'loyalty']);
    expect(r.coupons).toEqual([{ id: expect.any(Number), value: 'SHOW1', campaignId: s.campaignId, usageCounter: 0, usageLimit: 4, attributes: { kind: 'welcome' } }]);
    expect(r.referral).toBeNull();
    expect(r.loyalty).toEqual({ cards: [], programs: {} });
    const plain = await put(s, 'show-2', cart([20], { couponCodes: ['SHOW1'] }));
    expect(Object.keys(plain).sort()).toEqual(['createdCoupons', 'createdReferrals', 'effects']);
  });

  it('replays a session update sent again with the same Idempotency-Key', async () => {
    const s = await shop();
    const send = (key: string, total: number) =>
      s.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'idem-1' } },
        body: { customerSession: cart([total]) as never, responseContent: ['customerSession'] },
        headers: { 'Idempotency-Key': key },
      });
    const first = await send('u-1', 20);
    const again = await send('u-1', 20);
    expect(again.data).toEqual(first.data);
    expect(first.data!.customerSession!.updateCount).toBe(1);
    const other = await send('u-1', 30);
    expect(other.response.status).toBe(409);
    expect((await send('u-2', 30)).data!.customerSession!.updateCount).toBe(2);
    const tooLong = await send('k'.repeat(256), 30);
    expect(tooLong.response.status).toBe(400);
    // A key is kept 24 hours: older, it is free for a new request, which it then replays.
    await db().query(`UPDATE idempotency_keys SET created = now() - interval '25 hours' WHERE application_id = $1 AND key = 'u-1'`, [s.applicationId]);
    const later = await send('u-1', 40);
    expect(later.response.status).toBe(200);
    expect(later.data!.customerSession).toMatchObject({ updateCount: 3, total: 40 });
    expect((await send('u-1', 40)).data).toEqual(later.data);
    expect((await send('u-1', 20)).response.status).toBe(409);
  });

  it('rejects coupons with each reason the stored coupon and campaign give', async () => {
    const s = await shop();
    const disabled = await addCampaign(t.admin, s.applicationId, [rule(['couponValid'], [['setDiscount', 'd', 1]])], { state: 'disabled' });
    const strict = await addCampaign(t.admin, s.applicationId, [rule(['and', ['couponValid'], ['>', ['.', 'Session', 'Total'], 1000]], [['setDiscount', 's', 1]])]);
    const failing = await addCampaign(t.admin, s.applicationId, [rule(['couponValid'], [['setDiscount', 'f', ['/', 1, 0]]])]);
    await insertCoupon(db(), s.applicationId, s.campaignId, { value: 'OLD1', expiryDate: hoursFromNow(-1) });
    await insertCoupon(db(), s.applicationId, s.campaignId, { value: 'SOON', startDate: hoursFromNow(24) });
    await insertCoupon(db(), s.applicationId, s.campaignId, { value: 'USED', usageLimit: 3, usageCounter: 3 });
    await insertCoupon(db(), s.applicationId, s.campaignId, { value: 'BOBS', recipientIntegrationId: 'bob' });
    await insertCoupon(db(), s.applicationId, disabled, { value: 'OFF1' });
    await insertCoupon(db(), s.applicationId, strict, { value: 'BIG1' });
    await insertCoupon(db(), s.applicationId, failing, { value: 'FAIL' });
    // Made through the Management API, which reads an expiry of year 1 (Go's zero time) as none.
    const noEnd = unwrap(
      await t.admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons', {
        params: { path: { applicationId: s.applicationId, campaignId: s.campaignId } },
        body: { usageLimit: 0, validCharacters: ['N'], couponPattern: 'NOEND-#', numberOfCoupons: 1, expiryDate: '0001-01-01T00:00:00Z' } as never,
      }),
    ) as unknown as { data: Array<{ value: string; expiryDate?: string | null }> };
    expect(noEnd.data[0]).toMatchObject({ value: 'NOEND-N' });
    expect(noEnd.data[0]!.expiryDate ?? null).toBeNull();
    // Campaigns that are not running: ended, not started yet, archived.
    const ended = await addCampaign(t.admin, s.applicationId, [rule(['couponValid'], [['setDiscount', 'e', 1]])], { startTime: hoursFromNow(-48), endTime: hoursFromNow(-1) });
    const later = await addCampaign(t.admin, s.applicationId, [rule(['couponValid'], [['setDiscount', 'l', 1]])], { startTime: hoursFromNow(24) });
    const archived = await addCampaign(t.admin, s.applicationId, [rule(['couponValid'], [['setDiscount', 'a', 1]])], { state: 'disabled' });
    await insertCoupon(db(), s.applicationId, ended, { value: 'ENDED' });
    await insertCoupon(db(), s.applicationId, later, { value: 'LATER' });
    await insertCoupon(db(), s.applicationId, archived, { value: 'ARCH' });
    unwrap(
      await t.admin.PUT('/v1/applications/{applicationId}/campaigns/{campaignId}', {
        params: { path: { applicationId: s.applicationId, campaignId: archived } },
        body: { name: 'archived', state: 'archived' } as never,
      }),
    );
    const cases: Array<[string, string]> = [
      ['ENDED', 'rejectCoupon:CouponPartOfNotRunningCampaign'],
      ['LATER', 'rejectCoupon:CouponPartOfNotRunningCampaign'],
      ['ARCH', 'rejectCoupon:CouponPartOfNotRunningCampaign'],
      ['NOPE', 'rejectCoupon:CouponNotFound'],
      ['OLD1', 'rejectCoupon:CouponExpired'],
      ['SOON', 'rejectCoupon:CouponStartDateInFuture'],
      ['USED', 'rejectCoupon:CouponLimitReached'],
      ['BOBS', 'rejectCoupon:CouponRecipientDoesNotMatch'],
      ['OFF1', 'rejectCoupon:CouponPartOfNotRunningCampaign'],
      ['BIG1', 'rejectCoupon:CouponRejectedByCondition'],
      ['FAIL', 'rejectCoupon:EffectCouldNotBeApplied'],
    ];
    for (const [code, expected] of cases) {
      const r = await put(s, `reasons-${code}`, cart([20], { profileId: 'alice', couponCodes: [code] }));
      expect(effectSummary(r.effects), code).toEqual([expected]);
      expect(r.effects[0]!.props.value).toBe(code);
    }
    // The recipient may use it; a coupon whose expiry is zero or negative never expires.
    expect(effectSummary((await put(s, 'reasons-bob', cart([20], { profileId: 'bob', couponCodes: ['BOBS'] }))).effects)).toEqual(['acceptCoupon', 'setDiscount']);
    expect(effectSummary((await put(s, 'reasons-noend', cart([20], { profileId: 'alice', couponCodes: ['NOEND-N'] }))).effects)).toEqual(['acceptCoupon', 'setDiscount']);
  });

  it('rejects the coupon of an exclusive campaign that lost', async () => {
    const s = await shop({ application: { campaignPriority: 'exclusive', exclusiveCampaignsStrategy: 'highestDiscount' } });
    await addCampaign(t.admin, s.applicationId, [rule(true, [['setDiscount', 'big', 30]])]);
    await insertCoupon(db(), s.applicationId, s.campaignId, { value: 'SMALL' });
    const r = await put(s, 'x-1', cart([50], { couponCodes: ['SMALL'] }));
    expect(effectSummary(r.effects)).toEqual(['rejectCoupon:CouponPartOfNotTriggeredCampaign', 'setDiscount']);
  });

  it('compares codes as the Application says and reports the stored code', async () => {
    const s = await shop({ application: { caseSensitivity: 'insensitive-uppercase' } });
    await insertCoupon(db(), s.applicationId, s.campaignId, { value: 'WINTER5' });
    const r = await put(s, 'case-1', cart([20], { couponCodes: ['winter5'] }));
    expect(effectSummary(r.effects)).toEqual(['acceptCoupon', 'setDiscount']);
    expect(r.effects[0]!.props.value).toBe('WINTER5');
    const strict = await shop();
    await insertCoupon(db(), strict.applicationId, strict.campaignId, { value: 'WINTER5' });
    expect(effectSummary((await put(strict, 'case-2', cart([20], { couponCodes: ['winter5'] }))).effects)).toEqual(['rejectCoupon:CouponNotFound']);
  });

  it('holds campaign, profile and periodic coupon limits, and asks for a profile where one counts', async () => {
    const s = await shop();
    const perCampaign = await addCampaign(t.admin, s.applicationId, [rule(['couponValid'], [['setDiscount', 'c', 1]])], {
      limits: [{ action: 'redeemCoupon', limit: 1 }],
    });
    const perProfile = await addCampaign(t.admin, s.applicationId, [rule(['couponValid'], [['setDiscount', 'p', 1]])], {
      limits: [{ action: 'redeemCoupon', limit: 1, entities: ['Profile'] }],
    });
    await insertCoupon(db(), s.applicationId, perCampaign, { value: 'CAMP1' });
    await insertCoupon(db(), s.applicationId, perProfile, { value: 'PROF1' });
    const daily = await insertCoupon(db(), s.applicationId, s.campaignId, { value: 'DAY1', limits: [{ action: 'redeemCoupon', limit: 1, period: 'daily' }] });

    const closeWith = async (id: string, code: string, profileId = 'alice') => {
      await put(s, id, cart([20], { profileId, couponCodes: [code] }));
      return effectSummary((await put(s, id, { state: 'closed' })).effects);
    };
    expect(await closeWith('l-1', 'CAMP1')).toEqual(['acceptCoupon', 'setDiscount']);
    expect(await closeWith('l-2', 'CAMP1', 'bob')).toEqual(['rejectCoupon:CampaignLimitReached']);
    expect(await closeWith('l-3', 'PROF1')).toEqual(['acceptCoupon', 'setDiscount']);
    expect(await closeWith('l-4', 'PROF1')).toEqual(['rejectCoupon:ProfileLimitReached']);
    expect(await closeWith('l-5', 'PROF1', 'bob')).toEqual(['acceptCoupon', 'setDiscount']);
    expect(effectSummary((await put(s, 'l-6', cart([20], { profileId: '', couponCodes: ['PROF1'] }))).effects)).toEqual(['rejectCoupon:ProfileRequired']);
    expect(await closeWith('l-7', 'DAY1')).toEqual(['acceptCoupon', 'setDiscount']);
    expect(await closeWith('l-8', 'DAY1', 'bob')).toEqual(['rejectCoupon:CouponLimitReached']);
    const periods = await db().query<{ period: string }>(`SELECT period FROM limit_counters WHERE coupon_id = $1`, [daily]);
    const today = new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/Berlin' }).format(new Date());
    expect(periods).toEqual([{ period: today }]);
  });

  it('holds a daily campaign limit and a per-profile coupon limit', async () => {
    const s = await shop();
    const daily = await addCampaign(t.admin, s.applicationId, [rule(['couponValid'], [['setDiscount', 'd', 1]])], {
      limits: [{ action: 'redeemCoupon', limit: 1, period: 'daily' }],
    });
    const dailyCoupon = await insertCoupon(db(), s.applicationId, daily, { value: 'DAILYC' });
    await insertCoupon(db(), s.applicationId, s.campaignId, { value: 'ONEEACH', limits: [{ action: 'redeemCoupon', limit: 1, entities: ['Profile'] }] });
    const closeWith = async (id: string, code: string, profileId: string) => {
      await put(s, id, cart([20], { profileId, couponCodes: [code] }));
      return effectSummary((await put(s, id, { state: 'closed' })).effects);
    };
    expect(await closeWith('dl-1', 'DAILYC', 'alice')).toEqual(['acceptCoupon', 'setDiscount']);
    expect(await closeWith('dl-2', 'DAILYC', 'bob')).toEqual(['rejectCoupon:CampaignLimitReached']);
    const today = new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/Berlin' }).format(new Date());
    expect(await db().query(`SELECT period, counter::int AS counter FROM limit_counters WHERE campaign_id = $1 AND coupon_id = 0`, [daily])).toEqual([
      { period: today, counter: 1 },
    ]);
    // Yesterday's count does not hold today's: only the counter of the current day does.
    await db().query(`UPDATE limit_counters SET period = '2000-01-01' WHERE campaign_id = $1`, [daily]);
    expect(await closeWith('dl-3', 'DAILYC', 'bob')).toEqual(['acceptCoupon', 'setDiscount']);
    expect(await couponCounters(db(), dailyCoupon)).toMatchObject({ usageCounter: 2 });

    expect(await closeWith('pe-1', 'ONEEACH', 'alice')).toEqual(['acceptCoupon', 'setDiscount']);
    expect(await closeWith('pe-2', 'ONEEACH', 'alice')).toEqual(['rejectCoupon:ProfileLimitReached']);
    expect(await closeWith('pe-3', 'ONEEACH', 'bob')).toEqual(['acceptCoupon', 'setDiscount']);
  });

  it('caps discounts at what remains of the coupon discount limit', async () => {
    const s = await shop();
    const id = await insertCoupon(db(), s.applicationId, s.campaignId, { value: 'CAP15', discountLimit: 15 });
    await put(s, 'cap-1', cart([40], { couponCodes: ['CAP15'] }));
    await put(s, 'cap-1', { state: 'closed' });
    const second = await put(s, 'cap-2', cart([40], { couponCodes: ['CAP15'] }));
    expect(second.effects[1]!.props).toEqual({ name: 'coupon', value: 5, desiredValue: 10 });
    await put(s, 'cap-2', { state: 'closed' });
    expect(await couponCounters(db(), id)).toEqual({ usageCounter: 2, discountCounter: 15 });
  });

  it('creates real coupons from couponCreated on close only, usable by their recipient', async () => {
    const s = await shop({ ruleset: couponRuleset([['createCoupon', { usageLimit: 1, expiryDuration: '30D' }]], ['>', ['.', 'Session', 'Total'], 0]) });
    const open = await put(s, 'make-1', cart([20], { profileId: 'carol' }));
    expect(open.effects.map((e) => e.effectType)).toEqual(['couponCreated']);
    expect(open.createdCoupons).toEqual([]);
    expect(await db().query(`SELECT 1 FROM coupons WHERE application_id = $1`, [s.applicationId])).toHaveLength(0);
    const closed = await put(s, 'make-1', { state: 'closed' });
    expect(closed.createdCoupons).toHaveLength(1);
    const made = closed.createdCoupons[0] as { value: string; recipientIntegrationId: string; usageLimit: number; campaignId: number };
    expect(made).toMatchObject({ recipientIntegrationId: 'carol', usageLimit: 1, campaignId: s.campaignId });
    expect(closed.effects[0]!.props.value).toBe(made.value);
    const [row] = await db().query(`SELECT created_by, created_in_session FROM coupons WHERE value = $1`, [made.value]);
    expect(row).toEqual({ created_by: 'rule_engine', created_in_session: 'make-1' });
    expect(await campaignStats(t.admin, s.applicationId, s.campaignId)).toMatchObject({ couponCreationCount: 1 });
  });

  it('applies updateAttribute effects to the session and the profile when the session closes', async () => {
    const s = await shop({
      ruleset: couponRuleset(
        [
          ['updateAttribute', 'Profile.Attributes.lastOrderTotal', ['.', 'Session', 'Total']],
          ['updateAttribute', 'Session.Attributes.rewarded', true],
        ],
        true,
      ),
    });
    await put(s, 'attr-1', cart([20, 5], { profileId: 'olga', attributes: { channel: 'web' } }));
    const [before] = await db().query(`SELECT attributes FROM customer_profiles WHERE integration_id = 'olga'`);
    expect(before).toEqual({ attributes: {} });
    const closed = await put(s, 'attr-1', { state: 'closed' }, {}, ['customerSession', 'customerProfile']);
    expect(closed.customerSession!.attributes).toEqual({ channel: 'web', rewarded: true });
    expect(closed.customerProfile!.attributes).toEqual({ lastOrderTotal: 25 });
  });

  it('loses no profile attribute when 20 sessions of one profile close at the same time, each setting one', async () => {
    const s = await shop({
      ruleset: couponRuleset([['updateAttribute', ['concat', 'Profile.Attributes.', ['.', 'Session', 'Attributes', 'key']], ['.', 'Session', 'Total']]], true),
    });
    const closes = await Promise.all(
      Array.from({ length: 20 }, (_, i) => put(s, `many-${i}`, cart([i + 1], { profileId: 'polly', attributes: { key: `k${i}` }, state: 'closed' }))),
    );
    expect(closes.every((c) => c.effects.some((e) => e.effectType === 'updateAttribute'))).toBe(true);
    const [row] = await db().query<{ attributes: Record<string, number>; closed_sessions: number; total_sales: string }>(
      `SELECT attributes, closed_sessions, total_sales FROM customer_profiles WHERE integration_id = 'polly'`,
    );
    expect(row!.attributes).toEqual(Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, i + 1])));
    expect(row!.closed_sessions).toBe(20);
    expect(Number(row!.total_sales)).toBe(210);
  });

  it('persists nothing on a dry close: counters, sessions, profiles, events and created coupons stay', async () => {
    const s = await shop({ ruleset: couponRuleset([['setDiscount', 'coupon', 10], ['createCoupon', {}]]) });
    const id = await insertCoupon(db(), s.applicationId, s.campaignId, { value: 'DRY1', usageLimit: 1 });
    const r = await put(s, 'dry-1', cart([40], { profileId: 'dora', couponCodes: ['DRY1'], state: 'closed' }), { dry: true });
    expect(effectSummary(r.effects)).toEqual(['acceptCoupon', 'setDiscount', 'couponCreated']);
    expect(r.createdCoupons).toHaveLength(1);
    expect(await couponCounters(db(), id)).toEqual({ usageCounter: 0, discountCounter: 0 });
    const counts = await db().query<{ n: number }>(
      `SELECT (SELECT count(*) FROM customer_sessions WHERE application_id = $1)::int
            + (SELECT count(*) FROM events WHERE application_id = $1)::int
            + (SELECT count(*) FROM coupons WHERE application_id = $1 AND id <> $2)::int
            + (SELECT count(*) FROM customer_profiles WHERE integration_id = 'dora')::int
            + (SELECT count(*) FROM limit_counters WHERE campaign_id = $3)::int AS n`,
      [s.applicationId, id, s.campaignId],
    );
    expect(counts[0]!.n).toBe(0);
  });

  it('redeems a coupon with usageLimit 1 exactly once when 50 sessions close at the same time', async () => {
    const s = await shop();
    const id = await insertCoupon(db(), s.applicationId, s.campaignId, { value: 'ONCE', usageLimit: 1 });
    const ids = Array.from({ length: 50 }, (_, i) => `race-${i}`);
    await Promise.all(ids.map((sid, i) => put(s, sid, cart([30], { profileId: `p${i}`, couponCodes: ['ONCE'] }))));
    const closes = await Promise.all(ids.map((sid) => put(s, sid, { state: 'closed' })));
    const outcomes = closes.map((c) => effectSummary(c.effects).join(','));
    expect(outcomes.filter((o) => o === 'acceptCoupon,setDiscount')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'rejectCoupon:CouponLimitReached')).toHaveLength(49);
    expect(await couponCounters(db(), id)).toEqual({ usageCounter: 1, discountCounter: 10 });
  });

  it('never exceeds a campaign budget of 10 discounts under 100 parallel closes', async () => {
    const s = await shop();
    const budgeted = await addCampaign(t.admin, s.applicationId, [rule(true, [['setDiscount', 'budget', 5]])], {
      limits: [{ action: 'setDiscountEffect', limit: 10 }],
    });
    const ids = Array.from({ length: 100 }, (_, i) => `budget-${i}`);
    const closes = await Promise.all(ids.map((sid, i) => put(s, sid, cart([30], { profileId: `b${i}`, state: 'closed' }))));
    const discounted = closes.filter((c) => c.effects.some((e) => e.effectType === 'setDiscount'));
    expect(discounted).toHaveLength(10);
    expect(await campaignStats(t.admin, s.applicationId, budgeted)).toMatchObject({ discountEffectCount: 10, discountCount: 50 });
    const [counter] = await db().query(`SELECT counter::int AS c FROM limit_counters WHERE campaign_id = $1 AND action = 'setDiscountEffect'`, [budgeted]);
    expect(counter).toEqual({ c: 10 });
  });
});
