import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startNode, type NodeOptions, type RunningNode } from '../../cluster/index.js';
import { createIntegrationClient, createManagementClient, login, unwrap, type IntegrationClient, type ManagementClient } from '../../sdk/index.js';
import type { Clock } from '../../services/shared/index.js';
import { dropSchema, type AdapterName } from './db.js';
import { TEST_DATABASE_URL, uniqueName } from './services.js';
import { newApplication, newCampaign, tenPercentOver100 } from './fixtures.js';

export const ADMIN_EMAIL = 'admin@test.local';
export const ADMIN_PASSWORD = 'correct horse battery staple';

export interface TestNode {
  node: RunningNode;
  url: string;
  admin: ManagementClient;
  adminToken: string;
  stop(): Promise<void>;
}

/** A node in this process on free ports, with a fresh database of the chosen adapter. */
export async function startTestNode(adapter: AdapterName = 'pglite', overrides: Partial<NodeOptions> = {}): Promise<TestNode> {
  const schema = adapter === 'postgres' ? (overrides.dbSchema ?? uniqueName('n')) : undefined;
  const node = await startNode({
    httpPort: 0,
    grpcPort: 0,
    host: '127.0.0.1',
    adminEmail: ADMIN_EMAIL,
    adminPassword: ADMIN_PASSWORD,
    logLevel: 'warn',
    ...(adapter === 'postgres' ? { databaseUrl: TEST_DATABASE_URL, dbSchema: schema } : { dataDir: 'memory://' }),
    ...overrides,
  });
  const { client, token } = await login({ baseUrl: node.httpUrl, email: ADMIN_EMAIL, password: ADMIN_PASSWORD, retries: 0 });
  return {
    node,
    url: node.httpUrl,
    admin: client,
    adminToken: token,
    stop: async () => {
      await node.stop();
      if (schema && !overrides.dbSchema) await dropSchema(schema);
    },
  };
}

export interface ShopSetup {
  applicationId: number;
  campaignId: number;
  rulesetId: number;
  apiKey: string;
  integration: IntegrationClient;
}

/** An Application with an API key and one campaign running the given ruleset (default 10% over 100). */
export async function setupShop(
  baseUrl: string,
  admin: ManagementClient,
  options: { ruleset?: Record<string, unknown>; application?: Record<string, unknown>; retries?: number } = {},
): Promise<ShopSetup> {
  const app = unwrap(await admin.POST('/v1/applications', { body: newApplication(options.application) as never }));
  const key = unwrap(
    await admin.POST('/v1/applications/{applicationId}/api_keys', {
      params: { path: { applicationId: app.id } },
      body: { title: 'shop', expires: new Date(Date.now() + 24 * 3600 * 1000).toISOString() },
    }),
  );
  const campaign = unwrap(
    await admin.POST('/v1/applications/{applicationId}/campaigns', {
      params: { path: { applicationId: app.id } },
      body: newCampaign() as never,
    }),
  );
  const ruleset = unwrap(
    await admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets', {
      params: { path: { applicationId: app.id, campaignId: campaign.id } },
      body: (options.ruleset ?? tenPercentOver100()) as never,
    }),
  );
  return {
    applicationId: app.id,
    campaignId: campaign.id,
    rulesetId: ruleset.id,
    apiKey: key.key,
    integration: createIntegrationClient({ baseUrl, apiKey: key.key, retries: options.retries ?? 0 }),
  };
}

export { createIntegrationClient, createManagementClient, unwrap };

/** A clock tests can move. */
export class TestClock implements Clock {
  private offsetMs = 0;
  now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }
  advance(ms: number): void {
    this.offsetMs += ms;
  }
}

/** A free TCP port on loopback. */
export async function freePort(): Promise<number> {
  const net = await import('node:net');
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/** A node in its own process, started by `startNodeProcess`. */
export interface NodeProcess {
  url: string;
  child: ChildProcess;
  /** What it printed (stdout and stderr), for failure messages. */
  log: string;
}

/**
 * A node in its own process (so that it can be killed as a crash would) on PostgreSQL in the given
 * schema, with the admin of `ADMIN_EMAIL`/`ADMIN_PASSWORD`; `env` adds or overrides settings.
 * Resolves once `/readyz` answers 200.
 */
export async function startNodeProcess(schema: string, env: Record<string, string> = {}): Promise<NodeProcess> {
  const mainTs = fileURLToPath(new URL('../../cluster/main.ts', import.meta.url));
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', mainTs], {
    env: {
      ...process.env,
      PORT: String(port),
      GRPC_PORT: String(await freePort()),
      HOST: '127.0.0.1',
      DATABASE_URL: TEST_DATABASE_URL,
      DB_SCHEMA: schema,
      ADMIN_EMAIL,
      ADMIN_PASSWORD,
      LOG_LEVEL: 'warn',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const p: NodeProcess = { url: `http://127.0.0.1:${port}`, child, log: '' };
  child.stdout!.on('data', (d) => (p.log += String(d)));
  child.stderr!.on('data', (d) => (p.log += String(d)));
  const deadline = Date.now() + 60_000;
  for (;;) {
    const ok = await fetch(`${p.url}/readyz`).then((r) => r.status === 200, () => false);
    if (ok) return p;
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`node not ready:\n${p.log}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Resolves when the node's process has exited (at once if it already has). */
export const processExited = (p: NodeProcess): Promise<void> =>
  new Promise<void>((resolve) => (p.child.exitCode !== null || p.child.signalCode !== null ? resolve() : p.child.once('exit', () => resolve())));
