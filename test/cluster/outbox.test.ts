import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIntegrationClient, login, unwrap } from '../../sdk/index.js';
import { enqueueOutbound } from '../../services/store/index.js';
import { dropSchema } from '../helpers/db.js';
import { cart, newApplication } from '../helpers/fixtures.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, processExited, startNodeProcess, startTestNode, type TestNode, type NodeProcess } from '../helpers/node.js';
import { addCampaign, rule } from '../helpers/promotions.js';
import { Receiver } from '../helpers/receiver.js';
import { postgresUp, uniqueName } from '../helpers/services.js';
import { eventually } from '../helpers/users.js';

/** A node in its own process on the given schema, polling often. */
const startProc = (schema: string, env: Record<string, string> = {}) => startNodeProcess(schema, { OUTBOX_POLL_MS: '50', ...env });

describe.runIf(postgresUp)('outbox delivery across node crashes and nodes (postgres)', () => {
  let rx: Receiver;
  beforeAll(async () => {
    rx = await Receiver.start();
  });
  afterAll(async () => {
    await rx?.stop();
  });

  it('delivers a webhook exactly once to a deduplicating receiver when its node dies before the delivery completes', async () => {
    const schema = uniqueName('ob');
    const procs: NodeProcess[] = [];
    try {
      // Attempts may take 3 s; a claimed request goes to another node 0.5 s after that.
      const env = { OUTBOX_TIMEOUT_MS: '3000', OUTBOX_LEASE_MARGIN_MS: '500', OUTBOX_BACKOFF_MS: '50' };
      const a = await startProc(schema, env);
      procs.push(a);
      const { client: admin } = await login({ baseUrl: a.url, email: ADMIN_EMAIL, password: ADMIN_PASSWORD, retries: 0 });
      const app = unwrap(await admin.POST('/v1/applications', { body: newApplication() as never }));
      const key = unwrap(await admin.POST('/v1/applications/{applicationId}/api_keys', { params: { path: { applicationId: app.id } }, body: { title: 'k', expires: new Date(Date.now() + 3600_000).toISOString() } }));
      const w = unwrap(await admin.POST('/v1/webhooks', { body: { applicationIds: [app.id], title: 'CRM', verb: 'POST', url: `${rx.url}/crash`, payload: '{"closed": true}' } as never }));
      await addCampaign(admin, app.id, [rule(true, [['triggerWebhook', w.id, {}]], 'on close')]);
      rx.answer('/crash', 'hold');

      const integration = createIntegrationClient({ baseUrl: a.url, apiKey: key.key, retries: 0 });
      unwrap(await integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'crash-1' } }, body: { customerSession: { ...cart([10]), state: 'closed' } as never } }));
      // The first attempt reached the receiver, which has not answered: the node dies now.
      await eventually(() => (rx.to('/crash').length === 1 ? true : undefined), 10_000);
      a.child.kill('SIGKILL');
      await processExited(a);
      rx.answer('/crash', 200);
      rx.release();

      const b = await startProc(schema, env);
      procs.push(b);
      await eventually(() => (rx.delivered('/crash').size === 1 ? true : undefined), 20_000);
      const received = rx.to('/crash');
      // Sent twice (the first attempt was never answered), with one notification id: one delivery.
      expect(received.length).toBeGreaterThanOrEqual(2);
      expect(new Set(received.map((r) => r.headers['x-notification-id'])).size).toBe(1);
      expect(rx.delivered('/crash').size).toBe(1);
      // The second attempt came from the new node.
      expect(received.at(-1)!.headers['user-agent']).not.toBe(received[0]!.headers['user-agent']);
      await new Promise((r) => setTimeout(r, 500));
      expect(rx.delivered('/crash').size).toBe(1);
    } finally {
      for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGTERM');
      await Promise.all(procs.map(processExited));
      await dropSchema(schema);
    }
  });

  describe('two nodes on one outbox', () => {
    const schema = uniqueName('ob2');
    let a: TestNode;
    let b: TestNode;
    beforeAll(async () => {
      const outbox = { pollMs: 20, batchSize: 20, concurrency: 8 };
      a = await startTestNode('postgres', { dbSchema: schema, outbox });
      b = await startTestNode('postgres', { dbSchema: schema, outbox });
    });
    afterAll(async () => {
      await b?.stop();
      await a?.stop();
      await dropSchema(schema);
    });

    it('delivers each of 1,000 requests exactly once', async () => {
      const app = unwrap(await a.admin.POST('/v1/applications', { body: newApplication() as never }));
      const w = unwrap(await a.admin.POST('/v1/webhooks', { body: { applicationIds: [app.id], title: 'Bulk', verb: 'POST', url: `${rx.url}/bulk` } as never }));
      const [acc] = await a.node.db.query<{ account_id: number }>(`SELECT account_id FROM applications WHERE id = $1`, [app.id]);
      const requests = Array.from({ length: 1000 }, (_, i) => ({
        accountId: acc!.account_id,
        applicationId: app.id,
        kind: 'webhook' as const,
        endpointId: w.id,
        method: 'POST',
        url: `${rx.url}/bulk/${i}`,
        headers: [],
        body: JSON.stringify({ i }),
      }));
      const ids = await a.node.db.transaction((tx) => enqueueOutbound(tx, requests, new Date()));
      expect(new Set(ids).size).toBe(1000);
      await eventually(() => (rx.delivered('/bulk').size === 1000 ? true : undefined), 60_000);
      const received = rx.to('/bulk');
      // Each request went out once, with its own id and body, and both nodes sent some.
      expect(received).toHaveLength(1000);
      expect(new Set(received.map((r) => r.headers['x-notification-id']))).toEqual(new Set(ids));
      expect(new Set(received.map((r) => JSON.parse(r.body).i as number)).size).toBe(1000);
      const senders = new Map<string, number>();
      for (const r of received) senders.set(String(r.headers['user-agent']), (senders.get(String(r.headers['user-agent'])) ?? 0) + 1);
      expect(senders.size).toBe(2);
      // A node marks a row sent after the receiver has answered: the last mark may follow the
      // last delivery by a moment.
      const states = async () =>
        (
          await a.node.db.query<{ pending: number; sent: number }>(
            `SELECT count(*) FILTER (WHERE state = 'pending')::int AS pending, count(*) FILTER (WHERE state = 'sent')::int AS sent FROM outbox`,
          )
        )[0]!;
      await eventually(async () => ((await states()).sent === 1000 ? true : undefined), 10_000).catch(() => undefined);
      expect(await states()).toEqual({ pending: 0, sent: 1000 });
    });
  });
});
