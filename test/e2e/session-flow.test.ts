import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unwrap } from '../../sdk/index.js';
import { cart } from '../helpers/fixtures.js';
import { addCampaign, rule } from '../helpers/promotions.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';
import { postgresUp } from '../helpers/services.js';

const adapters = postgresUp ? (['pglite', 'postgres'] as const) : (['pglite'] as const);

describe.each(adapters)('customer session flow (%s)', (adapter) => {
  let t: TestNode;
  let shop: ShopSetup;
  beforeAll(async () => {
    t = await startTestNode(adapter);
    shop = await setupShop(t.url, t.admin);
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('gives 10% off a cart of 120 as setDiscount 12', async () => {
    const state = unwrap(
      await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'flow-1' } },
        body: { customerSession: cart([100, 20]), responseContent: ['customerSession', 'customerProfile', 'triggeredCampaigns'] },
      }),
    );
    expect(state.effects).toEqual([
      {
        campaignId: shop.campaignId,
        rulesetId: shop.rulesetId,
        ruleIndex: 0,
        ruleName: '10% off',
        effectType: 'setDiscount',
        props: { name: '10% off', value: 12 },
      },
    ]);
    expect(state.customerSession).toMatchObject({
      integrationId: 'flow-1',
      applicationId: shop.applicationId,
      profileId: 'customer-1',
      state: 'open',
      total: 120,
      cartItemTotal: 120,
      additionalCostTotal: 0,
      firstSession: true,
      updateCount: 1,
    });
    expect(state.customerSession!.cartItems.map((i) => i.position)).toEqual([0, 1]);
    expect(state.customerProfile).toMatchObject({ integrationId: 'customer-1', closedSessions: 0 });
    expect(state.triggeredCampaigns).toEqual([expect.objectContaining({ id: shop.campaignId })]);
    expect(state.createdCoupons).toEqual([]);
    expect(state.createdReferrals).toEqual([]);
  });

  it('returns only the keys that responseContent asks for', async () => {
    const state = unwrap(
      await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'flow-2' } },
        body: { customerSession: cart([50]) },
      }),
    );
    expect(Object.keys(state).sort()).toEqual(['createdCoupons', 'createdReferrals', 'effects']);
    expect(state.effects).toEqual([]);
  });

  it('builds each update on the previous one and reads the session back', async () => {
    const put = (body: Record<string, unknown>) =>
      shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'flow-3' } },
        body: { customerSession: body, responseContent: ['customerSession'] },
      });
    unwrap(await put({ profileId: 'customer-3', attributes: { channel: 'web' } }));
    const second = unwrap(await put({ cartItems: cart([80, 70]).cartItems, attributes: { gift: true } }));
    expect(second.customerSession).toMatchObject({ profileId: 'customer-3', total: 150, attributes: { channel: 'web', gift: true }, updateCount: 2 });
    expect(second.effects[0]?.props).toEqual({ name: '10% off', value: 15 });

    const read = unwrap(
      await shop.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'flow-3' } } }),
    );
    expect(read.customerSession).toEqual(second.customerSession);
    expect(read.effects).toEqual(second.effects);
  });

  it('counts a closed session on its profile and refuses to change it afterwards', async () => {
    const put = (body: Record<string, unknown>) =>
      shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'flow-4' } },
        body: { customerSession: body, responseContent: ['customerSession', 'customerProfile', 'event'] },
      });
    const closed = unwrap(await put({ ...cart([110.1, 0.2], { profileId: 'customer-4' }), state: 'closed' }));
    expect(closed.customerSession).toMatchObject({ state: 'closed', total: 110.3 });
    expect(closed.customerProfile).toMatchObject({ closedSessions: 1, totalSales: 110.3 });
    expect(closed.event).toMatchObject({ type: 'service_session_closed', sessionId: 'flow-4' });
    expect(closed.effects[0]?.props).toEqual({ name: '10% off', value: 11.03 });

    const again = await put({ attributes: { late: true } });
    expect(again.response.status).toBe(400);
    expect(again.error).toMatchObject({ StatusCode: 400, errors: [{ source: { pointer: '/customerSession/state' } }] });
    expect(again.error?.message).toContain('closed to closed');
  });

  it('persists nothing on a dry run and evaluates only the payload', async () => {
    const dry = unwrap(
      await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'flow-dry' }, query: { dry: true } },
        body: { customerSession: cart([200]), responseContent: ['customerSession'] },
      }),
    );
    expect(dry.effects[0]?.props).toEqual({ name: '10% off', value: 20 });
    const read = await shop.integration.GET('/v2/customer_sessions/{customerSessionId}', {
      params: { path: { customerSessionId: 'flow-dry' } },
    });
    expect(read.response.status).toBe(404);
    const rows = await t.node.db.query(`SELECT count(*)::int AS n FROM events WHERE session_id = 'flow-dry'`);
    expect(rows[0]).toEqual({ n: 0 });
  });

  /** A second campaign of the shop: its one rule always gives `name` 5 off. */
  const fiveOff = (s: ShopSetup, name: string, campaign: Record<string, unknown>): Promise<number> =>
    addCampaign(t.admin, s.applicationId, [rule(true, [['setDiscount', name, 5]], name)], { name, ...campaign });
  const putSession = (s: ShopSetup, id: string, customerSession: Record<string, unknown>, query: Record<string, unknown> = {}) =>
    s.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
      params: { path: { customerSessionId: id }, query: query as never },
      body: { customerSession: customerSession as never, responseContent: ['customerSession', 'customerProfile', 'event'] },
    });
  const discounts = (state: { effects: Array<{ campaignId: number; props: Record<string, unknown> }> }) =>
    state.effects.map((e) => [e.campaignId, e.props.name, e.props.value]);
  const eventTypes = async (s: ShopSetup, sessionId: string) =>
    (
      await t.node.db.query<{ type: string }>(`SELECT type FROM events WHERE application_id = $1 AND session_id = $2 ORDER BY id`, [
        s.applicationId,
        sessionId,
      ])
    ).map((r) => r.type);

  it('keeps every field of the session request and adds up item and additional costs', async () => {
    const s = await setupShop(t.url, t.admin);
    const item = {
      name: 'Boots',
      sku: 'B-1',
      quantity: 2,
      price: 10,
      category: 'shoes',
      product: { name: 'Boot' },
      weight: 900,
      height: 300,
      width: 120,
      length: 310,
      attributes: { colour: 'brown' },
      additionalCosts: { shipping: { price: 1.5 } },
    };
    const sent = {
      profileId: 'fields-1',
      storeIntegrationId: 'store-7',
      cartItems: [item, { name: 'Laces', sku: 'L-1', quantity: 1, price: 5 }],
      additionalCosts: { packaging: { price: 2.25 } },
      identifiers: ['device-1', 'device-2'],
      experimentVariantAllocations: [{ experimentID: 1, variantID: 2 }],
      attributes: { channel: 'app' },
    };
    const state = unwrap(await putSession(s, 'fields', sent));
    expect(state.customerSession).toMatchObject({
      profileId: 'fields-1',
      storeIntegrationId: 'store-7',
      identifiers: ['device-1', 'device-2'],
      additionalCosts: { packaging: { price: 2.25 } },
      attributes: { channel: 'app' },
      cartItemTotal: 25,
      additionalCostTotal: 5.25,
      total: 30.25,
      firstSession: true,
    });
    expect(state.customerSession!.cartItems).toEqual([
      { ...item, position: 0 },
      { name: 'Laces', sku: 'L-1', quantity: 1, price: 5, position: 1 },
    ]);
    const read = unwrap(await s.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'fields' } } }));
    expect(read.customerSession).toEqual(state.customerSession);
    // The profile's next session is not its first; an anonymous session always is.
    expect(unwrap(await putSession(s, 'fields-next', cart([1], { profileId: 'fields-1' }))).customerSession).toMatchObject({ firstSession: false });
    expect(unwrap(await putSession(s, 'fields-anon', cart([1], { profileId: '' }))).customerSession).toMatchObject({ profileId: '', firstSession: true });
    expect(unwrap(await putSession(s, 'fields-anon2', cart([1], { profileId: '' }))).customerSession).toMatchObject({ firstSession: true });
  });

  it('evaluates a dry run of a stored session on the payload sent alone and leaves the session as it was', async () => {
    const s = await setupShop(t.url, t.admin);
    const stored = unwrap(await putSession(s, 'dry-stored', cart([150], { profileId: 'dora', attributes: { channel: 'web' } })));
    expect(discounts(stored)).toEqual([[s.campaignId, '10% off', 15]]);
    const eventsBefore = await eventTypes(s, 'dry-stored');
    expect(eventsBefore).toEqual(['service_session_created', 'service_session_updated']);

    // Without a cart in the payload there is none: the stored one is not merged in.
    const noCart = unwrap(await putSession(s, 'dry-stored', { profileId: 'dora', attributes: { gift: true } }, { dry: true }));
    expect(noCart.effects).toEqual([]);
    expect(noCart.customerSession).toMatchObject({ total: 0, cartItems: [], attributes: { gift: true }, updateCount: 1 });
    expect(noCart.customerSession!.attributes).not.toHaveProperty('channel');
    const bigger = unwrap(await putSession(s, 'dry-stored', cart([300], { profileId: 'dora', state: 'closed' }), { dry: true }));
    expect(discounts(bigger)).toEqual([[s.campaignId, '10% off', 30]]);
    expect(bigger.customerSession).toMatchObject({ state: 'closed', total: 300 });
    expect(bigger.event).toMatchObject({ type: 'service_session_closed', sessionId: 'dry-stored' });

    const read = unwrap(await s.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'dry-stored' } } }));
    expect(read.customerSession).toMatchObject({ state: 'open', total: 150, attributes: { channel: 'web' }, updateCount: 1 });
    expect(read.effects).toEqual(stored.effects);
    expect(await eventTypes(s, 'dry-stored')).toEqual(eventsBefore);
    const [profile] = await t.node.db.query<{ closed_sessions: number }>(
      `SELECT closed_sessions FROM customer_profiles WHERE integration_id = 'dora'`,
    );
    expect(profile).toEqual({ closed_sessions: 0 });
  });

  it('evaluates a dry run at a future `now`, with the campaigns running then, and refuses a past one', async () => {
    const s = await setupShop(t.url, t.admin);
    const day = 24 * 3600 * 1000;
    const at = (days: number) => new Date(Date.now() + days * day).toISOString();
    const winter = await fiveOff(s, 'winter', { startTime: at(10), endTime: at(20) });
    const today = unwrap(await putSession(s, 'dry-now', cart([200]), { dry: true }));
    expect(discounts(today)).toEqual([[s.campaignId, '10% off', 20]]);
    const inWinter = unwrap(await putSession(s, 'dry-now', cart([200]), { dry: true, now: at(15) }));
    expect(discounts(inWinter)).toEqual([
      [s.campaignId, '10% off', 20],
      [winter, 'winter', 5],
    ]);
    const afterWinter = unwrap(await putSession(s, 'dry-now', cart([200]), { dry: true, now: at(25) }));
    expect(discounts(afterWinter)).toEqual([[s.campaignId, '10% off', 20]]);

    for (const query of [{ dry: true, now: at(-1) }, { dry: true, now: 'next tuesday' }, { now: at(15) }]) {
      const refused = await putSession(s, 'dry-now', cart([200]), query);
      expect(refused.response.status, JSON.stringify(query)).toBe(400);
      expect(refused.error).toMatchObject({ StatusCode: 400, errors: [{ source: { pointer: '/query/now' } }] });
    }
    const read = await s.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'dry-now' } } });
    expect(read.response.status).toBe(404);
  });

  it('evaluates exactly the evaluableCampaignIds of a dry run, disabled campaigns too, archived ones not', async () => {
    const s = await setupShop(t.url, t.admin);
    const paused = await fiveOff(s, 'paused', { state: 'disabled' });
    const archived = await fiveOff(s, 'gone', { state: 'disabled' });
    unwrap(
      await t.admin.PUT('/v1/applications/{applicationId}/campaigns/{campaignId}', {
        params: { path: { applicationId: s.applicationId, campaignId: archived } },
        body: { name: 'gone', state: 'archived' } as never,
      }),
    );
    const dry = async (evaluableCampaignIds?: number[]) =>
      discounts(unwrap(await putSession(s, 'dry-only', cart([200], evaluableCampaignIds ? { evaluableCampaignIds } : {}), { dry: true })));
    expect(await dry()).toEqual([[s.campaignId, '10% off', 20]]);
    expect(await dry([paused])).toEqual([[paused, 'paused', 5]]);
    expect(await dry([s.campaignId, paused])).toEqual([
      [s.campaignId, '10% off', 20],
      [paused, 'paused', 5],
    ]);
    expect(await dry([archived])).toEqual([]);
  });

  it('emits the built-in events of each step: created, updated, closed and cancelled', async () => {
    const s = await setupShop(t.url, t.admin);
    const created = unwrap(await putSession(s, 'ev-steps', cart([120], { profileId: 'eve' })));
    expect(created.event).toMatchObject({ type: 'service_session_created', sessionId: 'ev-steps', profileId: 'eve', effects: created.effects });
    const updated = unwrap(await putSession(s, 'ev-steps', { attributes: { step: 2 } }));
    expect(updated.event).toMatchObject({ type: 'service_session_updated', sessionId: 'ev-steps' });
    const closed = unwrap(await putSession(s, 'ev-steps', { state: 'closed' }));
    expect(closed.event).toMatchObject({ type: 'service_session_closed' });
    expect(closed.customerProfile).toMatchObject({ closedSessions: 1, totalSales: 120 });
    const cancelled = unwrap(await putSession(s, 'ev-steps', { state: 'cancelled' }));
    expect(cancelled.event).toMatchObject({ type: 'service_session_cancelled', sessionId: 'ev-steps' });
    expect(cancelled.customerSession).toMatchObject({ state: 'cancelled' });
    expect(await eventTypes(s, 'ev-steps')).toEqual([
      'service_session_created',
      'service_session_updated',
      'service_session_updated',
      'service_session_updated',
      'service_session_closed',
      'service_session_updated',
      'service_session_cancelled',
    ]);
    // An open session may be cancelled directly.
    unwrap(await putSession(s, 'ev-open', cart([20])));
    const dropped = unwrap(await putSession(s, 'ev-open', { state: 'cancelled' }));
    expect(dropped.event).toMatchObject({ type: 'service_session_cancelled' });
    expect(await eventTypes(s, 'ev-open')).toEqual([
      'service_session_created',
      'service_session_updated',
      'service_session_updated',
      'service_session_cancelled',
    ]);
  });

  it('refuses every transition the spec does not allow, naming it, and changes nothing', async () => {
    const s = await setupShop(t.url, t.admin);
    unwrap(await putSession(s, 'tr-closed', cart([120], { state: 'closed' })));
    unwrap(await putSession(s, 'tr-cancelled', cart([120])));
    unwrap(await putSession(s, 'tr-cancelled', { state: 'cancelled' }));
    const cases: Array<[string, string, string]> = [
      ['tr-closed', 'open', 'closed to open'],
      ['tr-closed', 'closed', 'closed to closed'],
      ['tr-closed', 'partially_returned', 'closed to partially_returned'],
      ['tr-cancelled', 'open', 'cancelled to open'],
      ['tr-cancelled', 'closed', 'cancelled to closed'],
      ['tr-cancelled', 'cancelled', 'cancelled to cancelled'],
      ['tr-new', 'partially_returned', 'open to partially_returned'],
    ];
    for (const [id, state, named] of cases) {
      const r = await putSession(s, id, { state });
      expect(r.response.status, named).toBe(400);
      expect(r.error, named).toMatchObject({ StatusCode: 400, errors: [{ title: 'InvalidSessionStateTransition', source: { pointer: '/customerSession/state' } }] });
      expect(r.error?.message, named).toContain(named);
    }
    const closed = unwrap(await s.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'tr-closed' } } }));
    expect(closed.customerSession).toMatchObject({ state: 'closed', updateCount: 1 });
    const cancelled = unwrap(await s.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'tr-cancelled' } } }));
    expect(cancelled.customerSession).toMatchObject({ state: 'cancelled', updateCount: 2 });
    expect((await s.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'tr-new' } } })).response.status).toBe(404);
  });

  it('stops evaluating a campaign once it is disabled', async () => {
    unwrap(
      await t.admin.PUT('/v1/applications/{applicationId}/campaigns/{campaignId}', {
        params: { path: { applicationId: shop.applicationId, campaignId: shop.campaignId } },
        body: { name: 'Autumn sale', state: 'disabled' },
      }),
    );
    const state = unwrap(
      await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'flow-5' } },
        body: { customerSession: cart([150]) },
      }),
    );
    expect(state.effects).toEqual([]);
    unwrap(
      await t.admin.PUT('/v1/applications/{applicationId}/campaigns/{campaignId}', {
        params: { path: { applicationId: shop.applicationId, campaignId: shop.campaignId } },
        body: { name: 'Autumn sale', state: 'enabled' },
      }),
    );
  });
});
