import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIntegrationClient, unwrap } from '../../sdk/index.js';
import { cart } from '../helpers/fixtures.js';
import { setupShop, startTestNode, TestClock, type ShopSetup, type TestNode } from '../helpers/node.js';

const HOUR = 3600 * 1000;

describe('Integration API refusals', () => {
  let t: TestNode;
  let shop: ShopSetup;
  let other: ShopSetup;
  const clock = new TestClock();
  const put = (body: string, headers: Record<string, string> = {}, query = '', key = shop.apiKey) =>
    fetch(`${t.url}/v2/customer_sessions/s-1${query}`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json', Authorization: `ApiKey-v1 ${key}`, ...headers },
      body,
    });

  beforeAll(async () => {
    t = await startTestNode('pglite', { clock });
    shop = await setupShop(t.url, t.admin);
    other = await setupShop(t.url, t.admin);
  });
  afterAll(async () => {
    await t?.stop();
  });

  const expectError = async (res: Response, status: number, pointer: string) => {
    expect(res.status).toBe(status);
    const body = (await res.json()) as { message: string; StatusCode: number; errors: Array<{ source?: { pointer?: string } }> };
    expect(body.StatusCode).toBe(status);
    expect(typeof body.message).toBe('string');
    expect(body.errors.map((e) => e.source?.pointer)).toContain(pointer);
    return body;
  };

  it('refuses malformed JSON with 400 pointing at the document', async () => {
    await expectError(await put('{"customerSession": '), 400, '');
  });

  it('refuses wrong types with 400 pointing at the value', async () => {
    const body = JSON.stringify({ customerSession: { cartItems: [{ sku: 'A', quantity: 1, price: 'abc' }] } });
    await expectError(await put(body), 400, '/customerSession/cartItems/0/price');
  });

  it('refuses a cart item without sku or with quantity 0', async () => {
    await expectError(await put(JSON.stringify({ customerSession: { cartItems: [{ quantity: 1, price: 1 }] } })), 400, '/customerSession/cartItems/0/sku');
    await expectError(await put(JSON.stringify({ customerSession: { cartItems: [{ sku: 'A', quantity: 0, price: 1 }] } })), 400, '/customerSession/cartItems/0/quantity');
  });

  it('refuses an unknown state and a bad query parameter', async () => {
    await expectError(await put(JSON.stringify({ customerSession: { state: 'lost' } })), 400, '/customerSession/state');
    await expectError(await put('{}', {}, '?dry=maybe'), 400, '/query/dry');
    await expectError(await put('{}', {}, `?now=${new Date(Date.now() + HOUR).toISOString()}`), 400, '/query/now');
  });

  it('holds the input limits of the addendum: lines, units, coupon codes and identifiers', async () => {
    const line = (quantity = 1) => ({ sku: 'A', quantity, price: 1 });
    await expectError(await put(JSON.stringify({ customerSession: { cartItems: Array.from({ length: 1001 }, () => line()) } })), 400, '/customerSession/cartItems');
    await expectError(await put(JSON.stringify({ customerSession: { cartItems: [line(6000), line(5000)] } })), 400, '/customerSession/cartItems');
    await expectError(await put(JSON.stringify({ customerSession: { couponCodes: Array.from({ length: 101 }, (_, i) => `C${i}`) } })), 400, '/customerSession/couponCodes');
    await expectError(await put(JSON.stringify({ customerSession: { identifiers: ['a', 'b', 'c', 'd', 'e', 'f'] } })), 400, '/customerSession/identifiers');
    // At the limits, the session is accepted.
    const atLimit = { cartItems: Array.from({ length: 1000 }, () => line(10)), couponCodes: Array.from({ length: 100 }, (_, i) => `C${i}`), identifiers: ['a', 'b', 'c', 'd', 'e'] };
    expect((await put(JSON.stringify({ customerSession: atLimit }))).status).toBe(200);
  });

  it('refuses text the database cannot hold (a NUL character) with 400, not 500', async () => {
    await expectError(await put(JSON.stringify({ customerSession: { profileId: 'a\u0000b' } })), 400, '');
  });

  it('refuses a body over 10 MiB with 413', async () => {
    const big = JSON.stringify({ customerSession: { attributes: { blob: 'x'.repeat(11 * 1024 * 1024) } } });
    await expectError(await put(big), 413, '');
  });

  it('refuses a missing, unknown or malformed key with 401', async () => {
    const noKey = await fetch(`${t.url}/v2/customer_sessions/s-1`, { method: 'PUT', body: '{}', headers: { 'Content-Type': 'application/json' } });
    await expectError(noKey, 401, '/headers/authorization');
    await expectError(await put('{}', {}, '', 'not-a-key'), 401, '/headers/authorization');
    await expectError(await put('{}', { Authorization: `Bearer ${t.adminToken}` }), 401, '/headers/authorization');
  });

  it('refuses an expired key and a deleted key', async () => {
    const short = unwrap(
      await t.admin.POST('/v1/applications/{applicationId}/api_keys', {
        params: { path: { applicationId: shop.applicationId } },
        body: { title: 'short-lived', expires: new Date(clock.now().getTime() + HOUR).toISOString() },
      }),
    );
    expect((await put('{}', {}, '', short.key)).status).toBe(200);
    clock.advance(2 * HOUR);
    await expectError(await put('{}', {}, '', short.key), 401, '/headers/authorization');

    const doomed = unwrap(
      await t.admin.POST('/v1/applications/{applicationId}/api_keys', {
        params: { path: { applicationId: shop.applicationId } },
        body: { title: 'doomed', expires: new Date(clock.now().getTime() + 48 * HOUR).toISOString() },
      }),
    );
    expect((await put('{}', {}, '', doomed.key)).status).toBe(200);
    const del = await t.admin.DELETE('/v1/applications/{applicationId}/api_keys/{keyId}', {
      params: { path: { applicationId: shop.applicationId, keyId: doomed.id } },
    });
    expect(del.response.status).toBe(204);
    await expectError(await put('{}', {}, '', doomed.key), 401, '/headers/authorization');
  });

  it("never shows or changes another Application's session", async () => {
    unwrap(
      await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'private' } },
        body: { customerSession: cart([150], { attributes: { owner: 'shop' } }) },
      }),
    );
    const peek = await other.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'private' } } });
    expect(peek.response.status).toBe(404);
    expect(peek.error?.errors[0]?.source?.pointer).toBe('/path/customerSessionId');

    // The same ID under the other key is the other Application's own, separate session.
    const theirs = unwrap(
      await other.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'private' } },
        body: { customerSession: { attributes: { owner: 'other' } }, responseContent: ['customerSession'] },
      }),
    );
    expect(theirs.customerSession).toMatchObject({ applicationId: other.applicationId, attributes: { owner: 'other' }, updateCount: 1 });
    const mine = unwrap(await shop.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'private' } } }));
    expect(mine.customerSession).toMatchObject({ applicationId: shop.applicationId, attributes: { owner: 'shop' }, updateCount: 1, total: 150 });
  });

  it('answers an unknown route with the error body', async () => {
    const res = await fetch(`${t.url}/v2/nothing-here`, { headers: { Authorization: `ApiKey-v1 ${shop.apiKey}` } });
    await expectError(res, 404, '/path');
  });

  it('keeps working keys working after all that', async () => {
    const client = createIntegrationClient({ baseUrl: t.url, apiKey: shop.apiKey, retries: 0 });
    const r = unwrap(
      await client.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'after' } },
        body: { customerSession: cart([101]) },
      }),
    );
    expect(r.effects[0]?.props).toEqual({ name: '10% off', value: 10.1 });
  });
});
