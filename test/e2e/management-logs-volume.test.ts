import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccessLogWriter } from '../../services/management/index.js';
import { createLogger, uuid } from '../../services/shared/index.js';
import { cart } from '../helpers/fixtures.js';
import { createTestDb, type TestDb } from '../helpers/db.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';
import { postgresUp } from '../helpers/services.js';

// Parallel requests against real Postgres: every one is logged exactly once and counted exactly
// once, batches from several writers add up, and what is still queued is written when the node stops.
describe.skipIf(!postgresUp)('access logs under load', () => {
  let store: TestDb;
  let t: TestNode;
  let shop: ShopSetup;
  let accountId: number;

  beforeAll(async () => {
    store = await createTestDb('postgres');
    // No timer flush within the test: only full batches and the stop write anything.
    t = await startTestNode('postgres', { dbSchema: store.schema, accessLog: { flushIntervalMs: 600_000, batchSize: 100 } });
    shop = await setupShop(t.url, t.admin);
    const [row] = await store.db.query<{ account_id: number }>(`SELECT account_id FROM applications WHERE id = $1`, [shop.applicationId]);
    accountId = row!.account_id;
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
    await store?.cleanup();
  });

  const counts = async () => {
    const [row] = await store.db.query<{ counted: string; logged: number; uuids: number }>(
      `SELECT api_call_count::text AS counted,
              (SELECT count(*)::int FROM access_logs WHERE account_id = $1) AS logged,
              (SELECT count(DISTINCT uuid)::int FROM access_logs WHERE account_id = $1) AS uuids
         FROM accounts WHERE id = $1`,
      [accountId],
    );
    return { counted: Number(row!.counted), logged: row!.logged, uuids: row!.uuids };
  };

  it('counts concurrent flushes of several writers exactly', async () => {
    const before = await counts();
    const writers = [0, 1, 2].map(() => new AccessLogWriter({ db: store.db, logger: createLogger({ level: 'silent' }), batchSize: 25, flushIntervalMs: 5 }));
    for (let i = 0; i < 300; i++) {
      writers[i % 3]!.write({
        uuid: uuid(),
        accountId,
        applicationId: shop.applicationId,
        time: new Date(),
        status: 200,
        method: 'GET',
        path: `/w/${i}`,
        requestUri: `/w/${i}`,
      });
    }
    await Promise.all(writers.map((w) => w.close()));
    expect(writers.map((w) => w.stats())).toEqual([0, 1, 2].map(() => ({ queued: 0, written: 100, dropped: 0 })));
    const after = await counts();
    expect(after.logged - before.logged).toBe(300);
    expect(after.counted - before.counted).toBe(300);
  });

  it('logs every one of many parallel requests once, and writes the rest when the node stops', async () => {
    const started = Date.now();
    const sessions = Array.from({ length: 240 }, (_, i) =>
      shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: `vol-${i}` } },
        body: { customerSession: cart([50 + i], { profileId: `vol-p-${i}` }) as never },
      }),
    );
    const reads = Array.from({ length: 40 }, () =>
      t.admin.GET('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId: shop.applicationId } } }),
    );
    const results = await Promise.all([...sessions, ...reads]);
    expect(results.map((r) => r.response.status)).toEqual(results.map(() => 200));
    const elapsed = Date.now() - started;
    // The node's own entries: setupShop's 4 calls and these 280. Full batches of 100 are written
    // on the way; the last partial batch waits for the (here never firing) timer, or the stop.
    const nodeEntries = async () =>
      (await store.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM access_logs WHERE account_id = $1 AND path NOT LIKE '/w/%'`, [accountId]))[0]!.n;
    const midway = await nodeEntries();
    expect(midway).toBeGreaterThanOrEqual(100);
    expect(midway).toBeLessThanOrEqual(200);
    await t.stop();
    expect(await nodeEntries()).toBe(284);
    const rows = await store.db.query<{ path: string; status: number; request_payload: string }>(
      `SELECT path, status, request_payload FROM access_logs WHERE path LIKE '/v2/customer_sessions/vol-%' ORDER BY path`,
    );
    expect(rows.length).toBe(240);
    expect(new Set(rows.map((r) => r.path)).size).toBe(240);
    expect(rows.every((r) => r.status === 200)).toBe(true);
    const one = rows.find((r) => r.path === '/v2/customer_sessions/vol-7')!;
    expect(JSON.parse(one.request_payload)).toEqual({ customerSession: cart([57], { profileId: 'vol-p-7' }) });
    const [reads40] = await store.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM access_logs WHERE method = 'GET' AND request_uri = $1`, [
      `/v1/applications/${shop.applicationId}/campaigns`,
    ]);
    expect(reads40!.n).toBe(40);
    const c = await counts();
    expect(c.counted).toBe(c.logged);
    expect(c.uuids).toBe(c.logged);
    console.log(`[access logs] 280 parallel requests in ${elapsed} ms; ${c.logged} entries in all`);
  });
});
