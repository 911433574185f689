import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManagementClient, unwrap, type ManagementClient } from '../../sdk/index.js';
import { cart } from '../helpers/fixtures.js';
import { otherAccountAdmin, policyUser } from '../helpers/management-users.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';

type Err = { StatusCode: number; errors: Array<{ source?: { pointer?: string } }> } | undefined;
const pointers = (e: Err) => (e?.errors ?? []).map((x) => x.source?.pointer);
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('Management API: sessions view', () => {
  let t: TestNode;
  let shop: ShopSetup;
  let other: ShopSetup;
  let stranger: ManagementClient;
  let anonymous: ManagementClient;
  /** Session integration ID → numeric id. */
  const ids: Record<string, number> = {};
  let between: string;

  const put = async (s: ShopSetup, id: string, customerSession: Record<string, unknown>) => {
    const state = unwrap(
      await s.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: id } },
        body: { customerSession, responseContent: ['customerSession'] } as never,
      }),
    );
    ids[id] = state.customerSession!.id;
    return state;
  };
  const list = (client: ManagementClient, applicationId: number, query: Record<string, unknown> = {}) =>
    client.GET('/v1/applications/{applicationId}/sessions', { params: { path: { applicationId }, query: query as never } });
  const one = (client: ManagementClient, applicationId: number, sessionId: number) =>
    client.GET('/v1/applications/{applicationId}/sessions/{sessionId}', { params: { path: { applicationId, sessionId } } });

  beforeAll(async () => {
    t = await startTestNode('pglite');
    shop = await setupShop(t.url, t.admin);
    other = await setupShop(t.url, t.admin);
    stranger = await otherAccountAdmin(t);
    anonymous = createManagementClient({ baseUrl: t.url, retries: 0 });
    // v-open: 10% off 150, open; v-closed: closed with its discount committed; then, later,
    // v-cancelled and an anonymous one.
    await put(shop, 'v-open', cart([100, 50], { profileId: 'ann', attributes: { channel: 'web' } }));
    await put(shop, 'v-closed', cart([200], { profileId: 'bob' }));
    await put(shop, 'v-closed', { state: 'closed' });
    await pause(20);
    between = new Date().toISOString();
    await pause(20);
    await put(shop, 'v-cancelled', cart([20], { profileId: 'ann' }));
    await put(shop, 'v-cancelled', { state: 'cancelled' });
    await put(shop, 'v-anon', { cartItems: [{ sku: 'X', quantity: 3, price: 1.1 }] });
    await put(other, 'v-elsewhere', cart([300], { profileId: 'ann' }));
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('shows one session as the Integration API does, with its effects and what its close committed', async () => {
    const got = unwrap(await one(t.admin, shop.applicationId, ids['v-closed']!));
    const v2 = unwrap(await shop.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'v-closed' } } }));
    const { effects, committedEffects, closedAt, ...session } = got;
    expect(session).toEqual(v2.customerSession);
    expect(session).toMatchObject({ id: ids['v-closed'], integrationId: 'v-closed', profileId: 'bob', state: 'closed', total: 200, updateCount: 2 });
    expect(effects).toEqual(v2.effects);
    const discount = { campaignId: shop.campaignId, rulesetId: shop.rulesetId, ruleIndex: 0, ruleName: '10% off', effectType: 'setDiscount', props: { name: '10% off', value: 20 } };
    expect(effects).toEqual([discount]);
    expect(committedEffects).toEqual([discount]);
    expect(Date.parse(closedAt!)).toBeGreaterThanOrEqual(Date.parse(session.created));

    const open = unwrap(await one(t.admin, shop.applicationId, ids['v-open']!));
    expect(open).toMatchObject({ state: 'open', total: 150, attributes: { channel: 'web' }, committedEffects: [] });
    expect(open.effects).toEqual([{ ...discount, props: { name: '10% off', value: 15 } }]);
    expect(open.cartItems.map((i) => i.sku)).toEqual(['SKU-0', 'SKU-1']);
    expect(open.closedAt).toBeUndefined();
  });

  it('lists the sessions of an Application with filters, sorting and paging', async () => {
    const all = unwrap(await list(t.admin, shop.applicationId));
    expect(all.totalResultSize).toBe(4);
    expect(all.data.map((s) => s.integrationId)).toEqual(['v-open', 'v-closed', 'v-cancelled', 'v-anon']);
    // The list leaves out effects, and shows the same session as the single view.
    const listed = all.data[1]!;
    expect(listed).not.toHaveProperty('effects');
    const { effects: _e, committedEffects: _c, ...single } = unwrap(await one(t.admin, shop.applicationId, ids['v-closed']!));
    expect(listed).toEqual(single);

    const names = async (query: Record<string, unknown>) => {
      const r = unwrap(await list(t.admin, shop.applicationId, query));
      return { names: r.data.map((s) => s.integrationId), total: r.totalResultSize };
    };
    expect(await names({ profile: 'ann' })).toEqual({ names: ['v-open', 'v-cancelled'], total: 2 });
    expect(await names({ state: 'closed' })).toEqual({ names: ['v-closed'], total: 1 });
    expect(await names({ state: 'cancelled', profile: 'ann' })).toEqual({ names: ['v-cancelled'], total: 1 });
    expect(await names({ integrationId: 'v-anon' })).toEqual({ names: ['v-anon'], total: 1 });
    expect(await names({ integrationId: 'v-elsewhere' })).toEqual({ names: [], total: 0 });
    expect(await names({ createdBefore: between })).toEqual({ names: ['v-open', 'v-closed'], total: 2 });
    expect(await names({ createdAfter: between })).toEqual({ names: ['v-cancelled', 'v-anon'], total: 2 });
    expect(await names({ sort: '-created', pageSize: 3 })).toEqual({ names: ['v-anon', 'v-cancelled', 'v-closed'], total: 4 });
    expect(await names({ sort: '-created', pageSize: 3, skip: 3 })).toEqual({ names: ['v-open'], total: 4 });
    // The anonymous session was both created and updated last.
    expect((await names({ sort: '-updated', pageSize: 1 })).names).toEqual(['v-anon']);
    expect((await names({ sort: 'id' })).names).toEqual(['v-open', 'v-closed', 'v-cancelled', 'v-anon']);
  });

  it('refuses bad filters, sorts and ids with pointers', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ state: 'paid' }, '/query/state'],
      [{ createdBefore: 'yesterday' }, '/query/createdBefore'],
      [{ createdAfter: '2026-13-01T00:00:00Z' }, '/query/createdAfter'],
      [{ sort: 'total' }, '/query/sort'],
      [{ pageSize: 1001 }, '/query/pageSize'],
      [{ profile: '' }, '/query/profile'],
    ];
    for (const [query, pointer] of cases) {
      const r = await list(t.admin, shop.applicationId, query);
      expect(r.response.status, JSON.stringify(query)).toBe(400);
      expect(r.error?.StatusCode).toBe(400);
      expect(pointers(r.error)).toContain(pointer);
    }
    const badId = await fetch(`${t.url}/v1/applications/${shop.applicationId}/sessions/v-open`, { headers: { Authorization: `Bearer ${t.adminToken}` } });
    expect(badId.status).toBe(400);
    expect(pointers((await badId.json()) as Err)).toContain('/path/sessionId');
  });

  it('refuses calls without a token', async () => {
    for (const r of [await list(anonymous, shop.applicationId), await one(anonymous, shop.applicationId, ids['v-open']!)]) {
      expect(r.response.status).toBe(401);
      expect(r.error?.StatusCode).toBe(401);
      expect(JSON.stringify(r.error)).not.toContain('v-open');
    }
  });

  it("never shows another Application's or another account's sessions", async () => {
    // A session of another Application, asked for through this one, is not found.
    const elsewhere = await one(t.admin, shop.applicationId, ids['v-elsewhere']!);
    expect(elsewhere.response.status).toBe(404);
    expect(JSON.stringify(elsewhere.error)).not.toContain('v-elsewhere');
    expect(unwrap(await one(t.admin, other.applicationId, ids['v-elsewhere']!)).integrationId).toBe('v-elsewhere');
    expect((await one(t.admin, shop.applicationId, 99_999_999)).response.status).toBe(404);

    for (const r of [await list(stranger, shop.applicationId), await one(stranger, shop.applicationId, ids['v-open']!)]) {
      expect(r.response.status).toBe(404);
      expect(JSON.stringify(r.error)).not.toContain('v-open');
    }

    // A user sees the sessions of the Applications its policy names, read access being enough.
    const reader = await policyUser(t, { applications: { [String(other.applicationId)]: 'read' } });
    expect((await list(reader, shop.applicationId)).response.status).toBe(404);
    expect((await one(reader, shop.applicationId, ids['v-open']!)).response.status).toBe(404);
    expect(unwrap(await list(reader, other.applicationId)).data.map((s) => s.integrationId)).toEqual(['v-elsewhere']);
  });
});
