import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unwrap } from '../../sdk/index.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';
import { postgresUp } from '../helpers/services.js';

const adapter = postgresUp ? 'postgres' : 'pglite';
const MESSAGE = 'Too many requests are updating this session at the same time';

describe(`session actors (${adapter})`, () => {
  let t: TestNode;
  let shop: ShopSetup;
  let release: (() => void) | undefined;
  let held: Promise<void> | undefined;

  beforeAll(async () => {
    t = await startTestNode(adapter, {
      // Holds the actor of any session whose ID starts with "busy" until the test releases it.
      actorBeforeRun: async (key) => {
        if (key.includes(':busy') && held) await held;
      },
    });
    shop = await setupShop(t.url, t.admin);
  });
  afterAll(async () => {
    await t?.stop();
  });

  const update = (id: string, attributes: Record<string, unknown>) =>
    shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
      params: { path: { customerSessionId: id } },
      body: { customerSession: { attributes } },
    });

  it('runs one update, queues two and refuses the rest with 409 while the actor is busy', async () => {
    held = new Promise((r) => (release = r));
    const calls = Array.from({ length: 6 }, (_, i) => update('busy-1', { [`k${i}`]: i }));
    const settled: Array<{ status: number; body: unknown }> = [];
    const tracked = calls.map((c) => c.then((r) => (settled.push({ status: r.response.status, body: r.error ?? r.data }), r)));
    // The three refusals come back while the actor is still held.
    for (let i = 0; i < 400 && settled.length < 3; i++) await new Promise((r) => setTimeout(r, 10));
    expect(settled.map((s) => s.status)).toEqual([409, 409, 409]);
    release!();
    held = undefined;
    const all = await Promise.all(tracked);
    const statuses = all.map((r) => r.response.status).sort();
    expect(statuses).toEqual([200, 200, 200, 409, 409, 409]);
    for (const r of all.filter((x) => x.response.status === 409)) {
      expect(r.error).toMatchObject({ message: MESSAGE, StatusCode: 409 });
    }
    const read = unwrap(await shop.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'busy-1' } } }));
    expect(read.customerSession.updateCount).toBe(3);
  });

  it('loses no update under parallel load: updateCount equals the successes', async () => {
    const n = 40;
    const all = await Promise.all(Array.from({ length: n }, (_, i) => update('race-1', { [`k${i}`]: i })));
    const ok = all.map((r, i) => [r.response.status, i] as const).filter(([s]) => s === 200).map(([, i]) => i);
    const refused = all.filter((r) => r.response.status === 409).length;
    expect(ok.length + refused).toBe(n);
    expect(ok.length).toBeGreaterThanOrEqual(3);
    const read = unwrap(await shop.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'race-1' } } }));
    expect(read.customerSession.updateCount).toBe(ok.length);
    expect(Object.keys(read.customerSession.attributes ?? {}).sort()).toEqual(ok.map((i) => `k${i}`).sort());
  });

  it('serves reads while a write holds the actor', async () => {
    unwrap(await update('busy-read', { v: 1 }));
    held = new Promise((r) => (release = r));
    const write = update('busy-read', { v: 2 });
    await new Promise((r) => setTimeout(r, 50));
    const read = unwrap(await shop.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'busy-read' } } }));
    expect(read.customerSession.attributes).toEqual({ v: 1 });
    release!();
    held = undefined;
    expect((await write).response.status).toBe(200);
  });
});
