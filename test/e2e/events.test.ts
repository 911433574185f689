import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIntegrationClient, unwrap } from '../../sdk/index.js';
import { cart } from '../helpers/fixtures.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';
import { campaignStats, insertCoupon, rule } from '../helpers/promotions.js';
import { postgresUp } from '../helpers/services.js';

const BUSY_MESSAGE = 'Too many requests are updating this profile at the same time';

/** A coupon for every 4- or 5-star rating; nothing for other events. */
const ratingRuleset = () => ({
  rules: [
    rule(
      ['and', ['=', ['.', 'Event', 'Type'], 'rated'], ['>=', ['.|', 'Event', 'Attributes', 'stars', 0], 4]],
      [['createCoupon', { usageLimit: 1 }]],
      'thanks',
    ),
    // Only true when an event sees the session's coupon: events never do.
    rule(['and', ['=', ['.', 'Event', 'Type'], 'rated'], ['couponValid']], [['setDiscount', 'coupon', 5]], 'coupon'),
  ],
  bindings: [],
  activate: true,
});

describe.skipIf(!postgresUp)('custom events (v2)', () => {
  let t: TestNode;
  let shop: ShopSetup;
  let other: ShopSetup;
  let release: (() => void) | undefined;
  let held: Promise<void> | undefined;

  beforeAll(async () => {
    t = await startTestNode('postgres', {
      actorBeforeRun: async (key) => {
        if (key.includes(':busy') && held) await held;
      },
    });
    shop = await setupShop(t.url, t.admin, { ruleset: ratingRuleset() });
    other = await setupShop(t.url, t.admin);
    for (const [name, type] of [
      ['stars', 'number'],
      ['comment', 'string'],
      ['tags', '(list string)'],
    ] as const) {
      unwrap(await t.admin.POST('/v1/attributes', { body: { entity: 'Event', eventType: 'rated', name, type, title: name } }));
    }
    // Defined for the other Application only.
    unwrap(
      await t.admin.POST('/v1/attributes', {
        body: { entity: 'Event', eventType: 'visited', name: 'page', type: 'string', subscribedApplicationsIds: [other.applicationId] },
      }),
    );
  });
  afterAll(async () => {
    await t?.stop();
  });

  const db = () => t.node.db;
  type EventBody = Record<string, unknown>;
  const track = (s: ShopSetup, body: EventBody, query: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
    s.integration.POST('/v2/events', { params: { query: query as never }, body: body as never, headers });
  const rated = (profileId: string, extra: EventBody = {}): EventBody => ({ profileId, type: 'rated', attributes: { stars: 5 }, ...extra });
  const eventRows = (profileId: string) =>
    db().query<{ id: number; type: string; session_id: string; application_id: number; attributes: Record<string, unknown>; effects: Array<{ effectType: string }> }>(
      `SELECT id, type, session_id, application_id, attributes, effects FROM events WHERE profile_id = $1 ORDER BY id`,
      [profileId],
    );
  const expect400 = async (r: Promise<{ response: Response; error?: { errors: Array<{ title: string; source?: { pointer?: string } }> } }>, pointer: string, title?: string) => {
    const res = await r;
    expect(res.response.status, pointer).toBe(400);
    const hit = res.error!.errors.find((e) => e.source?.pointer === pointer);
    expect(hit, `${pointer} in ${JSON.stringify(res.error)}`).toBeDefined();
    if (title) expect(hit!.title).toBe(title);
  };

  it('tracks an event on the profile implicit session, commits its effects and records it', async () => {
    const state = unwrap(await track(shop, rated('alice', { attributes: { stars: 5, comment: 'great', tags: ['a'] }, responseContent: ['event', 'customerProfile', 'triggeredCampaigns'] })));
    expect(state.effects.map((e) => e.effectType)).toEqual(['couponCreated']);
    expect(state.createdCoupons).toHaveLength(1);
    expect(state.event).toMatchObject({
      type: 'rated',
      profileId: 'alice',
      sessionId: 'event-session:alice',
      applicationId: shop.applicationId,
      attributes: { stars: 5, comment: 'great', tags: ['a'] },
    });
    expect(state.event!.id).toBeGreaterThan(0);
    expect(state.event!.effects!.map((e) => e.effectType)).toEqual(['couponCreated']);
    // The missing profile was created.
    expect(state.customerProfile).toMatchObject({ integrationId: 'alice', attributes: {} });
    expect(state.triggeredCampaigns).toEqual([expect.objectContaining({ id: shop.campaignId })]);
    const rows = await eventRows('alice');
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ type: 'rated', session_id: 'event-session:alice', attributes: { stars: 5, comment: 'great', tags: ['a'] } });
    expect(rows[0]!.effects.map((e) => e.effectType)).toEqual(['couponCreated']);
    const code = state.createdCoupons[0]!.value as string;
    expect(await db().query(`SELECT value FROM coupons WHERE value = $1 AND created_in_session = 'event-session:alice'`, [code])).toHaveLength(1);
    // The implicit session is virtual: no session row, so the first real cart stays the first session.
    expect(await db().query(`SELECT 1 FROM customer_sessions WHERE integration_id = 'event-session:alice'`)).toEqual([]);
    const firstCart = unwrap(
      await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'alice-cart' } },
        body: { customerSession: cart([10], { profileId: 'alice' }) as never, responseContent: ['customerSession'] },
      }),
    );
    expect(firstCart.customerSession!.firstSession).toBe(true);
    // A 3-star rating fires nothing.
    const meh = unwrap(await track(shop, rated('alice', { attributes: { stars: 3 } })));
    expect(meh.effects).toEqual([]);
    expect((await eventRows('alice')).filter((e) => e.type === 'rated')).toHaveLength(2);
  });

  it('creates the named session empty and open when it is missing, and binds later events to it', async () => {
    const first = unwrap(await track(shop, rated('bob', { sessionId: 'bob-s1', storeIntegrationId: 'store-1', responseContent: ['event'] })));
    expect(first.event).toMatchObject({ sessionId: 'bob-s1', storeIntegrationId: 'store-1' });
    const read = unwrap(await shop.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'bob-s1' } } }));
    expect(read.customerSession).toMatchObject({ integrationId: 'bob-s1', profileId: 'bob', state: 'open', storeIntegrationId: 'store-1', cartItems: [], updateCount: 1 });
    unwrap(await track(shop, rated('bob', { sessionId: 'bob-s1', attributes: { stars: 1 } })));
    expect((await eventRows('bob')).map((e) => e.session_id)).toEqual(['bob-s1', 'bob-s1']);
    // The session goes on as a normal session.
    const updated = unwrap(
      await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'bob-s1' } },
        body: { customerSession: { cartItems: cart([20]).cartItems, state: 'closed' }, responseContent: ['customerSession'] },
      }),
    );
    expect(updated.customerSession).toMatchObject({ profileId: 'bob', state: 'closed', total: 20, updateCount: 2 });
  });

  it('never redeems or rejects the session coupon: events see no codes', async () => {
    const couponId = await insertCoupon(db(), shop.applicationId, shop.campaignId, { value: 'RATE-ME', usageLimit: 1 });
    unwrap(
      await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'carl-s1' } },
        body: { customerSession: cart([10], { profileId: 'carl', couponCodes: ['RATE-ME'] }) as never },
      }),
    );
    const state = unwrap(await track(shop, rated('carl', { sessionId: 'carl-s1', attributes: { stars: 1 } })));
    expect(state.effects).toEqual([]);
    const [coupon] = await db().query<{ usage_counter: number }>(`SELECT usage_counter FROM coupons WHERE id = $1`, [couponId]);
    expect(coupon!.usage_counter).toBe(0);
  });

  it('refuses an event for a session of another profile with SessionProfileMismatch', async () => {
    unwrap(await track(shop, rated('dora', { sessionId: 'dora-s1' })));
    await expect400(track(shop, rated('eve', { sessionId: 'dora-s1' })), '/sessionId', 'SessionProfileMismatch');
    // An anonymous session is no profile's either.
    unwrap(
      await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'anon-s1' } },
        body: { customerSession: { profileId: '' } },
      }),
    );
    await expect400(track(shop, rated('eve', { sessionId: 'anon-s1' })), '/sessionId', 'SessionProfileMismatch');
    const anonymous = unwrap(await track(shop, { sessionId: 'anon-s1', type: 'rated', attributes: { stars: 2 }, responseContent: ['event', 'customerProfile'] }));
    expect(anonymous.event).toMatchObject({ profileId: '', sessionId: 'anon-s1' });
    expect(anonymous.customerProfile).toBeNull();
    expect(await eventRows('eve')).toEqual([]);
  });

  it('refuses each invalid event with a pointer to what is wrong', async () => {
    await expect400(track(shop, { profileId: 'fay', type: 'service_profile_updated', attributes: { stars: 1 } }), '/type', 'ReservedEventType');
    await expect400(track(shop, { profileId: 'fay', type: 'service_anything', attributes: { stars: 1 } }), '/type', 'ReservedEventType');
    await expect400(track(shop, { profileId: 'fay', type: 'undefined_type', attributes: { x: 1 } }), '/type', 'UndefinedEventType');
    await expect400(track(shop, { profileId: 'fay', type: 'rated', attributes: { stars: 1, mood: 'ok' } }), '/attributes/mood', 'UndefinedAttribute');
    await expect400(track(shop, { profileId: 'fay', type: 'rated', attributes: { 'a/b': 1 } }), '/attributes/a~1b', 'UndefinedAttribute');
    await expect400(track(shop, { profileId: 'fay', type: 'rated', attributes: { stars: 'five' } }), '/attributes/stars', 'InvalidAttributeValue');
    await expect400(track(shop, { profileId: 'fay', type: 'rated', attributes: { tags: [1] } }), '/attributes/tags', 'InvalidAttributeValue');
    await expect400(track(shop, { profileId: 'fay', type: 'rated', attributes: {} }), '/attributes');
    await expect400(track(shop, { profileId: 'fay', type: 'rated' }), '/attributes');
    await expect400(track(shop, { profileId: 'fay', attributes: { stars: 1 } }), '/type');
    await expect400(track(shop, { profileId: 'fay', type: '', attributes: { stars: 1 } }), '/type');
    await expect400(track(shop, { profileId: 'fay', type: 'rated', attributes: { stars: 1 }, sessionId: '' }), '/sessionId');
    await expect400(track(shop, { type: 'rated', attributes: { stars: 1 } }), '/sessionId');
    await expect400(track(shop, { profileId: 'fay', type: 'rated', attributes: { stars: 1 }, responseContent: ['nope'] }), '/responseContent/0');
    await expect400(track(shop, rated('fay'), { dry: 'perhaps' }), '/query/dry');
    // An attribute subscribed by another Application does not define the type here.
    await expect400(track(shop, { profileId: 'fay', type: 'visited', attributes: { page: '/' } }), '/type', 'UndefinedEventType');
    unwrap(await track(other, { profileId: 'fay', type: 'visited', attributes: { page: '/' } }));
    expect((await eventRows('fay')).map((e) => [e.type, e.application_id])).toEqual([['visited', other.applicationId]]);
    expect(await db().query(`SELECT 1 FROM customer_profiles WHERE integration_id = 'fay'`)).toHaveLength(1);
  });

  it('persists nothing for a dry event: no profile, session, event or coupon rows', async () => {
    const couponsBefore = (await db().query(`SELECT id FROM coupons`)).length;
    const dry = unwrap(await track(shop, rated('gus', { sessionId: 'gus-s1', responseContent: ['event', 'customerProfile'] }), { dry: true }));
    expect(dry.effects.map((e) => e.effectType)).toEqual(['couponCreated']);
    expect(dry.createdCoupons).toHaveLength(1);
    expect(dry.event).toMatchObject({ id: 0, type: 'rated', sessionId: 'gus-s1' });
    expect(dry.customerProfile).toBeNull();
    expect(await eventRows('gus')).toEqual([]);
    expect(await db().query(`SELECT 1 FROM customer_profiles WHERE integration_id = 'gus'`)).toEqual([]);
    expect(await db().query(`SELECT 1 FROM customer_sessions WHERE integration_id = 'gus-s1'`)).toEqual([]);
    expect(await db().query(`SELECT id FROM coupons`)).toHaveLength(couponsBefore);
  });

  it('answers 401 to a wrong key', async () => {
    const stranger = createIntegrationClient({ baseUrl: t.url, apiKey: 'nope', retries: 0 });
    const r = await stranger.POST('/v2/events', { body: rated('hal') as never });
    expect(r.response.status).toBe(401);
    expect(await eventRows('hal')).toEqual([]);
  });

  it("keeps one Application's sessions and events from another's key", async () => {
    unwrap(await track(shop, rated('ida', { sessionId: 'ida-s1' })));
    const read = await other.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'ida-s1' } } });
    expect(read.response.status).toBe(404);
    // The same session ID names another session in the other Application: no mismatch with shop's.
    const theirs = unwrap(await track(other, { profileId: 'jo', sessionId: 'ida-s1', type: 'visited', attributes: { page: '/x' }, responseContent: ['event'] }));
    expect(theirs.event).toMatchObject({ applicationId: other.applicationId, sessionId: 'ida-s1', profileId: 'jo' });
    const sessions = await db().query<{ application_id: number; profile_id: string }>(
      `SELECT application_id, profile_id FROM customer_sessions WHERE integration_id = 'ida-s1' ORDER BY application_id`,
    );
    expect(sessions).toEqual([
      { application_id: shop.applicationId, profile_id: 'ida' },
      { application_id: other.applicationId, profile_id: 'jo' },
    ]);
    // Shop's campaigns never ran for the other Application's event.
    expect(theirs.effects).toEqual([]);
  });

  it('replays an event sent again with the same Idempotency-Key', async () => {
    const headers = { 'Idempotency-Key': 'event-key-1' };
    const first = unwrap(await track(shop, rated('kim', { responseContent: ['event'] }), {}, headers));
    const again = unwrap(await track(shop, rated('kim', { responseContent: ['event'] }), {}, headers));
    expect(again).toEqual(first);
    expect(await eventRows('kim')).toHaveLength(1);
    const other = await track(shop, rated('kim', { responseContent: ['event'], attributes: { stars: 1 } }), {}, headers);
    expect(other.response.status).toBe(409);
    expect(other.error).toMatchObject({ StatusCode: 409, errors: [{ title: 'IdempotencyKeyReused', source: { pointer: '/headers/idempotency-key' } }] });
    expect(await eventRows('kim')).toHaveLength(1);
  });

  it("refuses a fourth event while three hold the profile's actor", async () => {
    held = new Promise((r) => (release = r));
    const calls = Array.from({ length: 3 }, () => track(shop, rated('busy-events')));
    await new Promise((r) => setTimeout(r, 100));
    const refused = await track(shop, rated('busy-events'));
    expect(refused.response.status).toBe(409);
    expect(refused.error).toMatchObject({ message: BUSY_MESSAGE, StatusCode: 409 });
    // A profile update of the same profile waits in the same actor.
    const profileUpdate = await shop.integration.PUT('/v2/customer_profiles/{integrationId}', {
      params: { path: { integrationId: 'busy-events' } },
      body: { attributes: { a: 1 } },
    });
    expect(profileUpdate.response.status).toBe(409);
    release!();
    held = undefined;
    expect((await Promise.all(calls)).map((r) => r.response.status)).toEqual([200, 200, 200]);
    expect(await eventRows('busy-events')).toHaveLength(3);
  });

  it('loses nothing under 50 parallel events and attribute updates of one profile', async () => {
    const patient = createIntegrationClient({ baseUrl: t.url, apiKey: shop.apiKey, retries: 30, baseDelayMs: 5 });
    const events = Array.from({ length: 50 }, (_, i) => patient.POST('/v2/events', { body: rated('lee', { attributes: { stars: 5, comment: `c${i}` } }) as never }));
    const updates = Array.from({ length: 20 }, (_, i) =>
      patient.PUT('/v2/customer_profiles/{integrationId}', { params: { path: { integrationId: 'lee' } }, body: { attributes: { [`k${i}`]: i } } }),
    );
    const before = await campaignStats(t.admin, shop.applicationId, shop.campaignId);
    const all = await Promise.all([...events, ...updates]);
    expect(all.map((r) => r.response.status)).toEqual(all.map(() => 200));
    const rows = await eventRows('lee');
    expect(rows).toHaveLength(50);
    expect(rows.map((r) => r.attributes.comment).sort()).toEqual(Array.from({ length: 50 }, (_, i) => `c${i}`).sort());
    expect(await db().query(`SELECT 1 FROM coupons WHERE recipient_integration_id = 'lee'`)).toHaveLength(50);
    const after = await campaignStats(t.admin, shop.applicationId, shop.campaignId);
    expect(after.couponCreationCount! - before.couponCreationCount!).toBe(50);
    const [profile] = await db().query<{ attributes: Record<string, unknown> }>(`SELECT attributes FROM customer_profiles WHERE integration_id = 'lee'`);
    expect(Object.keys(profile!.attributes).sort()).toEqual(Array.from({ length: 20 }, (_, i) => `k${i}`).sort());
  });
});

describe.skipIf(!postgresUp)('custom attributes (Management)', () => {
  let t: TestNode;
  beforeAll(async () => {
    t = await startTestNode('postgres');
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('creates and lists attributes, refusing a duplicate with 409', async () => {
    const made = unwrap(
      await t.admin.POST('/v1/attributes', {
        body: { entity: 'Event', eventType: 'signed_up', name: 'plan', type: 'string', title: 'Plan', description: 'chosen plan' },
      }),
    );
    expect(made).toMatchObject({ entity: 'Event', eventType: 'signed_up', name: 'plan', type: 'string', title: 'Plan', description: 'chosen plan', editable: true });
    expect(made.id).toBeGreaterThan(0);
    const profileAttr = unwrap(await t.admin.POST('/v1/attributes', { body: { entity: 'CustomerProfile', name: 'plan', type: 'string' } }));
    expect(profileAttr).toMatchObject({ title: 'plan' });
    expect(profileAttr.eventType).toBeUndefined();

    const duplicate = await t.admin.POST('/v1/attributes', { body: { entity: 'Event', eventType: 'signed_up', name: 'plan', type: 'number' } });
    expect(duplicate.response.status).toBe(409);
    expect(duplicate.error!.errors[0]!.source?.pointer).toBe('/name');
    // The same name for another event type is another attribute.
    unwrap(await t.admin.POST('/v1/attributes', { body: { entity: 'Event', eventType: 'logged_in', name: 'plan', type: 'string' } }));

    const all = unwrap(await t.admin.GET('/v1/attributes', {}));
    expect(all.totalResultSize).toBe(3);
    const events = unwrap(await t.admin.GET('/v1/attributes', { params: { query: { entity: 'Event', sort: '-id' } } }));
    expect(events.data.map((a) => a.eventType)).toEqual(['logged_in', 'signed_up']);
    const paged = unwrap(await t.admin.GET('/v1/attributes', { params: { query: { pageSize: 1, skip: 1 } } }));
    expect(paged).toMatchObject({ totalResultSize: 3, data: [expect.objectContaining({ id: profileAttr.id })] });
  });

  it('refuses bad attributes with a pointer', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ entity: 'Event', name: 'x', type: 'string' }, '/eventType'],
      [{ entity: 'CustomerSession', eventType: 'e', name: 'x', type: 'string' }, '/eventType'],
      [{ entity: 'Nope', name: 'x', type: 'string' }, '/entity'],
      [{ entity: 'Event', eventType: 'e', name: '1x', type: 'string' }, '/name'],
      [{ entity: 'Event', eventType: 'e', name: 'x', type: 'int' }, '/type'],
      [{ entity: 'Event', eventType: 'e', type: 'string' }, '/name'],
      [{ entity: 'Event', eventType: 'e', name: 'x', type: 'string', subscribedApplicationsIds: [999999] }, '/subscribedApplicationsIds/0'],
    ];
    for (const [body, pointer] of cases) {
      const r = await t.admin.POST('/v1/attributes', { body: body as never });
      expect(r.response.status, pointer).toBe(400);
      expect(r.error!.errors.map((e) => e.source?.pointer), pointer).toContain(pointer);
    }
    const bearerless = await fetch(`${t.url}/v1/attributes`);
    expect(bearerless.status).toBe(401);
  });
});
