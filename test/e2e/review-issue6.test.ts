// Review of the issue 6 endpoints (access and input): regressions for defects found in review r3.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unwrap } from '../../sdk/index.js';
import { setupShop, startTestNode, TestClock, type ShopSetup, type TestNode } from '../helpers/node.js';

type ErrorBody = { message: string; StatusCode: number; errors: Array<{ title: string; source?: { pointer?: string } }> };

describe('review of issue 6 endpoints (r3)', () => {
  let t: TestNode;
  let shop: ShopSetup;
  const clock = new TestClock();

  beforeAll(async () => {
    t = await startTestNode('pglite', { clock });
    shop = await setupShop(t.url, t.admin);
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  const raw = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(t.url + path, {
      method,
      headers: { Authorization: `ApiKey-v1 ${shop.apiKey}`, 'Content-Type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await r.text();
    return { status: r.status, body: (text === '' ? undefined : JSON.parse(text)) as ErrorBody };
  };

  it('refuses a path parameter that is not valid percent-encoded UTF-8 with 400, not 500', async () => {
    unwrap(await shop.integration.POST('/v2/customer_audiences', { body: { data: [{ profileIntegrationId: 'pe', audienceId: unwrap(await shop.integration.POST('/v2/audiences', { body: { name: 'pe' } })).id, action: 'add' }] } }));
    for (const path of ['/v1/customer_profiles/%ED%A0%80/inventory', '/v1/customer_profiles/%ED%A0%80/achievements', '/v1/coupon_reservations/customerprofiles/%E0%A4%A', '/v1/customer_profiles/%FF/achievements/1']) {
      const r = await raw('GET', path);
      expect(r.status, path).toBe(400);
      expect(r.body.StatusCode).toBe(400);
      expect(r.body.errors[0]!.source?.pointer).toBe('/path');
    }
    // The same route with a well-formed parameter still answers.
    expect((await raw('GET', '/v1/customer_profiles/pe/inventory?profile=true')).status).toBe(200);
  });

  it('loyalty balances at a past endDate leave out later grants and give back what later deductions took', async () => {
    const program = unwrap(
      await t.admin.POST('/v1/loyalty_programs', { body: { name: `hist${Date.now()}`, title: 'History', subscribedApplications: [shop.applicationId] } as never }),
    );
    const path = { programID: program.id, integrationID: 'hist-ann' };
    const add = (points: number) => t.admin.PUT('/v1/loyalty_programs/{programID}/profile/{integrationID}/add_points', { params: { path }, body: { points } as never });
    const deduct = (points: number) => t.admin.PUT('/v1/loyalty_programs/{programID}/profile/{integrationID}/deduct_points', { params: { path }, body: { points } as never });
    const balances = async (endDate?: string) =>
      unwrap(await shop.integration.GET('/v1/loyalty_programs/{programID}/profile/{integrationID}/balances', { params: { path, query: endDate ? { endDate } : {} } }));

    expect((await raw('PUT', '/v2/customer_profiles/hist-ann', { attributes: {} })).status).toBe(200);
    expect((await add(100)).response.status).toBe(200);
    clock.advance(3600_000);
    const afterFirstGrant = clock.now().toISOString();
    clock.advance(3600_000);
    expect((await deduct(30)).response.status).toBe(200);
    clock.advance(3600_000);
    const afterDeduction = clock.now().toISOString();
    clock.advance(3600_000);
    expect((await add(50)).response.status).toBe(200);
    clock.advance(3600_000);

    expect((await balances()).balance).toMatchObject({ activePoints: 120, pendingPoints: 0, spentPoints: 30, expiredPoints: 0 });
    // Before the deduction: the first grant whole, nothing spent, the later grant not there at all.
    expect((await balances(afterFirstGrant)).balance).toMatchObject({ activePoints: 100, pendingPoints: 0, spentPoints: 0, expiredPoints: 0 });
    expect((await balances(afterDeduction)).balance).toMatchObject({ activePoints: 70, pendingPoints: 0, spentPoints: 30, expiredPoints: 0 });
    // Before anything: no points at all (not the later grants as pending).
    expect((await balances('2000-01-01T00:00:00Z')).balance).toMatchObject({ activePoints: 0, pendingPoints: 0, spentPoints: 0, expiredPoints: 0 });
  });

  it('a cart priced from a catalog past what a number holds is a 400 on the cart, not a 500', async () => {
    const catalog = unwrap(await t.admin.POST('/v1/catalogs', { body: { name: 'huge prices', subscribedApplicationsIds: [shop.applicationId] } as never }));
    const synced = await shop.integration.PUT('/v1/catalogs/{catalogId}/sync', {
      params: { path: { catalogId: catalog.id } },
      body: { version: 1, actions: [{ type: 'ADD', payload: { sku: 'huge', price: 1e308 } }] } as never,
    });
    expect(synced.response.status).toBe(200);
    const put = (id: string, cartItems: unknown[]) => raw('PUT', `/v2/customer_sessions/${id}`, { customerSession: { profileId: 'huge-buyer', cartItems } });
    for (const [id, items] of [
      ['huge-catalog', [{ sku: 'huge', quantity: 2, price: 1 }]],
      ['huge-sent', [{ sku: 'plain', quantity: 2, price: 1e308 }]],
      ['huge-both', [{ sku: 'huge', quantity: 1, price: 1 }, { sku: 'plain', quantity: 1, price: 1e308 }]],
    ] as const) {
      const r = await put(id, [...items]);
      expect(r.status, id).toBe(400);
      expect(r.body.StatusCode).toBe(400);
      expect(r.body.errors[0]!.source?.pointer).toBe('/customerSession/cartItems');
    }
    // One unit at the catalog price still fits, and the catalog's price is the one used.
    const one = await put('huge-one', [{ sku: 'huge', quantity: 1, price: 1 }]);
    expect(one.status).toBe(200);
    const session = unwrap(await shop.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'huge-one' } } }));
    expect(session.customerSession.total).toBe(1e308);
  });

  it('refuses over-long keys of audiences and catalog items with 400 on their pointer, not 500 (index row too large)', async () => {
    // Incompressible text: what would pass a B-tree index's row size limit.
    const long = Array.from({ length: 5000 }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919) % 20000))).join('');
    const audience = await raw('POST', '/v2/audiences', { name: 'long', integration: long, integrationId: 'i-long' });
    expect(audience.status).toBe(400);
    expect(audience.body.errors[0]!.source?.pointer).toBe('/integration');
    // 1000 characters each, whatever their bytes, as the spec allows: the unique index keys them
    // on hashes (migration 017).
    const wideAudience = await raw('POST', '/v2/audiences', { name: 'wide', integration: long.slice(0, 1000), integrationId: long.slice(1000, 2000) });
    expect(wideAudience.status).toBe(201);
    expect((await raw('POST', '/v2/audiences', { name: 'wide again', integration: long.slice(0, 1000), integrationId: long.slice(1000, 2000) })).status).toBe(409);
    expect((await raw('POST', '/v2/audiences', { name: 'fits', integration: 'x'.repeat(1000), integrationId: 'y'.repeat(1000) })).status).toBe(201);
    const target = unwrap(await shop.integration.POST('/v2/audiences', { body: { name: 'target' } }));
    const members = await raw('POST', '/v2/customer_audiences', { data: [{ profileIntegrationId: long, audienceId: target.id, action: 'add' }] });
    expect(members.status).toBe(400);
    expect(members.body.errors[0]!.source?.pointer).toBe('/data/0/profileIntegrationId');
    // 1000 characters that take more than 2000 bytes: a 400 as well (profile IDs are index keys).
    const wideMember = await raw('POST', '/v2/customer_audiences', { data: [{ profileIntegrationId: long.slice(0, 1000), audienceId: target.id, action: 'add' }] });
    expect(wideMember.status).toBe(400);
    expect(wideMember.body.errors[0]!.source?.pointer).toBe('/data/0/profileIntegrationId');
    const catalog = unwrap(await t.admin.POST('/v1/catalogs', { body: { name: 'long skus', subscribedApplicationsIds: [shop.applicationId] } as never }));
    const sync = await raw('PUT', `/v1/catalogs/${catalog.id}/sync`, { version: 1, actions: [{ type: 'ADD', payload: { sku: long, price: 1 } }] });
    expect(sync.status).toBe(400);
    expect(sync.body.errors[0]!.source?.pointer).toBe('/actions/0/payload/sku');
    // 1000 three-byte characters pass the schema but not the index: a 400 too.
    const wide = await raw('PUT', `/v1/catalogs/${catalog.id}/sync`, { version: 1, actions: [{ type: 'ADD', payload: { sku: long.slice(0, 1000), price: 1 } }] });
    expect(wide.status).toBe(400);
    expect(wide.body.errors[0]!.source?.pointer).toBe('/actions/0/payload/sku');
    // 1000 characters still fit (single-byte ones: see the review report on multi-byte keys).
    const ok = await raw('PUT', `/v1/catalogs/${catalog.id}/sync`, { version: 1, actions: [{ type: 'ADD', payload: { sku: 's'.repeat(1000), price: 1 } }] });
    expect(ok.status).toBe(200);
    expect((await raw('POST', '/v2/customer_audiences', { data: [{ profileIntegrationId: 'p'.repeat(1000), audienceId: target.id, action: 'add' }] })).status).toBe(204);
  });

  it('a session with a SKU too long to index, in an Application priced from a catalog, is stored and answered (no 500 after the commit)', async () => {
    // `shop` subscribes to catalogs (tests above): its cart prices become price records.
    // Incompressible (an index compresses a repeated letter below its limit).
    const sku = Array.from({ length: 5000 }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919) % 20000))).join('');
    const r = await raw('PUT', '/v2/customer_sessions/long-sku', { customerSession: { profileId: 'long-sku-buyer', cartItems: [{ sku, quantity: 1, price: 7 }, { sku: 'short-sku', quantity: 1, price: 3 }] } });
    expect(r.status).toBe(200);
    const session = unwrap(await shop.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'long-sku' } } }));
    expect(session.customerSession.cartItems.map((i) => i.sku)).toEqual([sku, 'short-sku']);
    expect(session.customerSession.total).toBe(10);
    // The SKU that fits is still recorded.
    const history = unwrap(
      await t.admin.POST('/v1/applications/{applicationId}/price_history', {
        params: { path: { applicationId: shop.applicationId } },
        body: { sku: 'short-sku', startDate: '2000-01-01T00:00:00Z', endDate: '2100-01-01T00:00:00Z' },
      }),
    );
    expect(history.history.map((h) => h.price)).toEqual([3]);
  });
});
