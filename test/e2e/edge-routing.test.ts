import { request } from 'node:http';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';

/**
 * The edge serves an operation's exact path through its own router and every other form through
 * express: both must answer the same, with the same limits and error bodies.
 */
describe('edge routing', () => {
  let t: TestNode;
  let shop: ShopSetup;
  let other: ShopSetup;

  beforeAll(async () => {
    t = await startTestNode('pglite');
    shop = await setupShop(t.url, t.admin);
    other = await setupShop(t.url, t.admin);
  });
  afterAll(async () => {
    await t?.stop();
  });

  const call = (method: string, path: string, body?: string | Buffer, headers: Record<string, string> = {}, key = shop.apiKey) =>
    fetch(`${t.url}${path}`, { method, headers: { 'Content-Type': 'application/json', Authorization: `ApiKey-v1 ${key}`, ...headers }, body });

  const errorOf = async (res: Response) => {
    const body = (await res.json()) as { StatusCode: number; errors: Array<{ source?: { pointer?: string } }> };
    return { status: res.status, StatusCode: body.StatusCode, pointers: body.errors.map((e) => e.source?.pointer) };
  };

  it('answers the exact path and the forms express takes (letter case, trailing slash) alike', async () => {
    const body = JSON.stringify({ customerSession: { profileId: 'edge-1', cartItems: [{ sku: 'A', quantity: 2, price: 10 }] } });
    const exact = await call('PUT', '/v2/customer_sessions/edge-s1', body);
    expect(exact.status).toBe(200);
    expect(exact.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const first = (await exact.json()) as { customerSession?: unknown; effects: unknown[] };
    expect(first.effects).toEqual([]);

    for (const path of ['/V2/Customer_Sessions/edge-s1', '/v2/customer_sessions/edge-s1/']) {
      const res = await call('GET', path);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
      const got = (await res.json()) as { customerSession: { integrationId: string; total: number } };
      expect(got.customerSession.integrationId).toBe('edge-s1');
      expect(got.customerSession.total).toBe(20);
    }
    const direct = (await (await call('GET', '/v2/customer_sessions/edge-s1')).json()) as unknown;
    const viaExpress = (await (await call('GET', '/v2/customer_sessions/edge-s1/')).json()) as unknown;
    expect(viaExpress).toEqual(direct);
  });

  it('refuses the same bad input on both routes with the same error body', async () => {
    const bad = JSON.stringify({ customerSession: { cartItems: [{ sku: 'A', quantity: 0, price: 1 }] } });
    const exact = await errorOf(await call('PUT', '/v2/customer_sessions/edge-s2', bad));
    const cased = await errorOf(await call('PUT', '/V2/customer_sessions/edge-s2', bad));
    expect(exact).toEqual({ status: 400, StatusCode: 400, pointers: ['/customerSession/cartItems/0/quantity'] });
    expect(cased).toEqual(exact);
    const badKey = await errorOf(await call('PUT', '/v2/customer_sessions/edge-s2', '{}', {}, 'nope'));
    expect(badKey).toEqual({ status: 401, StatusCode: 401, pointers: ['/headers/authorization'] });
    expect(await errorOf(await call('PUT', '/V2/customer_sessions/edge-s2', '{}', {}, 'nope'))).toEqual(badKey);
  });

  it('refuses a path parameter that is not percent-encoded UTF-8 with 400 on /path', async () => {
    for (const path of ['/v2/customer_sessions/%ED%A0%80', '/V2/customer_sessions/%ED%A0%80']) {
      expect(await errorOf(await call('GET', path))).toEqual({ status: 400, StatusCode: 400, pointers: ['/path'] });
    }
  });

  it('refuses a body over the limit with 413, announced or streamed', async () => {
    const big = JSON.stringify({ customerSession: { attributes: { blob: 'x'.repeat(11 * 1024 * 1024) } } });
    expect(await errorOf(await call('PUT', '/v2/customer_sessions/edge-s3', big))).toEqual({ status: 413, StatusCode: 413, pointers: [''] });
    // Chunked, without Content-Length: refused once the bytes read pass the limit.
    const streamed = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const url = new URL(t.url);
      const req = request(
        { host: url.hostname, port: url.port, path: '/v2/customer_sessions/edge-s3', method: 'PUT', headers: { 'Content-Type': 'application/json', Authorization: `ApiKey-v1 ${shop.apiKey}` } },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        },
      );
      req.on('error', reject);
      const chunk = 'x'.repeat(1024 * 1024);
      let sent = 0;
      const pump = () => {
        while (sent < 12) {
          sent++;
          if (!req.write(chunk)) return void req.once('drain', pump);
        }
        req.end();
      };
      pump();
    });
    expect(streamed.status).toBe(413);
    expect((JSON.parse(streamed.body) as { StatusCode: number }).StatusCode).toBe(413);
    // The server still answers afterwards.
    expect((await call('GET', '/v2/customer_sessions/edge-s1')).status).toBe(200);
  });

  it('takes a gzip-compressed body through express', async () => {
    const body = gzipSync(JSON.stringify({ customerSession: { profileId: 'edge-4', cartItems: [{ sku: 'B', quantity: 1, price: 7 }] } }));
    const res = await call('PUT', '/v2/customer_sessions/edge-s4', body, { 'Content-Encoding': 'gzip' });
    expect(res.status).toBe(200);
    const got = (await (await call('GET', '/v2/customer_sessions/edge-s4')).json()) as { customerSession: { total: number; profileId: string } };
    expect(got.customerSession).toMatchObject({ total: 7, profileId: 'edge-4' });
  });

  it('keeps another Application out on both routes', async () => {
    for (const path of ['/v2/customer_sessions/edge-s1', '/V2/customer_sessions/edge-s1']) {
      const res = await call('GET', path, undefined, {}, other.apiKey);
      expect(res.status).toBe(404);
    }
  });

  it('leaves unknown paths and methods to express: 404 with the error body', async () => {
    expect(await errorOf(await call('GET', '/v2/nothing_here'))).toEqual({ status: 404, StatusCode: 404, pointers: ['/path'] });
    expect(await errorOf(await call('PATCH', '/v2/customer_sessions/edge-s1', '{}'))).toEqual({ status: 404, StatusCode: 404, pointers: ['/path'] });
  });
});
