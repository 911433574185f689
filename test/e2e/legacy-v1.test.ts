import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIntegrationClient, unwrap } from '../../sdk/index.js';
import { cart } from '../helpers/fixtures.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';
import { insertCoupon, rule } from '../helpers/promotions.js';
import { postgresUp } from '../helpers/services.js';

/** 10% off over 100, 5 off with a valid coupon, and a welcome notification for new profiles. */
const shopRuleset = () => ({
  rules: [
    rule(['>', ['.', 'Session', 'Total'], 100], [['setDiscount', '10% off', ['*', ['.', 'Session', 'Total'], 0.1]]], '10% off'),
    rule(['couponValid'], [['setDiscount', 'coupon', 5]], 'coupon'),
    rule(['=', ['.', 'Event', 'Type'], 'service_profile_created'], [['showNotification', 'info', 'Welcome', 'Hello']], 'welcome'),
  ],
  bindings: [],
  activate: true,
});

const V1_PROFILE_KEYS = ['accountId', 'attributes', 'closedSessions', 'created', 'integrationId', 'lastActivity', 'loyaltyMemberships', 'totalSales'];

describe.skipIf(!postgresUp)('legacy Integration API v1', () => {
  let t: TestNode;
  let shop: ShopSetup;
  let other: ShopSetup;

  beforeAll(async () => {
    t = await startTestNode('postgres');
    shop = await setupShop(t.url, t.admin, { ruleset: shopRuleset() });
    other = await setupShop(t.url, t.admin);
    unwrap(await t.admin.POST('/v1/attributes', { body: { entity: 'Event', eventType: 'viewed', name: 'sku', type: 'string' } }));
  });
  afterAll(async () => {
    await t?.stop();
  });

  const db = () => t.node.db;
  const putSession = (s: ShopSetup, id: string, body: Record<string, unknown>, query: Record<string, unknown> = {}) =>
    s.integration.PUT('/v1/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: id }, query: query as never }, body: body as never });
  const putProfile = (s: ShopSetup, id: string, attributes: Record<string, unknown>) =>
    s.integration.PUT('/v1/customer_profiles/{integrationId}', { params: { path: { integrationId: id } }, body: { attributes } });
  const getV2 = (s: ShopSetup, id: string) =>
    s.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: id } } });
  const trackV1 = (s: ShopSetup, body: Record<string, unknown>) => s.integration.POST('/v1/events', { body: body as never });

  it('updates a profile: attributes merged, rules run, answered as {session, profile, event}', async () => {
    const first = unwrap(await putProfile(shop, 'v1-alice', { name: 'Alice', tier: 'silver' }));
    expect(first.session).toBeNull();
    expect(Object.keys(first.profile!).sort()).toEqual(V1_PROFILE_KEYS);
    expect(first.profile).toMatchObject({ integrationId: 'v1-alice', attributes: { name: 'Alice', tier: 'silver' }, closedSessions: 0, totalSales: 0, loyaltyMemberships: [] });
    expect(first.event).toMatchObject({ type: 'service_profile_created', profileId: 'v1-alice', applicationId: shop.applicationId });
    expect(first.event).not.toHaveProperty('storeIntegrationId');
    expect(first.event!.effects!.map((e) => e.effectType)).toEqual(['showNotification']);
    const second = unwrap(await putProfile(shop, 'v1-alice', { tier: 'gold' }));
    expect(second.profile!.attributes).toEqual({ name: 'Alice', tier: 'gold' });
    expect(second.event).toMatchObject({ type: 'service_profile_updated', effects: [] });
  });

  it('updates a session with the flat v1 body, which v2 reads back as the same session', async () => {
    await insertCoupon(db(), shop.applicationId, shop.campaignId, { value: 'V1-SAVE', usageLimit: 5 });
    const r = unwrap(
      await putSession(shop, 'v1-s1', {
        profileId: 'v1-bob',
        coupon: 'V1-SAVE',
        referral: '',
        cartItems: [{ name: 'Shoe', sku: 'SHOE', quantity: 1, price: 120, adjustment: { payFromLoyaltyProgram: 1 } }],
        total: 999,
        attributes: { channel: 'app' },
      }),
    );
    expect(r.session).toMatchObject({
      integrationId: 'v1-s1',
      profileId: 'v1-bob',
      coupon: 'V1-SAVE',
      referral: '',
      state: 'open',
      total: 120,
      attributes: { channel: 'app' },
      applicationId: shop.applicationId,
    });
    expect(r.session!.cartItems![0]).not.toHaveProperty('adjustment');
    expect(Object.keys(r.profile!).sort()).toEqual(V1_PROFILE_KEYS);
    expect(r.profile).toMatchObject({ integrationId: 'v1-bob' });
    expect(r.event).toMatchObject({ type: 'service_session_created', sessionId: 'v1-s1' });
    expect(r.event!.effects!.map((e) => [e.effectType, e.props.value])).toEqual([
      ['acceptCoupon', 'V1-SAVE'],
      ['setDiscount', 12],
      ['setDiscount', 5],
    ]);

    const v2 = unwrap(await getV2(shop, 'v1-s1'));
    expect(v2.customerSession).toMatchObject({ profileId: 'v1-bob', couponCodes: ['V1-SAVE'], referralCode: '', total: 120, attributes: { channel: 'app' }, updateCount: 1 });

    // A v2 update builds on it; a v1 update without a coupon means no coupon.
    unwrap(
      await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'v1-s1' } },
        body: { customerSession: { attributes: { gift: true } } },
      }),
    );
    const again = unwrap(await putSession(shop, 'v1-s1', { attributes: { note: 'x' } }));
    expect(again.session).toMatchObject({ coupon: '', attributes: { channel: 'app', gift: true, note: 'x' }, total: 120 });
    expect(again.event).toMatchObject({ type: 'service_session_updated' });
    expect(unwrap(await getV2(shop, 'v1-s1')).customerSession).toMatchObject({ couponCodes: [], updateCount: 3 });
  });

  it('counts closed sessions and sales across v1 and v2 on one profile', async () => {
    unwrap(await putSession(shop, 'mix-1', { profileId: 'v1-carol', cartItems: cart([30]).cartItems }));
    const closedV1 = unwrap(await putSession(shop, 'mix-1', { state: 'closed' }));
    expect(closedV1.session).toMatchObject({ state: 'closed', total: 30 });
    expect(closedV1.profile).toMatchObject({ closedSessions: 1, totalSales: 30 });
    expect(closedV1.event).toMatchObject({ type: 'service_session_closed' });

    const closedV2 = unwrap(
      await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'mix-2' } },
        body: { customerSession: cart([45.5], { profileId: 'v1-carol', state: 'closed' }) as never, responseContent: ['customerProfile'] },
      }),
    );
    expect(closedV2.customerProfile).toMatchObject({ closedSessions: 2, totalSales: 75.5 });
    const profile = unwrap(await putProfile(shop, 'v1-carol', {}));
    expect(profile.profile).toMatchObject({ closedSessions: 2, totalSales: 75.5 });
    // v2 closes v1's session state machine the same way: a closed session may only be cancelled.
    const reopen = await putSession(shop, 'mix-1', { state: 'open' });
    expect(reopen.response.status).toBe(400);
    expect(reopen.error!.errors[0]!.source?.pointer).toBe('/customerSession/state');
  });

  it('answers an anonymous session with a null profile, and dry runs store nothing', async () => {
    const anonymous = unwrap(await putSession(shop, 'v1-anon', { profileId: '', cartItems: cart([200]).cartItems }));
    expect(anonymous.profile).toBeNull();
    expect(anonymous.session).toMatchObject({ profileId: '', total: 200, firstSession: true });
    const dry = unwrap(await putSession(shop, 'v1-dry', { profileId: 'v1-dry-p', cartItems: cart([150]).cartItems }, { dry: true }));
    expect(dry.event!.effects!.map((e) => e.props.value)).toEqual([15]);
    expect((await getV2(shop, 'v1-dry')).response.status).toBe(404);
  });

  it('refuses bad v1 session bodies with a pointer', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ coupon: 5 }, '/coupon'],
      [{ state: 'partially_returned' }, '/state'],
      [{ cartItems: [{ sku: 'A', quantity: 0, price: 1 }] }, '/cartItems/0/quantity'],
      [{ total: 'lots' }, '/total'],
    ];
    for (const [body, pointer] of cases) {
      const r = await putSession(shop, 'v1-bad', body);
      expect(r.response.status, pointer).toBe(400);
      expect(r.error!.errors.map((e) => e.source?.pointer), pointer).toContain(pointer);
    }
    expect((await getV2(shop, 'v1-bad')).response.status).toBe(404);
  });

  it('redeems a referral sent as the flat `referral` of a v1 session', async () => {
    const s = await setupShop(t.url, t.admin, { ruleset: { rules: [rule(['referralValid'], [['setDiscount', 'friend', 7]], 'friend')], bindings: [], activate: true } });
    const code = unwrap(await s.integration.POST('/v1/referrals', { body: { campaignId: s.campaignId, advocateProfileIntegrationId: 'v1-ada' } })).code;
    const open = unwrap(await putSession(s, 'v1-ref', { profileId: 'v1-fred', referral: code, cartItems: [{ name: 'A', sku: 'A', quantity: 1, price: 30 }] }));
    expect(open.session).toMatchObject({ referral: code, total: 30 });
    expect(open.event!.effects!.map((e) => [e.effectType, e.props.value])).toEqual([
      ['acceptReferral', code],
      ['setDiscount', 7],
    ]);
    expect(unwrap(await getV2(s, 'v1-ref')).customerSession).toMatchObject({ referralCode: code });
    unwrap(await putSession(s, 'v1-ref', { profileId: 'v1-fred', referral: code, state: 'closed', cartItems: [{ name: 'A', sku: 'A', quantity: 1, price: 30 }] }));
    expect(await db().query(`SELECT usage_counter FROM referrals WHERE application_id = $1 AND code = $2`, [s.applicationId, code])).toEqual([{ usage_counter: 1 }]);
    const unknown = unwrap(await putSession(s, 'v1-ref-2', { profileId: 'v1-gus', referral: 'NOPE-NOPE' }));
    expect(unknown.event!.effects!.map((e) => [e.effectType, e.props.rejectionReason])).toEqual([['rejectReferral', 'ReferralNotFound']]);
  });

  it('refuses bad v1 profile and event bodies with a pointer', async () => {
    const profile = await shop.integration.PUT('/v1/customer_profiles/{integrationId}', {
      params: { path: { integrationId: 'v1-bad-profile' } },
      body: { attributes: 'tall' } as never,
    });
    expect(profile.response.status).toBe(400);
    expect(profile.error!.errors.map((e) => e.source?.pointer)).toContain('/attributes');
    const events: Array<[Record<string, unknown>, string]> = [
      [{ profileId: 'v1-bad-profile', type: 'viewed', attributes: { sku: 'A' } }, '/sessionId'],
      [{ sessionId: 'v1-bad-s', profileId: 'v1-bad-profile', type: '', attributes: { sku: 'A' } }, '/type'],
      [{ sessionId: 'v1-bad-s', profileId: 'v1-bad-profile', type: 'viewed', attributes: { sku: 5 } }, '/attributes/sku'],
    ];
    for (const [body, pointer] of events) {
      const r = await trackV1(shop, body);
      expect(r.response.status, pointer).toBe(400);
      expect(r.error!.errors.map((e) => e.source?.pointer), pointer).toContain(pointer);
    }
    expect(await db().query(`SELECT 1 FROM customer_profiles WHERE integration_id = 'v1-bad-profile'`)).toEqual([]);
  });

  it('tracks an event (201) with the same rules as v2, on a session that must be the profile\'s', async () => {
    const r = await trackV1(shop, { sessionId: 'v1-ev-s1', profileId: 'v1-dan', type: 'viewed', attributes: { sku: 'SHOE' } });
    expect(r.response.status).toBe(201);
    const body = r.data!;
    expect(body.session).toMatchObject({ integrationId: 'v1-ev-s1', profileId: 'v1-dan', state: 'open', coupon: '' });
    expect(body.profile).toMatchObject({ integrationId: 'v1-dan' });
    expect(body.event).toMatchObject({ type: 'viewed', sessionId: 'v1-ev-s1', profileId: 'v1-dan', attributes: { sku: 'SHOE' } });
    expect(body.event).not.toHaveProperty('storeIntegrationId');
    expect(unwrap(await getV2(shop, 'v1-ev-s1')).customerSession).toMatchObject({ profileId: 'v1-dan', state: 'open' });

    const anonymous = await trackV1(shop, { sessionId: 'v1-anon', type: 'viewed', attributes: { sku: 'HAT' } });
    expect(anonymous.response.status).toBe(201);
    expect(anonymous.data!.profile).toBeNull();

    const cases: Array<[Record<string, unknown>, string, string?]> = [
      [{ profileId: 'v1-dan', type: 'viewed', attributes: { sku: 'A' } }, '/sessionId'],
      [{ sessionId: '', profileId: 'v1-dan', type: 'viewed', attributes: { sku: 'A' } }, '/sessionId'],
      [{ sessionId: 's', profileId: 'v1-dan', attributes: { sku: 'A' } }, '/type'],
      [{ sessionId: 's', profileId: 'v1-dan', type: 'viewed' }, '/attributes'],
      [{ sessionId: 's', profileId: 'v1-dan', type: 'viewed', attributes: { colour: 'red' } }, '/attributes/colour', 'UndefinedAttribute'],
      [{ sessionId: 's', profileId: 'v1-dan', type: 'service_session_closed', attributes: { sku: 'A' } }, '/type', 'ReservedEventType'],
      [{ sessionId: 'v1-ev-s1', profileId: 'someone-else', type: 'viewed', attributes: { sku: 'A' } }, '/sessionId', 'SessionProfileMismatch'],
    ];
    for (const [payload, pointer, title] of cases) {
      const res = await trackV1(shop, payload);
      expect(res.response.status, pointer).toBe(400);
      const hit = res.error!.errors.find((e) => e.source?.pointer === pointer);
      expect(hit, `${pointer} in ${JSON.stringify(res.error)}`).toBeDefined();
      if (title) expect(hit!.title).toBe(title);
    }
    expect(await db().query(`SELECT 1 FROM customer_sessions WHERE integration_id = 's'`)).toEqual([]);
  });

  it('deletes every attribute of a customer: profile, sessions with their items, and events, in every Application', async () => {
    unwrap(await putProfile(shop, 'v1-erin', { email: 'erin@example.com' }));
    unwrap(
      await putSession(shop, 'erin-s1', {
        profileId: 'v1-erin',
        attributes: { address: 'Main St 1' },
        cartItems: [{ sku: 'A', quantity: 1, price: 10, attributes: { engraving: 'ERIN' } }],
      }),
    );
    unwrap(await putSession(other, 'erin-s2', { profileId: 'v1-erin', attributes: { phone: '123' } }));
    unwrap(await trackV1(shop, { sessionId: 'erin-s1', profileId: 'v1-erin', type: 'viewed', attributes: { sku: 'A' } }));
    // A stored Idempotency-Key response that shows the customer.
    unwrap(
      await shop.integration.PUT('/v2/customer_profiles/{integrationId}', {
        params: { path: { integrationId: 'v1-erin' } },
        body: { attributes: { vip: true }, responseContent: ['customerProfile'] } as never,
        headers: { 'Idempotency-Key': 'erin-key' },
      }),
    );
    expect(await db().query(`SELECT 1 FROM idempotency_keys WHERE key = 'erin-key'`)).toHaveLength(1);
    // Someone else's data stays.
    unwrap(await putSession(shop, 'frank-s1', { profileId: 'v1-frank', attributes: { address: 'elsewhere' } }));

    const deleted = await shop.integration.DELETE('/v1/customer_data/{integrationId}', { params: { path: { integrationId: 'v1-erin' } } });
    expect(deleted.response.status).toBe(204);

    const [profile] = await db().query<{ attributes: unknown }>(`SELECT attributes FROM customer_profiles WHERE integration_id = 'v1-erin'`);
    expect(profile!.attributes).toEqual({});
    const sessions = await db().query<{ attributes: unknown; cart_items: Array<Record<string, unknown>> }>(
      `SELECT attributes, cart_items FROM customer_sessions WHERE profile_id = 'v1-erin' ORDER BY id`,
    );
    expect(sessions.map((s) => s.attributes)).toEqual([{}, {}]);
    expect(sessions[0]!.cart_items).toEqual([expect.objectContaining({ sku: 'A', attributes: {} })]);
    expect(await db().query(`SELECT 1 FROM idempotency_keys WHERE key = 'erin-key'`)).toHaveLength(0);
    const events = await db().query<{ attributes: unknown }>(`SELECT attributes FROM events WHERE profile_id = 'v1-erin'`);
    expect(events.length).toBeGreaterThan(0);
    expect(events.every((e) => JSON.stringify(e.attributes) === '{}')).toBe(true);
    // The sessions' actors do not serve or write back their old copies.
    expect(unwrap(await getV2(shop, 'erin-s1')).customerSession.attributes).toEqual({});
    const next = unwrap(await putSession(shop, 'erin-s1', { profileId: 'v1-erin', attributes: { fresh: 1 } }));
    expect(next.session!.attributes).toEqual({ fresh: 1 });
    expect(next.session!.cartItems).toEqual([expect.objectContaining({ attributes: {} })]);
    const [frank] = await db().query<{ attributes: unknown }>(`SELECT attributes FROM customer_sessions WHERE integration_id = 'frank-s1'`);
    expect(frank!.attributes).toEqual({ address: 'elsewhere' });

    const missing = await shop.integration.DELETE('/v1/customer_data/{integrationId}', { params: { path: { integrationId: 'nobody' } } });
    expect(missing.response.status).toBe(404);
    expect(missing.error!.errors[0]!.source?.pointer).toBe('/path/integrationId');
  });

  it("keeps another Application's sessions apart and refuses a wrong key", async () => {
    unwrap(await putSession(shop, 'shared-id', { profileId: 'v1-gil', attributes: { app: 'shop' } }));
    const theirs = unwrap(await putSession(other, 'shared-id', { profileId: 'v1-hue', attributes: { app: 'other' } }));
    expect(theirs.session).toMatchObject({ applicationId: other.applicationId, profileId: 'v1-hue', attributes: { app: 'other' } });
    expect(unwrap(await getV2(shop, 'shared-id')).customerSession).toMatchObject({ profileId: 'v1-gil', attributes: { app: 'shop' } });

    const stranger = createIntegrationClient({ baseUrl: t.url, apiKey: 'wrong', retries: 0 });
    const calls = [
      await stranger.PUT('/v1/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'shared-id' } }, body: { attributes: { x: 1 } } }),
      await stranger.PUT('/v1/customer_profiles/{integrationId}', { params: { path: { integrationId: 'v1-gil' } }, body: { attributes: { x: 1 } } }),
      await stranger.POST('/v1/events', { body: { sessionId: 'shared-id', profileId: 'v1-gil', type: 'viewed', attributes: { sku: 'A' } } }),
      await stranger.DELETE('/v1/customer_data/{integrationId}', { params: { path: { integrationId: 'v1-gil' } } }),
    ];
    expect(calls.map((c) => c.response.status)).toEqual([401, 401, 401, 401]);
    const [gil] = await db().query<{ attributes: unknown }>(`SELECT attributes FROM customer_sessions WHERE integration_id = 'shared-id' AND profile_id = 'v1-gil'`);
    expect(gil!.attributes).toEqual({ app: 'shop' });
  });
});
