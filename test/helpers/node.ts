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
