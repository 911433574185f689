import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIntegrationClient, unwrap, type ManagementClient } from '../../sdk/index.js';
import { anonymousClient, otherAccount, userWithPolicy, adminAccountId } from '../helpers/management-users.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';
import type { AdapterName } from '../helpers/db.js';
import { postgresUp } from '../helpers/services.js';

type Client = ShopSetup['integration'];
type Action = { type: string; payload: Record<string, unknown> };

const sync = (c: Client, catalogId: number, version: number, actions: Action[]) =>
  c.PUT('/v1/catalogs/{catalogId}/sync', { params: { path: { catalogId } }, body: { version, actions } as never });
const createCatalog = (m: ManagementClient, body: Record<string, unknown>) => m.POST('/v1/catalogs', { body: body as never });
const pointerOf = (r: { error?: unknown }) => (r.error as { errors: Array<{ source?: { pointer?: string } }> }).errors[0]!.source?.pointer;
const best = (c: Client, body: Record<string, unknown>) => c.POST('/v1/best_prior_price', { body: body as never });

describe('catalogs', () => {
  let t: TestNode;
  let shop: ShopSetup;
  let sibling: ShopSetup;
  let stranger: ShopSetup;
  let strangerAdmin: ManagementClient;

  beforeAll(async () => {
    t = await startTestNode('pglite');
    shop = await setupShop(t.url, t.admin);
    sibling = await setupShop(t.url, t.admin);
    const other = await otherAccount(t.node.db, t.url, 'catalog-stranger@test.local');
    strangerAdmin = other.client;
    stranger = await setupShop(t.url, other.client);
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  const items = async (catalogId: number) =>
    (await t.node.db.query<{ sku: string; price: string | null; attributes: Record<string, unknown>; product: unknown }>(
      `SELECT sku, price::text AS price, attributes, product FROM catalog_items WHERE catalog_id = $1 ORDER BY sku`,
      [catalogId],
    )).map((r) => ({ ...r, price: r.price === null ? null : Number(r.price) }));
  const skus = async (catalogId: number) => (await items(catalogId)).map((i) => i.sku);

  it('creates, lists, gets, updates and deletes catalogs with subscribed Applications', async () => {
    const r = await createCatalog(t.admin, { name: 'Main', description: 'all products', subscribedApplicationsIds: [shop.applicationId] });
    expect(r.response.status).toBe(201);
    const c = unwrap(r);
    expect(c).toMatchObject({ name: 'Main', description: 'all products', subscribedApplicationsIds: [shop.applicationId], version: 0 });
    expect(c.accountId).toBe(await adminAccountId(t.node.db));
    expect(c.createdBy).toBeGreaterThan(0);
    expect(Date.parse(c.created)).not.toBeNaN();

    const got = unwrap(await t.admin.GET('/v1/catalogs/{catalogId}', { params: { path: { catalogId: c.id } } }));
    expect(got).toEqual(c);
    const list = unwrap(await t.admin.GET('/v1/catalogs', { params: { query: { sort: '-id' } } }));
    expect(list.data.map((x) => x.id)).toContain(c.id);

    const upd = unwrap(
      await t.admin.PUT('/v1/catalogs/{catalogId}', {
        params: { path: { catalogId: c.id } },
        body: { name: 'Main 2', subscribedApplicationsIds: [sibling.applicationId, shop.applicationId] },
      }),
    );
    expect(upd).toMatchObject({ id: c.id, name: 'Main 2', description: '', subscribedApplicationsIds: [shop.applicationId, sibling.applicationId].sort((a, b) => a - b) });

    // Another account sees nothing of it, and cannot subscribe its Applications to it.
    expect((await strangerAdmin.GET('/v1/catalogs/{catalogId}', { params: { path: { catalogId: c.id } } })).response.status).toBe(404);
    expect((await strangerAdmin.DELETE('/v1/catalogs/{catalogId}', { params: { path: { catalogId: c.id } } })).response.status).toBe(404);
    expect(unwrap(await strangerAdmin.GET('/v1/catalogs', {})).data.map((x) => x.id)).not.toContain(c.id);
    const foreignApp = await createCatalog(t.admin, { name: 'x', subscribedApplicationsIds: [stranger.applicationId] });
    expect(foreignApp.response.status).toBe(404);
    expect(pointerOf(foreignApp)).toBe('/subscribedApplicationsIds/0');

    const del = await t.admin.DELETE('/v1/catalogs/{catalogId}', { params: { path: { catalogId: c.id } } });
    expect(del.response.status).toBe(204);
    expect((await t.admin.GET('/v1/catalogs/{catalogId}', { params: { path: { catalogId: c.id } } })).response.status).toBe(404);
  });

  it('refuses bad input (400 with a pointer), absent credentials (401) and non-admin writes (403)', async () => {
    const cases: Array<[Promise<{ response: Response; error?: unknown }>, string]> = [
      [createCatalog(t.admin, {}), '/name'],
      [createCatalog(t.admin, { name: '' }), '/name'],
      [createCatalog(t.admin, { name: 'x', subscribedApplicationsIds: ['a'] }), '/subscribedApplicationsIds/0'],
      [createCatalog(t.admin, { name: 'x', subscribedApplicationsIds: [shop.applicationId, shop.applicationId] }), '/subscribedApplicationsIds/1'],
      [t.admin.GET('/v1/catalogs/{catalogId}', { params: { path: { catalogId: 'abc' as never } } }), '/path/catalogId'],
    ];
    for (const [p, pointer] of cases) {
      const r = await p;
      expect(r.response.status).toBe(400);
      expect(pointerOf(r)).toBe(pointer);
    }
    expect((await anonymousClient(t.url).GET('/v1/catalogs', {})).response.status).toBe(401);
    expect((await anonymousClient(t.url).POST('/v1/catalogs', { body: { name: 'x' } })).response.status).toBe(401);
    const reader = await userWithPolicy(t.node.db, t.url, await adminAccountId(t.node.db), 'catalog-reader@test.local', {
      applications: { [String(shop.applicationId)]: 'write' },
    });
    expect((await createCatalog(reader, { name: 'nope' })).response.status).toBe(403);
    const c = unwrap(await createCatalog(t.admin, { name: 'Seen', subscribedApplicationsIds: [shop.applicationId, sibling.applicationId] }));
    const hidden = unwrap(await createCatalog(t.admin, { name: 'Hidden', subscribedApplicationsIds: [sibling.applicationId] }));
    // A non-admin sees the catalogs of its Applications, naming only those.
    expect(unwrap(await reader.GET('/v1/catalogs/{catalogId}', { params: { path: { catalogId: c.id } } })).subscribedApplicationsIds).toEqual([shop.applicationId]);
    expect((await reader.GET('/v1/catalogs/{catalogId}', { params: { path: { catalogId: hidden.id } } })).response.status).toBe(404);
    expect((await reader.DELETE('/v1/catalogs/{catalogId}', { params: { path: { catalogId: c.id } } })).response.status).toBe(403);
  });

  it('syncs 1,000 items, then PATCH_MANY and REMOVE_MANY with each filter operator', async () => {
    const c = unwrap(await createCatalog(t.admin, { name: 'Big', subscribedApplicationsIds: [shop.applicationId] }));
    const adds: Action[] = Array.from({ length: 1000 }, (_, i) => ({
      type: 'ADD',
      payload: { sku: `sku-${String(i).padStart(4, '0')}`, price: 10 + (i % 10), attributes: { n: i, color: ['red', 'green', 'blue'][i % 3], tag: `t${i}` }, product: { name: `P${i % 5}` } },
    }));
    const r = await sync(shop.integration, c.id, 1, adds);
    expect(r.response.status).toBe(200);
    expect(unwrap(r)).toMatchObject({ id: c.id, version: 1, subscribedApplicationsIds: [shop.applicationId] });
    const all = await items(c.id);
    expect(all).toHaveLength(1000);
    expect(all[7]).toEqual({ sku: 'sku-0007', price: 17, attributes: { n: 7, color: 'green', tag: 't7' }, product: { name: 'P2' } });
    const [{ n: records }] = await t.node.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM price_records WHERE catalog_id = $1`, [c.id]) as [{ n: number }];
    expect(records).toBe(1000);

    let v = 1;
    const patch = async (filters: unknown[], attributes: Record<string, unknown>) =>
      unwrap(await sync(shop.integration, c.id, ++v, [{ type: 'PATCH_MANY', payload: { filters, attributes } }]));
    const flagged = async (flag: string) => (await items(c.id)).filter((i) => i.attributes[flag] === true).map((i) => i.attributes.n as number);
    await patch([{ attr: 'n', op: 'LT', value: 3 }], { lt: true });
    expect(await flagged('lt')).toEqual([0, 1, 2]);
    await patch([{ attr: 'n', op: 'LE', value: 3 }], { le: true });
    expect(await flagged('le')).toEqual([0, 1, 2, 3]);
    await patch([{ attr: 'n', op: 'GT', value: 996 }], { gt: true });
    expect(await flagged('gt')).toEqual([997, 998, 999]);
    await patch([{ attr: 'n', op: 'GE', value: 996 }], { ge: true });
    expect(await flagged('ge')).toEqual([996, 997, 998, 999]);
    await patch([{ attr: 'tag', op: 'EQ', value: 't500' }], { eq: true });
    expect(await flagged('eq')).toEqual([500]);
    await patch([{ attr: 'tag', op: 'IN', value: 't10, t20,t30' }], { in: true });
    expect(await flagged('in')).toEqual([10, 20, 30]);
    // Filters combine with AND; a text attribute never matches an ordering operator.
    await patch([{ attr: 'color', op: 'EQ', value: 'red' }, { attr: 'n', op: 'LT', value: 10 }], { both: true });
    expect(await flagged('both')).toEqual([0, 3, 6, 9]);
    await patch([{ attr: 'color', op: 'LT', value: 5 }], { never: true });
    expect(await flagged('never')).toEqual([]);
    // PATCH_MANY merges: the other attributes stay.
    expect((await items(c.id))[0]!.attributes).toMatchObject({ n: 0, color: 'red', tag: 't0', lt: true, le: true, both: true });

    const remove = async (filters: unknown[]) => unwrap(await sync(shop.integration, c.id, ++v, [{ type: 'REMOVE_MANY', payload: { filters } }]));
    await remove([{ attr: 'n', op: 'LT', value: 2 }]);
    await remove([{ attr: 'n', op: 'LE', value: 3 }]);
    await remove([{ attr: 'n', op: 'GT', value: 998 }]);
    await remove([{ attr: 'n', op: 'GE', value: 997 }]);
    await remove([{ attr: 'tag', op: 'EQ', value: 't500' }]);
    await remove([{ attr: 'tag', op: 'IN', value: 't10,t20' }]);
    const left = (await items(c.id)).map((i) => i.attributes.n as number);
    expect(left).toHaveLength(1000 - 4 - 3 - 1 - 2);
    for (const gone of [0, 1, 2, 3, 997, 998, 999, 500, 10, 20]) expect(left).not.toContain(gone);
    expect(left).toContain(30);
    expect(left).toContain(996);
    const after = unwrap(await t.admin.GET('/v1/catalogs/{catalogId}', { params: { path: { catalogId: c.id } } }));
    expect(after.version).toBe(v);
  }, 30_000);

  it('applies ADD, PATCH and REMOVE with their flags, and checks the version', async () => {
    const c = unwrap(await createCatalog(t.admin, { name: 'Small', subscribedApplicationsIds: [shop.applicationId] }));
    unwrap(await sync(shop.integration, c.id, 5, [{ type: 'ADD', payload: { sku: 'a', price: 10, attributes: { size: 1 } } }, { type: 'ADD', payload: { sku: 'b', price: 20 } }]));
    // An existing SKU needs replaceIfExists (409, nothing applied).
    const dup = await sync(shop.integration, c.id, 6, [{ type: 'ADD', payload: { sku: 'c', price: 1 } }, { type: 'ADD', payload: { sku: 'a', price: 11 } }]);
    expect(dup.response.status).toBe(409);
    expect(pointerOf(dup)).toBe('/actions/1/payload/sku');
    expect(await skus(c.id)).toEqual(['a', 'b']);
    unwrap(await sync(shop.integration, c.id, 6, [{ type: 'ADD', payload: { sku: 'a', price: 11, replaceIfExists: true } }]));
    expect((await items(c.id))[0]).toMatchObject({ sku: 'a', price: 11, attributes: {} });
    // PATCH merges attributes; a missing SKU needs createIfNotExists (404).
    const missing = await sync(shop.integration, c.id, 7, [{ type: 'PATCH', payload: { sku: 'zz', attributes: { x: 1 } } }]);
    expect(missing.response.status).toBe(404);
    expect(pointerOf(missing)).toBe('/actions/0/payload/sku');
    unwrap(await sync(shop.integration, c.id, 7, [{ type: 'PATCH', payload: { sku: 'b', attributes: { x: 1 }, product: { name: 'B' } } }, { type: 'PATCH', payload: { sku: 'zz', attributes: { y: 2 }, createIfNotExists: true } }]));
    expect(await items(c.id)).toEqual([
      { sku: 'a', price: 11, attributes: {}, product: null },
      { sku: 'b', price: 20, attributes: { x: 1 }, product: { name: 'B' } },
      { sku: 'zz', price: null, attributes: { y: 2 }, product: null },
    ]);
    unwrap(await sync(shop.integration, c.id, 8, [{ type: 'REMOVE', payload: { sku: 'a' } }, { type: 'REMOVE', payload: { sku: 'not-there' } }]));
    expect(await skus(c.id)).toEqual(['b', 'zz']);
    // The version must grow: the same or a lower one is a 409 and changes nothing.
    for (const version of [8, 3]) {
      const stale = await sync(shop.integration, c.id, version, [{ type: 'REMOVE', payload: { sku: 'b' } }]);
      expect(stale.response.status).toBe(409);
      expect(pointerOf(stale)).toBe('/version');
    }
    expect(await skus(c.id)).toEqual(['b', 'zz']);
    expect(unwrap(await t.admin.GET('/v1/catalogs/{catalogId}', { params: { path: { catalogId: c.id } } })).version).toBe(8);
  });

  it('refuses bad syncs with 400 and a pointer, wrong keys with 401, unsubscribed and foreign catalogs with 404', async () => {
    const c = unwrap(await createCatalog(t.admin, { name: 'Strict', subscribedApplicationsIds: [shop.applicationId] }));
    const cases: Array<[unknown, string]> = [
      [{ version: 1, actions: [{ type: 'ADD', payload: { sku: 'a', price: 1 } }, { type: 'ADD', payload: { sku: 'a', price: 2 } }] }, '/actions/1/payload/sku'],
      [{ version: 1, actions: [{ type: 'ADD', payload: { sku: 'a', price: 1 } }, { type: 'REMOVE', payload: { sku: 'b' } }] }, '/actions/1/type'],
      [{ version: 0, actions: [{ type: 'REMOVE', payload: { sku: 'a' } }] }, '/version'],
      [{ actions: [{ type: 'REMOVE', payload: { sku: 'a' } }] }, '/version'],
      [{ version: 1, actions: [] }, '/actions'],
      [{ version: 1, actions: Array.from({ length: 1001 }, (_, i) => ({ type: 'REMOVE', payload: { sku: `s${i}` } })) }, '/actions'],
      [{ version: 1, actions: [{ type: 'MOVE', payload: { sku: 'a' } }] }, '/actions/0/type'],
      [{ version: 1, actions: [{ type: 'REMOVE', payload: {} }] }, '/actions/0/payload/sku'],
      [{ version: 1, actions: [{ type: 'REMOVE_MANY', payload: { filters: [{ attr: 'n', op: 'GT', value: 'ten' }] } }] }, '/actions/0/payload/filters/0/value'],
      [{ version: 1, actions: [{ type: 'REMOVE_MANY', payload: { filters: [{ attr: 'n', op: 'IN', value: 3 }] } }] }, '/actions/0/payload/filters/0/value'],
      [{ version: 1, actions: [{ type: 'REMOVE_MANY', payload: { filters: [{ attr: 'n', op: 'NE', value: 3 }] } }] }, '/actions/0/payload/filters/0/op'],
      [{ version: 1, actions: [{ type: 'REMOVE_MANY', payload: {} }] }, '/actions/0/payload/filters'],
      [{ version: 1, actions: [{ type: 'PATCH_MANY', payload: { filters: [{ attr: 'n', op: 'EQ', value: 1 }] } }] }, '/actions/0/payload/attributes'],
      [{ version: 1, actions: [{ type: 'ADD', payload: { sku: 'a', price: 'cheap' } }] }, '/actions/0/payload/price'],
    ];
    for (const [body, pointer] of cases) {
      const r = await shop.integration.PUT('/v1/catalogs/{catalogId}/sync', { params: { path: { catalogId: c.id } }, body: body as never });
      expect(r.response.status, JSON.stringify(body).slice(0, 200)).toBe(400);
      expect(pointerOf(r)).toBe(pointer);
    }
    // A price past what JSON numbers hold (1e400 reads as Infinity) is refused, not stored.
    const huge = await fetch(`${t.url}/v1/catalogs/${c.id}/sync`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', authorization: `ApiKey-v1 ${shop.apiKey}` },
      body: '{"version":1,"actions":[{"type":"ADD","payload":{"sku":"a","price":1e400}}]}',
    });
    expect(huge.status).toBe(400);
    expect(((await huge.json()) as { errors: Array<{ source: { pointer: string } }> }).errors[0]!.source.pointer).toBe('/actions/0/payload/price');
    expect(await skus(c.id)).toEqual([]);
    const bad = createIntegrationClient({ baseUrl: t.url, apiKey: 'nope', retries: 0 });
    expect((await sync(bad, c.id, 1, [{ type: 'REMOVE', payload: { sku: 'a' } }])).response.status).toBe(401);
    const none = await fetch(`${t.url}/v1/catalogs/${c.id}/sync`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(none.status).toBe(401);
    // Not subscribed (another Application of the account) and another account: 404, nothing applied.
    for (const client of [sibling.integration, stranger.integration]) {
      const r = await sync(client, c.id, 1, [{ type: 'ADD', payload: { sku: 'x', price: 1 } }]);
      expect(r.response.status).toBe(404);
      expect(pointerOf(r)).toBe('/catalogId');
    }
    expect((await sync(shop.integration, 999_999, 1, [{ type: 'REMOVE', payload: { sku: 'a' } }])).response.status).toBe(404);
    expect(await skus(c.id)).toEqual([]);
  });

  it('answers the best prior price over 30 days with each end-date type, and the price history', async () => {
    const c = unwrap(await createCatalog(t.admin, { name: 'Prices', subscribedApplicationsIds: [shop.applicationId] }));
    const accountId = await adminAccountId(t.node.db);
    const day = 86_400_000;
    const end = Date.parse('2026-06-30T12:00:00.000Z');
    const at = (daysBefore: number) => new Date(end - daysBefore * day).toISOString();
    // sku-1: 100 (40 days before) → 80 (25) → 90 (20) → 70 (10, a sale) → 75 (5, a rise).
    const history: Array<[string, number, number]> = [
      ['sku-1', 100, 40], ['sku-1', 80, 25], ['sku-1', 90, 20], ['sku-1', 70, 10], ['sku-1', 75, 5],
      ['sku-2', 50, 3],
    ];
    for (const [sku, price, daysBefore] of history) {
      await t.node.db.query(`INSERT INTO price_records (account_id, catalog_id, sku, price, observed_at, context_id) VALUES ($1, $2, $3, $4, $5, 'seed')`, [accountId, c.id, sku, price, at(daysBefore)]);
    }
    // A record of a catalog the Application does not subscribe to, and of another account: never seen.
    const hidden = unwrap(await createCatalog(t.admin, { name: 'Hidden prices', subscribedApplicationsIds: [sibling.applicationId] }));
    await t.node.db.query(`INSERT INTO price_records (account_id, catalog_id, sku, price, observed_at, context_id) VALUES ($1, $2, 'sku-1', 1, $3, 'hidden')`, [accountId, hidden.id, at(15)]);
    const ask = async (extra: Record<string, unknown>, skus = ['sku-1']) =>
      unwrap(await best(shop.integration, { skus, timeframeEndDate: new Date(end).toISOString(), timeframe: '30', strictEndDate: true, ...extra }));

    // strict: [end - 30d, end] holds 80, 90, 70, 75 → 70.
    const strict = await ask({ timeframeEndDateType: 'strict' }, ['sku-1', 'sku-2', 'unknown']);
    expect(strict.map((r) => [r.sku, r.price, r.observedAt])).toEqual([['sku-1', 70, at(10)], ['sku-2', 50, at(3)]]);
    expect(strict[0]).toMatchObject({ contextId: 'seed', target: { type: 'everyone' } });
    // price: ends at the last change (75, 5 days before), [35d, 5d) holds 80, 90, 70 → 70.
    expect((await ask({ timeframeEndDateType: 'price' })).map((r) => [r.price, r.observedAt])).toEqual([[70, at(10)]]);
    // sale: ends at the last reduction (70, 10 days before), [40d, 10d) holds 100, 80, 90 → 80.
    expect((await ask({ timeframeEndDateType: 'sale' })).map((r) => [r.price, r.observedAt])).toEqual([[80, at(25)]]);
    // The deprecated strictEndDate decides without timeframeEndDateType: true strict, false price.
    expect((await ask({ strictEndDate: true })).map((r) => r.price)).toEqual([70]);
    expect((await ask({ strictEndDate: false, timeframe: '6' })).map((r) => r.price)).toEqual([70]);
    // A shorter strict window: [end - 6d, end] holds only 75.
    expect((await ask({ timeframeEndDateType: 'strict', timeframe: '6' })).map((r) => r.price)).toEqual([75]);
    // An audience target: no audience prices are recorded.
    expect(await ask({ target: { targetType: 'audience', audienceID: 1 } })).toEqual([]);

    for (const [body, pointer] of [
      [{ timeframeEndDate: new Date(end).toISOString(), timeframe: '30', strictEndDate: true }, '/skus'],
      [{ skus: [], timeframeEndDate: new Date(end).toISOString(), timeframe: '30', strictEndDate: true }, '/skus'],
      [{ skus: ['a'], timeframeEndDate: 'soon', timeframe: '30', strictEndDate: true }, '/timeframeEndDate'],
      [{ skus: ['a'], timeframeEndDate: new Date(end).toISOString(), timeframe: 'month', strictEndDate: true }, '/timeframe'],
      [{ skus: ['a'], timeframeEndDate: new Date(end).toISOString(), timeframe: '30', strictEndDate: true, timeframeEndDateType: 'later' }, '/timeframeEndDateType'],
    ] as Array<[Record<string, unknown>, string]>) {
      const r = await best(shop.integration, body);
      expect(r.response.status).toBe(400);
      expect(pointerOf(r)).toBe(pointer);
    }
    expect((await best(createIntegrationClient({ baseUrl: t.url, apiKey: 'nope', retries: 0 }), { skus: ['sku-1'], timeframeEndDate: new Date(end).toISOString(), timeframe: '30', strictEndDate: true })).response.status).toBe(401);
    // Another account's key sees none of these prices.
    expect(unwrap(await best(stranger.integration, { skus: ['sku-1'], timeframeEndDate: new Date(end).toISOString(), timeframe: '30', strictEndDate: true }))).toEqual([]);

    const h = unwrap(
      await t.admin.POST('/v1/applications/{applicationId}/price_history', {
        params: { path: { applicationId: shop.applicationId } },
        body: { sku: 'sku-1', startDate: at(30), endDate: new Date(end).toISOString() },
      }),
    );
    expect(h.sku).toBe('sku-1');
    expect(h.history.map((r) => [r.price, r.observedAt])).toEqual([[80, at(25)], [90, at(20)], [70, at(10)], [75, at(5)]]);
    const badHistory = await t.admin.POST('/v1/applications/{applicationId}/price_history', {
      params: { path: { applicationId: shop.applicationId } },
      body: { sku: 'sku-1', startDate: 'then' } as never,
    });
    expect(badHistory.response.status).toBe(400);
    expect(pointerOf(badHistory)).toMatch(/^\/(startDate|endDate)$/);
    expect((await strangerAdmin.POST('/v1/applications/{applicationId}/price_history', {
      params: { path: { applicationId: shop.applicationId } },
      body: { sku: 'sku-1', startDate: at(30), endDate: new Date(end).toISOString() },
    })).response.status).toBe(404);
    expect((await anonymousClient(t.url).POST('/v1/applications/{applicationId}/price_history', {
      params: { path: { applicationId: shop.applicationId } },
      body: { sku: 'sku-1', startDate: at(30), endDate: new Date(end).toISOString() },
    })).response.status).toBe(401);
  });

  it('prices and enriches cart items from subscribed catalogs, and records every observed price', async () => {
    const c = unwrap(await createCatalog(t.admin, { name: 'Shop prices', subscribedApplicationsIds: [shop.applicationId] }));
    unwrap(await sync(shop.integration, c.id, 1, [
      { type: 'ADD', payload: { sku: 'shirt', price: 120, attributes: { color: 'red', size: 'L' }, product: { name: 'Shirts' } } },
      { type: 'ADD', payload: { sku: 'unpriced', attributes: { color: 'blue' } } },
    ]));
    const update = (client: Client, id: string, items: unknown[]) =>
      client.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: id } },
        body: { customerSession: { profileId: 'cat-buyer', cartItems: items } as never, responseContent: ['customerSession'] },
      });
    const items = [
      { sku: 'shirt', quantity: 2, price: 50, attributes: { size: 'M' } },
      { sku: 'unpriced', quantity: 1, price: 7 },
      { sku: 'sock', quantity: 1, price: 5 },
    ];
    const state = unwrap(await update(shop.integration, 'cat-session-1', items));
    const session = state.customerSession!;
    // The catalog's price wins; the sent item attributes override the catalog's; the sent price
    // stays for an item the catalog has no price for and for an unknown SKU.
    expect(session.cartItems.map((i) => [i.sku, i.price, i.attributes ?? {}, i.product ?? null])).toEqual([
      ['shirt', 120, { color: 'red', size: 'M' }, { name: 'Shirts' }],
      ['unpriced', 7, { color: 'blue' }, null],
      ['sock', 5, {}, null],
    ]);
    expect(session.cartItemTotal).toBe(252);
    // The 10% campaign of the shop sees the catalog price.
    expect(state.effects.map((e) => e.props)).toEqual([{ name: '10% off', value: 25.2 }]);
    // An Application not subscribed to the catalog keeps the sent prices.
    const other = unwrap(await update(sibling.integration, 'cat-session-2', items)).customerSession!;
    expect(other.cartItems.map((i) => i.price)).toEqual([50, 7, 5]);

    // The cart prices are price records of the Application (an unchanged price is not recorded twice).
    unwrap(await update(shop.integration, 'cat-session-1', items));
    const h = unwrap(
      await t.admin.POST('/v1/applications/{applicationId}/price_history', {
        params: { path: { applicationId: shop.applicationId } },
        body: { sku: 'sock', startDate: new Date(Date.now() - 60_000).toISOString(), endDate: new Date(Date.now() + 60_000).toISOString() },
      }),
    );
    expect(h.history.map((r) => [r.price, r.contextId])).toEqual([[5, 'session:cat-session-1']]);
    const shirt = unwrap(
      await t.admin.POST('/v1/applications/{applicationId}/price_history', {
        params: { path: { applicationId: shop.applicationId } },
        body: { sku: 'shirt', startDate: new Date(Date.now() - 60_000).toISOString(), endDate: new Date(Date.now() + 60_000).toISOString() },
      }),
    );
    expect(shirt.history.map((r) => [r.price, r.contextId])).toEqual([[120, `catalog:${c.id}:v1`], [120, 'session:cat-session-1']]);
    // The sibling's own cart prices are its records, not the shop's.
    const bp = unwrap(await best(sibling.integration, { skus: ['shirt'], timeframeEndDate: new Date(Date.now() + 60_000).toISOString(), timeframe: '1', strictEndDate: true }));
    expect(bp.map((r) => [r.price, r.contextId])).toEqual([[50, 'session:cat-session-2']]);
    // An Application that subscribes to no catalog records no cart prices.
    const plain = await setupShop(t.url, t.admin, { application: { name: 'No catalogs' } });
    unwrap(await update(plain.integration, 'cat-session-3', items));
    const [{ n: plainRecords }] = (await t.node.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM price_records WHERE application_id = $1`, [plain.applicationId])) as [{ n: number }];
    expect(plainRecords).toBe(0);
  });
});

// Parallel syncs on real Postgres: the catalog's row lock orders them; versions only grow.
describe.skipIf(!postgresUp)('catalog sync concurrency (postgres)', () => {
  let t: TestNode;
  let shop: ShopSetup;
  beforeAll(async () => {
    t = await startTestNode('postgres');
    shop = await setupShop(t.url, t.admin);
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  it('applies parallel syncs with distinct versions at most once each, ending at the highest version', async () => {
    const c = unwrap(await createCatalog(t.admin, { name: 'Parallel', subscribedApplicationsIds: [shop.applicationId] }));
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) => sync(shop.integration, c.id, i + 1, [{ type: 'ADD', payload: { sku: `p${i + 1}`, price: i + 1 } }])),
    );
    const statuses = results.map((r) => r.response.status);
    for (const s of statuses) expect([200, 409]).toContain(s);
    expect(statuses[11]).toBe(200);
    const applied = results.flatMap((r, i) => (r.response.status === 200 ? [`p${i + 1}`] : [])).sort();
    const rows = await t.node.db.query<{ sku: string }>(`SELECT sku FROM catalog_items WHERE catalog_id = $1 ORDER BY sku`, [c.id]);
    expect(rows.map((r) => r.sku)).toEqual(applied);
    expect(unwrap(await t.admin.GET('/v1/catalogs/{catalogId}', { params: { path: { catalogId: c.id } } })).version).toBe(12);
    // Versions the applied syncs returned grow with the order they were applied in.
    const [{ n }] = (await t.node.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM price_records WHERE catalog_id = $1`, [c.id])) as [{ n: number }];
    expect(n).toBe(applied.length);
  }, 30_000);
});

const adapters: AdapterName[] = postgresUp ? ['pglite', 'postgres'] : ['pglite'];

describe.each(adapters)('catalog sync (%s)', (adapter) => {
  let t: TestNode;
  let shop: ShopSetup;
  let sibling: ShopSetup;
  beforeAll(async () => {
    t = await startTestNode(adapter);
    shop = await setupShop(t.url, t.admin);
    sibling = await setupShop(t.url, t.admin);
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  const items = async (catalogId: number) =>
    (await t.node.db.query<{ sku: string; price: string | null; attributes: Record<string, unknown>; product: unknown }>(
      `SELECT sku, price::text AS price, attributes, product FROM catalog_items WHERE catalog_id = $1 ORDER BY sku`,
      [catalogId],
    )).map((r) => ({ ...r, price: r.price === null ? null : Number(r.price) }));

  describe('a sync of 1,000 actions in one request', () => {
    type Item = { sku: string; price: number | null; attributes: Record<string, unknown>; product: unknown };
    type Filter = { attr: string; op: string; value: unknown };

    /** A filter as the old sync's SQL read it, on the test's values (strings and whole numbers). */
    const holds = (attributes: Record<string, unknown>, f: Filter): boolean => {
      const v = attributes[f.attr];
      if (v === undefined) return false;
      switch (f.op) {
        case 'EQ':
          return JSON.stringify(v) === JSON.stringify(f.value);
        case 'IN':
          return v !== null && String(f.value).split(',').map((x) => x.trim()).includes(typeof v === 'string' ? v : JSON.stringify(v));
        default: {
          if (typeof v !== 'number') return false;
          const w = f.value as number;
          return f.op === 'LT' ? v < w : f.op === 'LE' ? v <= w : f.op === 'GT' ? v > w : v >= w;
        }
      }
    };
    /** What the sync did before it was set-based: the actions one after another, in order. */
    const oneByOne = (before: readonly Item[], actions: readonly Action[]): Item[] => {
      const byId = new Map(before.map((i) => [i.sku, { ...i, attributes: { ...i.attributes } }]));
      for (const { type, payload: p } of actions) {
        const sku = p.sku as string;
        const cur = byId.get(sku);
        const sent = { sku, price: (p.price as number | undefined) ?? null, attributes: (p.attributes as Record<string, unknown>) ?? {}, product: p.product ?? null };
        if (type === 'ADD' || (type === 'PATCH' && !cur)) byId.set(sku, sent);
        else if (type === 'PATCH') byId.set(sku, { sku, price: sent.price ?? cur!.price, attributes: { ...cur!.attributes, ...sent.attributes }, product: sent.product ?? cur!.product });
        else if (type === 'REMOVE') byId.delete(sku);
        else {
          for (const [k, item] of [...byId]) {
            if (!(p.filters as Filter[]).every((f) => holds(item.attributes, f))) continue;
            if (type === 'REMOVE_MANY') byId.delete(k);
            else item.attributes = { ...item.attributes, ...(p.attributes as Record<string, unknown>) };
          }
        }
      }
      return [...byId.values()].sort((a, b) => (a.sku < b.sku ? -1 : a.sku > b.sku ? 1 : 0));
    };
    let seed = 7;
    const random = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed >>> 8) % n;
    };
    const skuOf = (i: number) => `set-${String(i).padStart(4, '0')}`;
    const COLORS = ['red', 'green', 'blue', 'black'];
    /** 1,000 items with a few attributes each, as the catalog's first sync. */
    const stocked = async (name: string): Promise<{ id: number; before: Item[] }> => {
      const c = unwrap(await createCatalog(t.admin, { name, subscribedApplicationsIds: [shop.applicationId] }));
      const adds: Action[] = Array.from({ length: 1000 }, (_, i) => ({
        type: 'ADD',
        payload: { sku: skuOf(i), price: 5 + random(50), attributes: { n: i, color: COLORS[random(4)], size: random(10), tag: `t${random(100)}` }, ...(i % 4 === 0 ? { product: { name: `P${i}` } } : {}) },
      }));
      unwrap(await sync(shop.integration, c.id, 1, adds));
      return { id: c.id, before: await items(c.id) };
    };
    const priceRecords = async (catalogId: number, version: number) =>
      (
        await t.node.db.query<{ sku: string; price: string }>(`SELECT sku, price::text AS price FROM price_records WHERE catalog_id = $1 AND context_id = $2 ORDER BY sku`, [
          catalogId,
          `catalog:${catalogId}:v${version}`,
        ])
      ).map((r) => [r.sku, Number(r.price)]);
    /** Applies the actions in one request and checks the outcome against applying them one by one. */
    const same = async (catalog: { id: number; before: Item[] }, actions: Action[]) => {
      const synced = unwrap(await sync(shop.integration, catalog.id, 2, actions));
      expect(synced.version).toBe(2);
      const after = await items(catalog.id);
      expect(after).toEqual(oneByOne(catalog.before, actions));
      const priced = actions.filter((a) => typeof a.payload.price === 'number').map((a) => [a.payload.sku, a.payload.price]);
      expect(await priceRecords(catalog.id, 2)).toEqual(priced.sort((a, b) => (String(a[0]) < String(b[0]) ? -1 : 1)));
      return after;
    };

    it('ADD: new items and replaced ones', async () => {
      const c = await stocked('Set ADD');
      const actions: Action[] = Array.from({ length: 1000 }, (_, i) => {
        const sku = skuOf(i % 2 === 0 ? i : 1000 + i);
        return { type: 'ADD', payload: { sku, replaceIfExists: true, ...(i % 3 ? { price: 1 + random(90) } : {}), attributes: { added: i }, ...(i % 5 === 0 ? { product: { name: `new ${i}` } } : {}) } };
      });
      expect(await same(c, actions)).toHaveLength(1500);
    }, 30_000);

    it('PATCH: stored items merged, missing ones created', async () => {
      const c = await stocked('Set PATCH');
      const actions: Action[] = Array.from({ length: 1000 }, (_, i) => ({
        type: 'PATCH',
        payload: {
          sku: skuOf(i < 700 ? i : 1000 + i),
          createIfNotExists: true,
          ...(i % 2 ? { price: 100 + i } : {}),
          attributes: { patched: i, ...(i % 7 === 0 ? { color: 'white' } : {}) },
          ...(i % 9 === 0 ? { product: { name: `patched ${i}` } } : {}),
        },
      }));
      const after = await same(c, actions);
      expect(after).toHaveLength(1300);
      expect(after.find((x) => x.sku === skuOf(3))).toMatchObject({ price: 103, attributes: { n: 3, patched: 3 } });
    }, 30_000);

    it('REMOVE: stored and unknown SKUs', async () => {
      const c = await stocked('Set REMOVE');
      const actions: Action[] = Array.from({ length: 1000 }, (_, i) => ({ type: 'REMOVE', payload: { sku: skuOf(i < 800 ? i * 1 + 100 : 5000 + i) } }));
      expect(await same(c, actions)).toHaveLength(1000 - 800);
    }, 30_000);

    it('PATCH_MANY: in order, later filters reading what earlier actions wrote', async () => {
      const c = await stocked('Set PATCH_MANY');
      const filterOf = (k: number): Filter[] => {
        switch (k % 6) {
          case 0:
            return [{ attr: 'color', op: 'EQ', value: COLORS[random(4)] }, { attr: 'size', op: 'LT', value: random(10) }];
          case 1:
            return [{ attr: 'tag', op: 'IN', value: `t${random(100)}, t${random(100)},t${random(100)}` }];
          case 2:
            // What actions of kind 3 write.
            return [{ attr: 'level', op: 'GE', value: random(5) }];
          case 3:
            return [{ attr: 'n', op: 'GT', value: random(1000) }, { attr: 'n', op: 'LE', value: random(1000) + 200 }];
          case 4:
            // What actions of kind 5 write, as a string.
            return [{ attr: 'badge', op: 'EQ', value: `b${random(3)}` }];
          default:
            return [{ attr: 'size', op: 'IN', value: `${random(10)},${random(10)}` }];
        }
      };
      const actions: Action[] = Array.from({ length: 1000 }, (_, i) => ({
        type: 'PATCH_MANY',
        payload: {
          filters: filterOf(i),
          attributes: i % 6 === 3 ? { level: random(6) } : i % 6 === 5 ? { badge: `b${random(3)}`, size: random(10) } : { [`k${i % 11}`]: i },
        },
      }));
      const after = await same(c, actions);
      // The order mattered: applying every action to the items as they were before differs.
      const atOnce = c.before.map((item) => {
        let attributes = { ...item.attributes };
        for (const a of actions) if ((a.payload.filters as Filter[]).every((f) => holds(item.attributes, f))) attributes = { ...attributes, ...(a.payload.attributes as Record<string, unknown>) };
        return { ...item, attributes };
      });
      expect(after).not.toEqual(atOnce);
      expect(after.filter((x) => x.attributes.level !== undefined).length).toBeGreaterThan(100);
    }, 60_000);

    it('REMOVE_MANY: what any filter matches', async () => {
      const c = await stocked('Set REMOVE_MANY');
      const actions: Action[] = Array.from({ length: 1000 }, (_, i) => ({
        type: 'REMOVE_MANY',
        payload: { filters: i % 2 ? [{ attr: 'tag', op: 'EQ', value: `t${random(100)}` }, { attr: 'size', op: 'GT', value: random(10) }] : [{ attr: 'n', op: 'IN', value: String(random(1000)) }] },
      }));
      const after = await same(c, actions);
      expect(after.length).toBeGreaterThan(0);
      expect(after.length).toBeLessThan(1000);
    }, 30_000);

    it('matches syncs of one action each, action after action', async () => {
      const one = await stocked('Set one request');
      const many = await stocked('Set many requests');
      expect(many.before.map((i) => i.attributes)).not.toEqual([]);
      // The same starting items in both.
      await t.node.db.query(`DELETE FROM catalog_items WHERE catalog_id = $1`, [many.id]);
      await t.node.db.query(`INSERT INTO catalog_items (catalog_id, sku, price, attributes, product) SELECT $1, sku, price, attributes, product FROM catalog_items WHERE catalog_id = $2`, [many.id, one.id]);
      const actions: Action[] = [];
      for (let i = 0; i < 40; i++) {
        actions.push({ type: 'PATCH_MANY', payload: { filters: [{ attr: 'color', op: 'EQ', value: COLORS[i % 4] }, { attr: 'size', op: 'GE', value: i % 10 }], attributes: { step: i, [`seen${i % 3}`]: true } } });
        actions.push({ type: 'PATCH_MANY', payload: { filters: [{ attr: 'step', op: 'LT', value: i }, { attr: `seen${(i + 1) % 3}`, op: 'EQ', value: true }], attributes: { color: COLORS[(i + 1) % 4] } } });
      }
      unwrap(await sync(shop.integration, one.id, 2, actions));
      for (const [k, a] of actions.entries()) unwrap(await sync(shop.integration, many.id, 2 + k, [a]));
      const strip = (xs: Item[]) => xs.map(({ sku, price, attributes, product }) => ({ sku, price, attributes, product }));
      expect(strip(await items(one.id))).toEqual(strip(await items(many.id)));
    }, 60_000);

    it('refuses a bad action among 1,000 with its pointer and changes nothing', async () => {
      const c = await stocked('Set refusals');
      const adds: Action[] = Array.from({ length: 1000 }, (_, i) => ({ type: 'ADD', payload: { sku: skuOf(1000 + i), price: 1 } }));
      adds[737] = { type: 'ADD', payload: { sku: skuOf(5), price: 1 } };
      adds[900] = { type: 'ADD', payload: { sku: skuOf(6), price: 1 } };
      const taken = await sync(shop.integration, c.id, 2, adds);
      expect(taken.response.status).toBe(409);
      expect(pointerOf(taken)).toBe('/actions/737/payload/sku');
      const patches: Action[] = Array.from({ length: 1000 }, (_, i) => ({ type: 'PATCH', payload: { sku: skuOf(i), attributes: { x: 1 } } }));
      patches[998] = { type: 'PATCH', payload: { sku: 'not-there', attributes: { x: 1 } } };
      const missing = await sync(shop.integration, c.id, 2, patches);
      expect(missing.response.status).toBe(404);
      expect(pointerOf(missing)).toBe('/actions/998/payload/sku');
      const twice = await sync(shop.integration, c.id, 2, [...adds.slice(0, 999).map((a, i) => ({ type: 'REMOVE', payload: { sku: skuOf(i) } })), { type: 'REMOVE', payload: { sku: skuOf(3) } }]);
      expect(twice.response.status).toBe(400);
      expect(pointerOf(twice)).toBe('/actions/999/payload/sku');
      const badFilter = await sync(shop.integration, c.id, 2, Array.from({ length: 1000 }, (_, i) => ({ type: 'REMOVE_MANY', payload: { filters: [{ attr: 'n', op: i === 512 ? 'GT' : 'EQ', value: i === 512 ? 'x' : i }] } })));
      expect(badFilter.response.status).toBe(400);
      expect(pointerOf(badFilter)).toBe('/actions/512/payload/filters/0/value');
      expect(await items(c.id)).toEqual(c.before);
      expect(unwrap(await t.admin.GET('/v1/catalogs/{catalogId}', { params: { path: { catalogId: c.id } } })).version).toBe(1);
      // An Application that does not subscribe to the catalog cannot sync it.
      expect((await sync(sibling.integration, c.id, 2, [{ type: 'REMOVE', payload: { sku: skuOf(1) } }])).response.status).toBe(404);
      expect(await items(c.id)).toHaveLength(1000);
    }, 30_000);
  });
});
