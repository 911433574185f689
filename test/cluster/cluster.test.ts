import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from 'nats';
import { createIntegrationClient, login, unwrap, type IntegrationClient } from '../../sdk/index.js';
import { dropSchema } from '../helpers/db.js';
import { setupShop, startTestNode, freePort, type ShopSetup, type TestNode } from '../helpers/node.js';
import { natsUp, postgresUp, TEST_DATABASE_URL, TEST_NATS_URL, uniqueName } from '../helpers/services.js';

const SESSIONS = 500;
const PASSWORD = 'cluster-admin-password';
const mainTs = fileURLToPath(new URL('../../cluster/main.ts', import.meta.url));

interface Proc {
  id: string;
  url: string;
  child: ChildProcess;
  log: string;
}

const payloadOf = (i: number, step: number) =>
  step === 0
    ? { customerSession: { profileId: `p-${i % 97}`, cartItems: [{ sku: `S${i}`, quantity: 1 + (i % 3), price: 10 + (i % 50) * 2.5 }] } }
    : { customerSession: { attributes: { step: 2, i } }, responseContent: ['customerSession'] };

const comparable = (state: Record<string, any>) => ({
  effects: (state.effects as Array<Record<string, unknown>>).map(({ effectType, props, ruleName }) => ({ effectType, props, ruleName })),
  session: state.customerSession && {
    total: state.customerSession.total,
    cartItems: state.customerSession.cartItems,
    attributes: state.customerSession.attributes,
    profileId: state.customerSession.profileId,
    updateCount: state.customerSession.updateCount,
    state: state.customerSession.state,
  },
});

describe.runIf(postgresUp && natsUp)('cluster of 3 nodes on NATS and Postgres', () => {
  const schema = uniqueName('c');
  const clusterName = uniqueName('pl');
  const procs: Proc[] = [];
  let shop: ShopSetup;
  let clients: IntegrationClient[];
  const servedBy = new Map<string, Set<string>>();
  const results = new Map<number, unknown>();

  const startProc = async (id: string): Promise<Proc> => {
    const port = await freePort();
    const grpcPort = await freePort();
    const child = spawn(process.execPath, ['--import', 'tsx', mainTs], {
      env: {
        ...process.env,
        NODE_ID: id,
        PORT: String(port),
        GRPC_PORT: String(grpcPort),
        HOST: '127.0.0.1',
        DATABASE_URL: TEST_DATABASE_URL,
        DB_SCHEMA: schema,
        NATS_URL: TEST_NATS_URL,
        CLUSTER_NAME: clusterName,
        LEASE_TTL_MS: '3000',
        HEARTBEAT_MS: '500',
        ADMIN_EMAIL: 'admin@cluster.local',
        ADMIN_PASSWORD: PASSWORD,
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const p: Proc = { id, url: `http://127.0.0.1:${port}`, child, log: '' };
    child.stdout!.on('data', (d) => (p.log += String(d)));
    child.stderr!.on('data', (d) => (p.log += String(d)));
    return p;
  };

  const waitReady = async (p: Proc) => {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const ok = await fetch(`${p.url}/readyz`).then((r) => r.status === 200, () => false);
      if (ok) return;
      if (Date.now() > deadline || p.child.exitCode !== null) throw new Error(`${p.id} not ready:\n${p.log}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  };

  /** Owned shards per node, from /metrics. */
  const owned = async () =>
    Promise.all(
      procs.map(async (p) => {
        const text = await (await fetch(`${p.url}/metrics`)).text();
        return Number(/^perkline_owned_shards (\d+)$/m.exec(text)?.[1] ?? -1);
      }),
    );

  /**
   * Nodes that join move shards to each other for a few heartbeats after they are ready; the test
   * of ownership starts once every shard has settled with its rendezvous owner.
   */
  const waitSettled = async () => {
    const deadline = Date.now() + 30_000;
    let previous = '';
    for (;;) {
      const counts = await owned();
      const key = counts.join(',');
      if (counts.reduce((a, b) => a + b, 0) === 256 && counts.every((c) => c > 50) && key === previous) return;
      if (Date.now() > deadline) throw new Error(`shards did not settle: ${key}`);
      previous = key;
      await new Promise((r) => setTimeout(r, 1500));
    }
  };

  beforeAll(async () => {
    // Start one node first so that migrations and the admin exist, then two more.
    procs.push(await startProc('node-a'));
    await waitReady(procs[0]!);
    procs.push(await startProc('node-b'), await startProc('node-c'));
    await Promise.all(procs.map(waitReady));
    await waitSettled();
    const { client: admin } = await login({ baseUrl: procs[0]!.url, email: 'admin@cluster.local', password: PASSWORD, retries: 0 });
    shop = await setupShop(procs[0]!.url, admin);
    clients = procs.map((p) => createIntegrationClient({ baseUrl: p.url, apiKey: shop.apiKey, retries: 0 }));
  }, 120_000);

  afterAll(async () => {
    await Promise.all(
      procs.map((p) => {
        if (p.child.exitCode !== null || p.child.signalCode !== null) return undefined;
        const exited = new Promise((r) => p.child.once('exit', r));
        p.child.kill('SIGTERM');
        return exited;
      }),
    );
    if (postgresUp) await dropSchema(schema);
    if (natsUp) {
      const nc = await connect({ servers: TEST_NATS_URL });
      const jsm = await nc.jetstreamManager();
      for (const s of await jsm.streams.list().next()) if (s.config.name.includes(clusterName)) await jsm.streams.delete(s.config.name);
      await nc.close();
    }
  });

  it('serves 500 sessions through random nodes, each owned by exactly one node', async () => {
    const ids = Array.from({ length: SESSIONS }, (_, i) => i);
    const run = async (i: number, step: number) => {
      const client = clients[Math.floor(Math.random() * clients.length)]!;
      const r = await client.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: `cs-${i}` } },
        body: payloadOf(i, step) as never,
      });
      expect(r.response.status, JSON.stringify(r.error)).toBe(200);
      const node = r.response.headers.get('x-perkline-node')!;
      if (!servedBy.has(`cs-${i}`)) servedBy.set(`cs-${i}`, new Set());
      servedBy.get(`cs-${i}`)!.add(node);
      if (step === 1) results.set(i, comparable(r.data as Record<string, unknown>));
    };
    for (const step of [0, 1]) {
      for (let k = 0; k < ids.length; k += 25) await Promise.all(ids.slice(k, k + 25).map((i) => run(i, step)));
    }
    const owners = new Map<string, number>();
    for (const nodes of servedBy.values()) {
      expect(nodes.size).toBe(1);
      const n = [...nodes][0]!;
      owners.set(n, (owners.get(n) ?? 0) + 1);
    }
    expect([...owners.keys()].sort()).toEqual(['node-a', 'node-b', 'node-c']);
    for (const count of owners.values()) expect(count).toBeGreaterThan(SESSIONS / 10);
  });

  it('gives the same results as a single node', async () => {
    const single: TestNode = await startTestNode('pglite');
    try {
      const one = await setupShop(single.url, single.admin);
      for (let i = 0; i < SESSIONS; i += 25) {
        await Promise.all(
          Array.from({ length: 25 }, (_, k) => i + k).map(async (n) => {
            for (const step of [0, 1]) {
              const r = await one.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
                params: { path: { customerSessionId: `cs-${n}` } },
                body: payloadOf(n, step) as never,
              });
              if (step === 1) expect(comparable(r.data as Record<string, unknown>)).toEqual(results.get(n));
            }
          }),
        );
      }
    } finally {
      await single.stop();
    }
  });

  it('drops the caches of every node when a campaign or a key changes', async () => {
    const { client: admin } = await login({ baseUrl: procs[2]!.url, email: 'admin@cluster.local', password: PASSWORD, retries: 0 });
    const update = (client: IntegrationClient, id: string) =>
      client.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: id } }, body: { customerSession: { cartItems: [{ sku: 'X', quantity: 1, price: 200 }] } } });
    // Warm every node's snapshot cache, then disable the campaign through another node.
    for (const [i, c] of clients.entries()) expect((await update(c, `cfg-${i}`)).data?.effects).toHaveLength(1);
    unwrap(
      await admin.PUT('/v1/applications/{applicationId}/campaigns/{campaignId}', {
        params: { path: { applicationId: shop.applicationId, campaignId: shop.campaignId } },
        body: { name: 'Autumn sale', state: 'disabled' },
      }),
    );
    await new Promise((r) => setTimeout(r, 200));
    for (const [i, c] of clients.entries()) expect((await update(c, `cfg-after-${i}`)).data?.effects, `node ${i}`).toEqual([]);
    unwrap(
      await admin.PUT('/v1/applications/{applicationId}/campaigns/{campaignId}', {
        params: { path: { applicationId: shop.applicationId, campaignId: shop.campaignId } },
        body: { name: 'Autumn sale', state: 'enabled' },
      }),
    );
    // A deleted key stops working on every node.
    const key = unwrap(
      await admin.POST('/v1/applications/{applicationId}/api_keys', {
        params: { path: { applicationId: shop.applicationId } },
        body: { title: 'short', expires: new Date(Date.now() + 3_600_000).toISOString() },
      }),
    );
    const keyed = procs.map((p) => createIntegrationClient({ baseUrl: p.url, apiKey: key.key, retries: 0 }));
    for (const [i, c] of keyed.entries()) expect((await update(c, `key-${i}`)).response.status).toBe(200);
    expect((await admin.DELETE('/v1/applications/{applicationId}/api_keys/{keyId}', { params: { path: { applicationId: shop.applicationId, keyId: key.id } } })).response.status).toBe(204);
    await new Promise((r) => setTimeout(r, 200));
    for (const [i, c] of keyed.entries()) expect((await update(c, `key-after-${i}`)).response.status, `node ${i}`).toBe(401);
  });

  it('serves every session again within 10 s after a node is killed, with its state intact', async () => {
    const victim = procs[1]!;
    const survivors = procs.filter((p) => p !== victim).map((p) => createIntegrationClient({ baseUrl: p.url, apiKey: shop.apiKey, retries: 0 }));
    victim.child.kill('SIGKILL');
    const killedAt = Date.now();
    const pending = new Set(Array.from({ length: SESSIONS }, (_, i) => i));
    while (pending.size > 0 && Date.now() - killedAt < 10_000) {
      await Promise.all(
        [...pending].map(async (i) => {
          const r = await survivors[i % survivors.length]!.GET('/v2/customer_sessions/{customerSessionId}', {
            params: { path: { customerSessionId: `cs-${i}` } },
          });
          if (r.response.status !== 200) return;
          const s = r.data!.customerSession;
          expect(s.updateCount).toBe(2);
          expect({ total: s.total, attributes: s.attributes }).toEqual({
            total: (results.get(i) as { session: { total: number } }).session.total,
            attributes: { step: 2, i },
          });
          expect(r.response.headers.get('x-perkline-node')).not.toBe(victim.id);
          pending.delete(i);
        }),
      );
    }
    const elapsed = Date.now() - killedAt;
    console.log(`every session served again ${elapsed} ms after the kill`);
    expect(pending.size).toBe(0);
    expect(elapsed).toBeLessThan(10_000);
    // Writes work again too, on the new owners.
    const w = await survivors[0]!.PUT('/v2/customer_sessions/{customerSessionId}', {
      params: { path: { customerSessionId: 'cs-0' } },
      body: { customerSession: { attributes: { after: true } }, responseContent: ['customerSession'] },
    });
    expect(w.response.status).toBe(200);
    expect(w.data!.customerSession!.updateCount).toBe(3);
  });
});
