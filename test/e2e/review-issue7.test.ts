import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unwrap } from '../../sdk/index.js';
import { urlValue } from '../../services/shared/index.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';
import { addCampaign, rule } from '../helpers/promotions.js';
import { dropSchema } from '../helpers/db.js';
import { postgresUp, uniqueName } from '../helpers/services.js';
import { eventually } from '../helpers/users.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A receiver whose answers each test writes itself (per path prefix); it records every request's path and notification id. */
class RawReceiver {
  readonly got: Array<{ url: string; id: string }> = [];
  private readonly handlers = new Map<string, (req: http.IncomingMessage, res: http.ServerResponse) => void>();
  private readonly server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      this.got.push({ url: req.url ?? '', id: String(req.headers['x-notification-id'] ?? '') });
      const prefix = [...this.handlers.keys()].find((p) => (req.url ?? '').startsWith(p));
      if (prefix) this.handlers.get(prefix)!(req, res);
      else res.end('ok');
    });
  });
  url = '';

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }
  on(prefix: string, handler: (req: http.IncomingMessage, res: http.ServerResponse) => void): void {
    this.handlers.set(prefix, handler);
  }
  to(prefix: string) {
    return this.got.filter((g) => g.url.startsWith(prefix));
  }
  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

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

  it('refuses endpoint settings that can never be sent (or that would change what Perkline sends) with 400 on their pointer', async () => {
    const pointersOf = (e: unknown) => ((e as { errors?: Array<{ source?: { pointer?: string } }> })?.errors ?? []).map((x) => x.source?.pointer);
    const notification = (body: Record<string, unknown>) =>
      t.admin.POST('/v1/applications/{applicationId}/notification_webhooks', {
        params: { path: { applicationId: shop.applicationId } },
        body: { url: 'http://127.0.0.1:9/hook', headers: [], notificationTypes: ['CouponCreated'], ...body } as never,
      });
    const webhook = (body: Record<string, unknown>) =>
      t.admin.POST('/v1/webhooks', { body: { applicationIds: [shop.applicationId], title: 'CRM', verb: 'POST', url: 'http://127.0.0.1:9/hook', ...body } as never });
    const bad: Array<[Record<string, unknown>, string]> = [
      // fetch refuses a URL with credentials on every attempt (and readers would see them).
      [{ url: 'http://user:password@127.0.0.1:9/hook' }, '/url'],
      // A header value fetch cannot send: above U+00FF, or a control character.
      [{ headers: ['X-Name: 10 €'] }, '/headers/0'],
      [{ headers: ['X-Ok: 1', 'X-Bell: a\u0007b'] }, '/headers/1'],
      [{ headers: ['X-Del: a\u007fb'] }, '/headers/0'],
      // The HTTP client's framing headers, refused (or dropped) on every attempt.
      ...['Transfer-Encoding: chunked', 'Connection: upgrade', 'Keep-Alive: timeout=5', 'Upgrade: h2c', 'Expect: 100-continue', 'content-length: 1', 'Host: other'].map(
        (h): [Record<string, unknown>, string] => [{ headers: [h] }, '/headers/0'],
      ),
      // Perkline's own: a second X-Notification-Id would break receivers' deduplication.
      ...['x-notification-id: mine', 'X-Notification-Type: Mine', 'X-Signature: sha256=00'].map((h): [Record<string, unknown>, string] => [{ headers: [h] }, '/headers/0']),
    ];
    for (const [body, pointer] of bad) {
      for (const create of [notification, webhook]) {
        const res = await create(body);
        expect(res.response.status, JSON.stringify(body)).toBe(400);
        expect(pointersOf(res.error), JSON.stringify(body)).toEqual([pointer]);
      }
    }
    // Latin-1 text and tabs are what a header can carry.
    const ok = { headers: ['X-City: Malmö', 'X-Tab: a\tb'] };
    expect((await notification(ok)).response.status).toBe(201);
    expect((await webhook(ok)).response.status).toBe(201);
  });

  it('refuses a close whose webhook URL would take a lone surrogate as it refuses the text itself, not as a bad path', async () => {
    const w = unwrap(
      await t.admin.POST('/v1/webhooks', {
        body: {
          applicationIds: [shop.applicationId],
          title: 'Names',
          verb: 'POST',
          url: 'http://127.0.0.1:9/names?name=${$name}',
          payload: '{"name": "${$name}"}',
          params: [{ title: 'name', type: 'string' }],
        },
      }),
    );
    await addCampaign(t.admin, shop.applicationId, [rule(['.', 'Session', 'Attributes', 'notifyName'], [['triggerWebhook', w.id, { name: ['.', 'Session', 'Attributes', 'name'] }]], 'name hook')]);
    // JSON's "\ud800": a lone surrogate, text the database cannot store.
    const close = async (id: string, notifyName: boolean) => {
      const res = await fetch(`${t.url}/v2/customer_sessions/${id}`, {
        method: 'PUT',
        headers: { 'Content-Type': 'application/json', Authorization: `ApiKey-v1 ${shop.apiKey}` },
        body: `{"customerSession": {"cartItems": [{"sku": "A", "quantity": 1, "price": 10}], "attributes": {"notifyName": ${notifyName}, "name": "a\\ud800b"}, "state": "closed"}}`,
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const plain = await close('lone-surrogate-0', false);
    expect(plain.status).toBe(400);
    // Rendering the webhook's URL threw a URIError, answered as "A path parameter is not valid percent-encoded UTF-8" on /path.
    expect(await close('lone-surrogate-1', true)).toEqual(plain);
  });

  it('writes a lone surrogate of a URL template value as U+FFFD', () => {
    expect(urlValue('a\ud800b')).toBe(encodeURIComponent('a\ufffdb'));
    // JSON.stringify already writes a lone surrogate of an object as an escape.
    expect(urlValue({ x: '\udc00' })).toBe(encodeURIComponent('{"x":"\\udc00"}'));
    expect(urlValue('😀 ok')).toBe(encodeURIComponent('😀 ok'));
  });
});

describe('review of issue 7: what receivers answer (pglite)', () => {
  let t: TestNode;
  let shop: ShopSetup;
  let rx: RawReceiver;

  beforeAll(async () => {
    rx = await new RawReceiver().start();
    t = await startTestNode('pglite', { outbox: { pollMs: 50, backoffMs: 20, maxBackoffMs: 100, timeoutMs: 1500, leaseMarginMs: 300 } });
    shop = await setupShop(t.url, t.admin);
  });
  afterAll(async () => {
    await t?.stop();
    await rx?.stop();
  });

  const subscribe = async (path: string) =>
    unwrap(
      await t.admin.POST('/v1/applications/{applicationId}/notification_webhooks', {
        params: { path: { applicationId: shop.applicationId } },
        body: { url: `${rx.url}${path}`, headers: [], notificationTypes: ['CouponCreated'] },
      }),
    );
  const createCoupons = async () =>
    unwrap(
      await t.admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons', {
        params: { path: { applicationId: shop.applicationId, campaignId: shop.campaignId }, query: { silent: 'yes' } },
        body: { usageLimit: 1, validCharacters: ['A', 'B', 'C', 'D', 'E', 'F'], couponPattern: 'RV-######', numberOfCoupons: 2 },
      }),
    );
  const outboxOf = async (endpointId: number) =>
    t.node.db.query<{ state: string; attempts: number }>(`SELECT state, attempts FROM outbox WHERE kind = 'notification' AND endpoint_id = $1`, [endpointId]);
  const logsOf = async (endpointId: number) =>
    t.node.db.query<{ status: number | null; response: string }>(`SELECT status, response FROM webhook_logs WHERE kind = 'notification' AND webhook_id = $1 ORDER BY id`, [
      endpointId,
    ]);

  it('records a binary answer (with NUL bytes) once as delivered, and keeps delivering to the others', async () => {
    rx.on('/binary', (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream' });
      res.end(Buffer.from([0x6f, 0x6b, 0x00, 0xff, 0xfe, 0x00, 0x21]));
    });
    const binary = await subscribe('/binary');
    const plain = await subscribe('/plain');
    await createCoupons();
    await eventually(async () => ((await outboxOf(binary.id))[0]?.state === 'sent' ? true : undefined), 10_000);
    expect(await outboxOf(binary.id)).toEqual([{ state: 'sent', attempts: 1 }]);
    const [log] = await logsOf(binary.id);
    expect(log).toEqual({ status: 200, response: 'ok\ufffd\ufffd\ufffd\ufffd!' });
    await eventually(async () => ((await outboxOf(plain.id))[0]?.state === 'sent' ? true : undefined), 10_000);
    // Past the lease of the first attempt: the receiver got it once.
    await sleep(2500);
    expect(rx.to('/binary')).toHaveLength(1);
  });

  it('reads no more of an answer than its log keeps: a 200 whose body never ends is one delivery', async () => {
    rx.on('/endless', (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      // 128 KiB, then the body stays open (as a receiver streaming without end would).
      res.write('x'.repeat(128 * 1024));
    });
    const endless = await subscribe('/endless');
    await createCoupons();
    await eventually(async () => ((await outboxOf(endless.id))[0]?.state === 'sent' ? true : undefined), 10_000);
    expect(await outboxOf(endless.id)).toEqual([{ state: 'sent', attempts: 1 }]);
    const [log] = await logsOf(endless.id);
    expect(log!.status).toBe(200);
    expect(log!.response).toBe('x'.repeat(65_536));
    await sleep(2500);
    expect(rx.to('/endless')).toHaveLength(1);
  });

  it('takes a 200 whose body trickles past the timeout as delivered, with what came of the body', async () => {
    rx.on('/trickle', (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.write('a');
      const timer = setInterval(() => res.write('b'), 300);
      res.on('close', () => clearInterval(timer));
    });
    const trickle = await subscribe('/trickle');
    await createCoupons();
    await eventually(async () => ((await outboxOf(trickle.id))[0]?.state === 'sent' ? true : undefined), 10_000);
    expect(await outboxOf(trickle.id)).toEqual([{ state: 'sent', attempts: 1 }]);
    const [log] = await logsOf(trickle.id);
    expect(log!.status).toBe(200);
    expect(log!.response).toMatch(/^ab+$/);
    await sleep(2500);
    expect(rx.to('/trickle')).toHaveLength(1);
  });
});

describe.runIf(postgresUp)('review of issue 7: two nodes sharing the outbox (postgres)', () => {
  const schema = uniqueName('rv7');
  let a: TestNode;
  let b: TestNode;
  let rx: RawReceiver;

  beforeAll(async () => {
    rx = await new RawReceiver().start();
    // One request in flight per node and a short lease: a request that waits in its round behind
    // a slow one outlives the lease of its claim.
    const outbox = { pollMs: 50, concurrency: 1, batchSize: 3, timeoutMs: 1000, leaseMarginMs: 400, backoffMs: 20, maxBackoffMs: 100 };
    a = await startTestNode('postgres', { dbSchema: schema, outbox });
    b = await startTestNode('postgres', { dbSchema: schema, outbox });
  });
  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    await rx?.stop();
    await dropSchema(schema);
  });

  it('never sends a request that waited in its round past the lease twice', async () => {
    const shop = await setupShop(a.url, a.admin);
    // A slow receiver (within the timeout): each answer takes 900 ms.
    rx.on('/slow', (_req, res) => void setTimeout(() => res.end('ok'), 900));
    unwrap(
      await a.admin.POST('/v1/applications/{applicationId}/notification_webhooks', {
        params: { path: { applicationId: shop.applicationId } },
        body: { url: `${rx.url}/slow`, headers: [], notificationTypes: ['CouponCreated'] },
      }),
    );
    // 2,500 coupons: three CouponCreated pages, written together and claimed by one node.
    unwrap(
      await a.admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons', {
        params: { path: { applicationId: shop.applicationId, campaignId: shop.campaignId }, query: { silent: 'yes' } },
        body: { usageLimit: 1, validCharacters: ['A', 'B', 'C', 'D', 'E', 'F', 'G', 'H'], couponPattern: 'LS-######', numberOfCoupons: 2500 },
      }),
    );
    await eventually(async () => {
      const rows = await a.node.db.query<{ state: string }>(`SELECT state FROM outbox WHERE kind = 'notification'`);
      return rows.length === 3 && rows.every((r) => r.state === 'sent') ? true : undefined;
    }, 20_000);
    await sleep(1500);
    const ids = rx.to('/slow').map((g) => g.id);
    expect(new Set(ids).size).toBe(3);
    expect(ids).toHaveLength(3);
  });
});
