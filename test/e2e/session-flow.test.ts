import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unwrap } from '../../sdk/index.js';
import { cart } from '../helpers/fixtures.js';
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
