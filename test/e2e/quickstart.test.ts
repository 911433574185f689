import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIntegrationClient, login, unwrap } from '../../sdk/index.js';
import { cart, newApplication, newCampaign, tenPercentOver100 } from '../helpers/fixtures.js';
import { freePort } from '../helpers/node.js';

// Starts the service exactly as the README says (`npm start`, embedded PGlite default), reads the
// generated admin password it prints, and runs the whole flow through the SDK.
describe('npm start (README quick start)', () => {
  let child: ChildProcess;
  let output = '';
  let baseUrl = '';
  const dataDir = mkdtempSync(join(tmpdir(), 'perkline-quickstart-'));

  beforeAll(async () => {
    const port = await freePort();
    const grpcPort = await freePort();
    baseUrl = `http://localhost:${port}`;
    const env: NodeJS.ProcessEnv = { ...process.env, PORT: String(port), GRPC_PORT: String(grpcPort), DATA_DIR: dataDir, LOG_LEVEL: 'warn' };
    for (const k of ['DATABASE_URL', 'NATS_URL', 'ADMIN_PASSWORD', 'ADMIN_EMAIL']) delete env[k];
    child = spawn('npm', ['start'], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    child.stdout!.on('data', (d) => (output += String(d)));
    child.stderr!.on('data', (d) => (output += String(d)));
    const deadline = Date.now() + 150_000;
    while (!/generated password (\S+)/.test(output)) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`service did not start:\n${output}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }, 180_000);

  afterAll(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      process.kill(-child.pid!, 'SIGTERM');
      await exited;
    }
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('prints how to log in, and serves the 10% flow through the SDK', async () => {
    const password = /generated password (\S+)/.exec(output)![1]!;
    expect(output).toContain(`${baseUrl}/v1/sessions`);
    const health = await fetch(`${baseUrl}/readyz`);
    expect(health.status).toBe(200);

    const { client: admin } = await login({ baseUrl, email: 'admin@perkline.local', password, retries: 0 });
    const app = unwrap(await admin.POST('/v1/applications', { body: newApplication() as never }));
    const key = unwrap(
      await admin.POST('/v1/applications/{applicationId}/api_keys', {
        params: { path: { applicationId: app.id } },
        body: { title: 'web shop', expires: new Date(Date.now() + 86_400_000).toISOString() },
      }),
    );
    const campaign = unwrap(await admin.POST('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId: app.id } }, body: newCampaign() as never }));
    unwrap(
      await admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets', {
        params: { path: { applicationId: app.id, campaignId: campaign.id } },
        body: tenPercentOver100() as never,
      }),
    );
    const shop = createIntegrationClient({ baseUrl, apiKey: key.key });
    const state = unwrap(
      await shop.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'readme-1' } },
        body: { customerSession: cart([120]) },
      }),
    );
    expect(state.effects).toEqual([expect.objectContaining({ effectType: 'setDiscount', campaignId: campaign.id, props: { name: '10% off', value: 12 } })]);

    const metrics = await (await fetch(`${baseUrl}/metrics`)).text();
    expect(metrics).toMatch(/perkline_http_requests_total\{route="\/v2\/customer_sessions\/\{customerSessionId\}",method="put",status="200"\} 1/);
  });
});
