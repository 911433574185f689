import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresUp } from '../helpers/services.js';
import { createIntegrationClient, setupShop, startTestNode, unwrap, type ShopSetup, type TestNode } from '../helpers/node.js';
import { campaignStats, couponCounters, insertCoupon, rule } from '../helpers/promotions.js';

const perItemAndOrder = {
  rules: [
    rule(
      ['couponValid'],
      [
        ['forEach', ['.', 'Session', 'CartItems'], [['Item'], ['setDiscountPerItem', 'item10', ['*', ['.', 'Item', 'Price'], ['.', 'Item', 'Quantity'], 0.1]]]],
        ['setDiscount', 'order', 10],
      ],
    ),
  ],
  bindings: [],
  activate: true,
};

const twoLines = (customerSession: Record<string, unknown> = {}) => ({
  couponCodes: ['RET1'],
  cartItems: [
    { name: 'Shoes', sku: 'S', quantity: 1, price: 60 },
    { name: 'Socks', sku: 'K', quantity: 2, price: 20 },
  ],
  ...customerSession,
});

describe.skipIf(!postgresUp)('returns and reopen', () => {
  let t: TestNode;

  beforeAll(async () => {
    t = await startTestNode('postgres');
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  const closedShop = async (sessionId: string): Promise<{ s: ShopSetup; couponId: number }> => {
    const s = await setupShop(t.url, t.admin, { ruleset: perItemAndOrder });
    const couponId = await insertCoupon(t.node.db, s.applicationId, s.campaignId, { value: 'RET1', usageLimit: 5 });
    unwrap(await s.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: sessionId } }, body: { customerSession: twoLines({ profileId: `rita-${sessionId}` }) as never } }));
    const closed = unwrap(
      await s.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: sessionId } },
        body: { customerSession: { state: 'closed' }, responseContent: ['customerProfile'] },
      }),
    );
    expect(closed.effects.map((e) => [e.effectType, e.props.value])).toEqual([
      ['acceptCoupon', 'RET1'],
      ['setDiscountPerItem', 6],
      ['setDiscountPerItem', 4],
      ['setDiscount', 10],
    ]);
    expect(closed.customerProfile).toMatchObject({ closedSessions: 1, totalSales: 100 });
    return { s, couponId };
  };

  const returnItems = (s: ShopSetup, sessionId: string, items: unknown[], headers: Record<string, string> = {}, query: Record<string, unknown> = {}) =>
    s.integration.POST('/v2/customer_sessions/{customerSessionId}/returns', {
      params: { path: { customerSessionId: sessionId }, query: query as never },
      body: { return: { returnedCartItems: items as never }, responseContent: ['customerSession', 'customerProfile', 'return', 'previousReturns'] },
      headers,
    });

  it('rolls back the effects tied to a returned line, pro rata, and lowers the profile totals', async () => {
    const { s, couponId } = await closedShop('ret-1');
    const r = unwrap(await returnItems(s, 'ret-1', [{ position: 1 }]));
    expect(r.effects.map((e) => [e.effectType, e.props])).toEqual([
      ['rollbackDiscount', { name: 'item10', value: 4, position: 1 }],
      ['rollbackDiscount', { name: 'order', value: 4 }],
    ]);
    expect(r.customerSession).toMatchObject({ state: 'partially_returned', total: 60, cartItemTotal: 60 });
    expect(r.customerSession!.cartItems.map((i) => [i.sku, i.quantity, i.position])).toEqual([['S', 1, 0]]);
    expect(r.customerProfile).toMatchObject({ closedSessions: 1, totalSales: 60 });
    expect(r.return).toEqual({ returnedCartItems: [{ position: 1, quantity: 2 }], amount: 40 });
    expect(r.previousReturns).toEqual([]);
    // The redemption stays counted; the discount given by the coupon goes down by what came back.
    expect(await couponCounters(t.node.db, couponId)).toEqual({ usageCounter: 1, discountCounter: 12 });

    // Returning the other line later rolls back the rest; a cancel after that undoes what is left.
    const second = unwrap(await returnItems(s, 'ret-1', [{ position: 0 }]));
    expect(second.effects.map((e) => [e.effectType, e.props.value])).toEqual([
      ['rollbackDiscount', 6],
      ['rollbackDiscount', 6],
    ]);
    expect(second.previousReturns).toHaveLength(1);
    expect(second.customerProfile).toMatchObject({ totalSales: 0 });
    expect(await couponCounters(t.node.db, couponId)).toEqual({ usageCounter: 1, discountCounter: 0 });
    const cancelled = unwrap(
      await s.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'ret-1' } }, body: { customerSession: { state: 'cancelled' } } }),
    );
    expect(cancelled.effects.map((e) => e.effectType)).toEqual(['rollbackCoupon']);
    expect(await couponCounters(t.node.db, couponId)).toEqual({ usageCounter: 0, discountCounter: 0 });
  });

  it('gives back on the coupon exactly what the rollback effects return, also for per-item discounts that ignore prices', async () => {
    const flat = {
      rules: [rule(['couponValid'], [['forEach', ['.', 'Session', 'CartItems'], [['Item'], ['setDiscountPerItem', 'flat5', 5]]], ['setDiscount', 'order', 10]])],
      bindings: [],
      activate: true,
    };
    const s = await setupShop(t.url, t.admin, { ruleset: flat });
    const couponId = await insertCoupon(t.node.db, s.applicationId, s.campaignId, { value: 'RET1' });
    unwrap(await s.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'flat-1' } }, body: { customerSession: twoLines({ profileId: 'flat', state: 'closed' }) as never } }));
    expect(await couponCounters(t.node.db, couponId)).toEqual({ usageCounter: 1, discountCounter: 20 });
    const r = unwrap(await returnItems(s, 'flat-1', [{ position: 1 }]));
    expect(r.effects.map((e) => e.props.value)).toEqual([5, 4]);
    expect(await couponCounters(t.node.db, couponId)).toEqual({ usageCounter: 1, discountCounter: 11 });
  });

  it('rolls session-wide discounts back by the share of the items, not of their additional costs', async () => {
    const s = await setupShop(t.url, t.admin, { ruleset: { rules: [rule(true, [['setDiscount', 'ten', ['*', ['.', 'Session', 'CartItemTotal'], 0.1]]])], bindings: [], activate: true } });
    const withCosts = {
      profileId: 'costly',
      state: 'closed',
      cartItems: [
        { sku: 'A', quantity: 1, price: 50, additionalCosts: { shipping: { price: 100 } } },
        { sku: 'B', quantity: 1, price: 100 },
      ],
    };
    const closed = unwrap(await s.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'costs-1' } }, body: { customerSession: withCosts as never, responseContent: ['customerProfile'] } }));
    expect(closed.effects.map((e) => e.props.value)).toEqual([15]);
    expect(closed.customerProfile).toMatchObject({ totalSales: 250 });
    const r = unwrap(await returnItems(s, 'costs-1', [{ position: 0 }]));
    // A was a third of the items: a third of the discount goes back; the customer gets 150 back.
    expect(r.effects.map((e) => [e.effectType, e.props.value])).toEqual([['rollbackDiscount', 5]]);
    expect(r.return).toEqual({ returnedCartItems: [{ position: 0, quantity: 1 }], amount: 150 });
    expect(r.customerProfile).toMatchObject({ totalSales: 100 });
    expect((await campaignStats(t.admin, s.applicationId, s.campaignId)).discountCount).toBe(10);
  });

  it('evaluates again, with runRuleEngine, only the campaigns that ask for it', async () => {
    const tiers = [
      rule(['>=', ['.', 'Session', 'CartItemTotal'], 80], [['setDiscount', 'tier', 20]], 'big basket'),
      rule(['<', ['.', 'Session', 'CartItemTotal'], 80], [['setDiscount', 'tier', 5]], 'small basket'),
    ];
    const s = await setupShop(t.url, t.admin, { ruleset: { rules: tiers, bindings: [], activate: true } });
    const again = unwrap(
      await t.admin.POST('/v1/applications/{applicationId}/campaigns', {
        params: { path: { applicationId: s.applicationId } },
        body: { name: 'again', state: 'enabled', tags: ['x'], features: [], limits: [], reevaluateOnReturn: true } as never,
      }),
    );
    expect((again as { reevaluateOnReturn?: boolean }).reevaluateOnReturn).toBe(true);
    unwrap(
      await t.admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets', {
        params: { path: { applicationId: s.applicationId, campaignId: again.id } },
        body: { rules: tiers, bindings: [], activate: true } as never,
      }),
    );
    const body = { customerSession: twoLines({ profileId: 'rerun', couponCodes: [], state: 'closed' }) as never };
    const closed = unwrap(await s.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'rerun-1' } }, body }));
    expect(closed.effects.map((e) => [e.campaignId, e.props.value])).toEqual([
      [s.campaignId, 20],
      [again.id, 20],
    ]);
    const r = unwrap(await returnItems(s, 'rerun-1', [{ position: 1 }], {}, { runRuleEngine: true }));
    expect(r.effects.map((e) => [e.campaignId, e.effectType, e.props.value])).toEqual([
      [s.campaignId, 'rollbackDiscount', 8],
      [again.id, 'rollbackDiscount', 20],
      [again.id, 'setDiscount', 5],
    ]);
    expect((await campaignStats(t.admin, s.applicationId, s.campaignId)).discountCount).toBe(12);
    expect((await campaignStats(t.admin, s.applicationId, again.id)).discountCount).toBe(5);
  });

  it('replays the identical body for the same Idempotency-Key and refuses the key with another body', async () => {
    const { s } = await closedShop('ret-2');
    const first = await returnItems(s, 'ret-2', [{ position: 1, quantity: 1 }], { 'Idempotency-Key': 'k-1' });
    const again = await returnItems(s, 'ret-2', [{ position: 1, quantity: 1 }], { 'Idempotency-Key': 'k-1' });
    expect(first.response.status).toBe(200);
    expect(again.response.status).toBe(200);
    expect(again.data).toEqual(first.data);
    const [returns] = await t.node.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM session_returns WHERE session_id = 'ret-2'`);
    expect(returns!.n).toBe(1);
    const other = await returnItems(s, 'ret-2', [{ position: 1, quantity: 2 }], { 'Idempotency-Key': 'k-1' });
    expect(other.response.status).toBe(409);
    expect(other.error?.errors[0]?.source?.pointer).toBe('/headers/idempotency-key');
  });

  it('refuses returns of open sessions, unknown positions and too many units, with pointers', async () => {
    const { s } = await closedShop('ret-3');
    const cases: Array<[unknown[], string]> = [
      [[{ position: 7 }], '/return/returnedCartItems/0/position'],
      [[{ position: 1, quantity: 3 }], '/return/returnedCartItems/0/quantity'],
      [[{ position: 1 }, { position: 1 }], '/return/returnedCartItems/1/position'],
      [[{ quantity: 1 }], '/return/returnedCartItems/0/position'],
    ];
    for (const [items, pointer] of cases) {
      const r = await returnItems(s, 'ret-3', items);
      expect(r.response.status, pointer).toBe(400);
      expect(r.error?.errors[0]?.source?.pointer).toBe(pointer);
    }
    unwrap(await s.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'open-1' } }, body: { customerSession: twoLines() as never } }));
    const open = await returnItems(s, 'open-1', [{ position: 0 }]);
    expect(open.response.status).toBe(400);
    expect(open.error?.errors[0]?.title).toBe('InvalidSessionStateTransition');
    expect((await returnItems(s, 'missing', [{ position: 0 }])).response.status).toBe(404);
    const wrongKey = createIntegrationClient({ baseUrl: t.url, apiKey: 'nope', retries: 0 });
    const r = await wrongKey.POST('/v2/customer_sessions/{customerSessionId}/returns', {
      params: { path: { customerSessionId: 'ret-3' } },
      body: { return: { returnedCartItems: [{ position: 0 }] } },
    });
    expect(r.response.status).toBe(401);
    // Another Application's key does not reach this session.
    const other = await setupShop(t.url, t.admin);
    expect((await returnItems(other, 'ret-3', [{ position: 0 }])).response.status).toBe(404);
  });

  it('refuses to move a partially returned session back to open or closed, naming the transition', async () => {
    const { s } = await closedShop('ret-tr');
    unwrap(await returnItems(s, 'ret-tr', [{ position: 0 }]));
    for (const state of ['open', 'closed', 'partially_returned']) {
      const r = await s.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'ret-tr' } },
        body: { customerSession: { state } as never },
      });
      expect(r.response.status, state).toBe(400);
      expect(r.error, state).toMatchObject({ errors: [{ title: 'InvalidSessionStateTransition', source: { pointer: '/customerSession/state' } }] });
      expect(r.error?.message, state).toContain(`partially_returned to ${state}`);
    }
    const stored = unwrap(await s.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'ret-tr' } } }));
    expect(stored.customerSession).toMatchObject({ state: 'partially_returned', total: 40 });
  });

  it('changes nothing on a dry return', async () => {
    const { s, couponId } = await closedShop('ret-4');
    const r = unwrap(await returnItems(s, 'ret-4', [{ position: 0 }], {}, { dry: true }));
    expect(r.effects.map((e) => e.effectType)).toEqual(['rollbackDiscount', 'rollbackDiscount']);
    const stored = unwrap(await s.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'ret-4' } } }));
    expect(stored.customerSession.state).toBe('closed');
    expect(await couponCounters(t.node.db, couponId)).toEqual({ usageCounter: 1, discountCounter: 20 });
  });

  it('replays a reopen sent again with the same Idempotency-Key, rolling back only once', async () => {
    const { s, couponId } = await closedShop('ret-idem');
    const reopen = () =>
      s.integration.PUT('/v2/customer_sessions/{customerSessionId}/reopen', {
        params: { path: { customerSessionId: 'ret-idem' } },
        headers: { 'Idempotency-Key': 'reopen-1' },
      });
    const first = unwrap(await reopen());
    expect(first.customerSession?.state).toBe('open');
    expect(await couponCounters(t.node.db, couponId)).toEqual({ usageCounter: 0, discountCounter: 0 });
    const again = await reopen();
    expect(again.response.status).toBe(200);
    expect(again.data).toEqual(first);
    expect(await couponCounters(t.node.db, couponId)).toEqual({ usageCounter: 0, discountCounter: 0 });
    // The key belongs to this reopen: a session update under it is another request.
    const update = await s.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
      params: { path: { customerSessionId: 'ret-idem' } },
      body: { customerSession: { state: 'closed' } },
      headers: { 'Idempotency-Key': 'reopen-1' },
    });
    expect(update.response.status).toBe(409);
    expect(unwrap(await s.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'ret-idem' } } })).customerSession?.state).toBe('open');
  });

  it('reopens a closed session: committed effects are rolled back and count again on the next close', async () => {
    const { s, couponId } = await closedShop('ret-5');
    const reopened = unwrap(await s.integration.PUT('/v2/customer_sessions/{customerSessionId}/reopen', { params: { path: { customerSessionId: 'ret-5' } } }));
    expect(reopened.effects.map((e) => e.effectType)).toEqual(['rollbackCoupon', 'rollbackDiscount', 'rollbackDiscount', 'rollbackDiscount']);
    expect(reopened.customerSession?.state).toBe('open');
    expect(await couponCounters(t.node.db, couponId)).toEqual({ usageCounter: 0, discountCounter: 0 });
    const again = unwrap(
      await s.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'ret-5' } },
        body: { customerSession: { state: 'closed' }, responseContent: ['customerProfile'] },
      }),
    );
    expect(again.customerProfile).toMatchObject({ closedSessions: 1, totalSales: 100 });
    expect(await couponCounters(t.node.db, couponId)).toEqual({ usageCounter: 1, discountCounter: 20 });
    const notClosed = await s.integration.PUT('/v2/customer_sessions/{customerSessionId}/reopen', { params: { path: { customerSessionId: 'nope' } } });
    expect(notClosed.response.status).toBe(404);
    expect(notClosed.error?.errors[0]?.source?.pointer).toBe('/path/customerSessionId');
    // An open session cannot be reopened.
    unwrap(await s.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'still-open' } }, body: { customerSession: twoLines() as never } }));
    const open = await s.integration.PUT('/v2/customer_sessions/{customerSessionId}/reopen', { params: { path: { customerSessionId: 'still-open' } } });
    expect(open.response.status).toBe(400);
    expect(open.error?.errors[0]).toMatchObject({ title: 'InvalidSessionStateTransition', source: { pointer: '/path/customerSessionId' } });
    // A wrong key, and another Application's key, do not reach it.
    const wrong = createIntegrationClient({ baseUrl: t.url, apiKey: 'nope', retries: 0 });
    expect((await wrong.PUT('/v2/customer_sessions/{customerSessionId}/reopen', { params: { path: { customerSessionId: 'ret-5' } } })).response.status).toBe(401);
    const other = await setupShop(t.url, t.admin);
    expect((await other.integration.PUT('/v2/customer_sessions/{customerSessionId}/reopen', { params: { path: { customerSessionId: 'ret-5' } } })).response.status).toBe(404);
  });
});
