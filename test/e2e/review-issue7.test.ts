import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unwrap } from '../../sdk/index.js';
import { cart } from '../helpers/fixtures.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';

/** One request written byte for byte (fetch would drop a fragment); the whole answer as text. */
function rawRequest(baseUrl: string, text: string): Promise<{ status: number; body: string }> {
  const u = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(u.port), u.hostname);
    let out = '';
    socket.on('data', (d: Buffer) => (out += d.toString('latin1')));
    socket.on('end', () => {
      const [head, ...rest] = out.split('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.1 (\d+)/.exec(head ?? '')?.[1] ?? 0), body: Buffer.from(rest.join('\r\n\r\n'), 'latin1').toString('utf8') });
    });
    socket.on('error', reject);
    socket.write(text);
  });
}

/**
 * Review of issue 7 (the edge's own router, the outbox and its dispatcher, rule-triggered and
 * notification webhooks, coupon notifications and asynchronous creation): each case is a defect
 * found in review, and fails without its fix.
 */
describe('review of issue 7 (pglite)', () => {
  let t: TestNode;
  let shop: ShopSetup;

  beforeAll(async () => {
    t = await startTestNode('pglite');
    shop = await setupShop(t.url, t.admin);
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('reads a request target with a raw fragment the same way on the exact path as in another letter case', async () => {
    const send = (method: string, path: string, body = '') =>
      rawRequest(
        t.url,
        `${method} ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: ApiKey-v1 ${shop.apiKey}\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    const body = JSON.stringify({ customerSession: { profileId: 'frag-1', cartItems: [{ sku: 'A', quantity: 1, price: 5 }] } });
    // The fragment is no part of the target: the session is `frag-s1` whichever route takes it.
    expect((await send('PUT', '/v2/customer_sessions/frag-s1#tail', body)).status).toBe(200);
    const exact = await shop.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'frag-s1' } } });
    expect(exact.response.status).toBe(200);
    expect(unwrap(exact).customerSession.integrationId).toBe('frag-s1');
    const direct = await send('GET', '/v2/customer_sessions/frag-s1#x?y');
    const viaExpress = await send('GET', '/V2/customer_sessions/frag-s1#x?y');
    expect(direct.status).toBe(200);
    expect(JSON.parse(direct.body)).toEqual(JSON.parse(viaExpress.body));
    // The query ends where the fragment starts.
    const dry = await send('PUT', '/v2/customer_sessions/frag-s2?dry=true#more', body);
    expect(dry.status).toBe(200);
    const stored = await shop.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'frag-s2' } } });
    expect(stored.response.status).toBe(404);
  });
});
