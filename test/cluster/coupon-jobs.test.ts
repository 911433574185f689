// SLOW (about a minute or two on the 2-core development machine): two asynchronous creations of
// 1,000,000 coupons each on PostgreSQL, one of them across a node killed mid-job.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { login, unwrap, type ManagementClient } from '../../sdk/index.js';
import { dropSchema } from '../helpers/db.js';
import { newApplication, newCampaign } from '../helpers/fixtures.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, processExited, startNodeProcess, startTestNode, type NodeProcess } from '../helpers/node.js';
import { notificationsAt, sleep, subscribe, waitForNotifications } from '../helpers/notifications.js';
import { Receiver } from '../helpers/receiver.js';
import { postgresUp, TEST_DATABASE_URL, uniqueName } from '../helpers/services.js';
import { eventually } from '../helpers/users.js';

const MILLION = 1_000_000;
const ASYNC = '/v1/applications/{applicationId}/campaigns/{campaignId}/coupons_async' as const;
const JOB = '/v1/applications/{applicationId}/campaigns/{campaignId}/coupons_async/{batchId}' as const;
const body = { usageLimit: 1, validCharacters: [...'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'], couponPattern: 'M-########', numberOfCoupons: MILLION };

/** A node in its own process on the given schema, polling often. */
const startProc = (schema: string, env: Record<string, string> = {}) => startNodeProcess(schema, { OUTBOX_POLL_MS: '50', COUPON_JOB_POLL_MS: '100', ...env });

/** An Application with a campaign and a notification webhook for AsyncCouponsCreated at `${rx.url}${path}`. */
async function place(admin: ManagementClient, rx: Receiver, path: string) {
  const applicationId = unwrap(await admin.POST('/v1/applications', { body: newApplication() as never })).id;
  const campaignId = unwrap(await admin.POST('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId } }, body: newCampaign() as never })).id;
  await subscribe(admin, rx, applicationId, path, ['AsyncCouponsCreated']);
  return { applicationId, campaignId };
}

describe.runIf(postgresUp)('asynchronous coupon creation of 1,000,000 coupons (postgres; SLOW)', () => {
  let rx: Receiver;
  beforeAll(async () => {
    rx = await Receiver.start();
  });
  afterAll(async () => {
    await rx?.stop();
  });

  it('creates 1,000,000 unique coupons in the background and sends one AsyncCouponsCreated', async () => {
    const t = await startTestNode('postgres', { outbox: { pollMs: 50 }, couponJobs: { pollMs: 100 } });
    try {
      const where = await place(t.admin, rx, '/million');
      const started = Date.now();
      const r = await t.admin.POST(ASYNC, { params: { path: where }, body });
      const answeredMs = Date.now() - started;
      expect(r.response.status).toBe(202);
      const batchId = (r.data as { batchId: string }).batchId;
      // Progress is readable while the job runs.
      const progress = await eventually(async () => {
        const j = unwrap(await t.admin.GET(JOB, { params: { path: { ...where, batchId } } }));
        return j.createdCoupons > 0 ? j : undefined;
      }, 120_000);
      expect(progress.createdCoupons).toBeLessThanOrEqual(MILLION);
      const [n] = await waitForNotifications(rx, '/million', 1, 'AsyncCouponsCreated', 300_000);
      const seconds = (Date.now() - started) / 1000;
      console.log(`[coupon-jobs] 1,000,000 coupons created asynchronously in ${seconds.toFixed(1)} s (POST answered in ${answeredMs} ms)`);
      expect(n!.body).toEqual({
        NotificationType: 'AsyncCouponsCreated',
        Operation: 'AsyncCouponsCreated',
        TypeOfChange: 'management_api',
        EmployeeName: 'Admin',
        BatchID: batchId,
        ApplicationID: where.applicationId,
        CampaignID: where.campaignId,
        TotalResultSize: MILLION,
      });
      const job = unwrap(await t.admin.GET(JOB, { params: { path: { ...where, batchId } } }));
      expect(job).toMatchObject({ state: 'done', numberOfCoupons: MILLION, createdCoupons: MILLION });
      const [counts] = await t.node.db.query<{ n: number; distinct: number; pattern: boolean }>(
        `SELECT count(*)::int AS n, count(DISTINCT value)::int AS distinct, bool_and(value ~ '^M-[A-Z0-9]{8}$') AS pattern
           FROM coupons WHERE application_id = $1 AND batch_id = $2`,
        [where.applicationId, batchId],
      );
      expect(counts).toEqual({ n: MILLION, distinct: MILLION, pattern: true });
    } finally {
      await t.stop();
    }
  }, 600_000);

  it('finishes a job on another node when the node working it is killed mid-job, every coupon created once', async () => {
    const schema = uniqueName('cj');
    const procs: NodeProcess[] = [];
    try {
      // A killed node's job goes to another node 3 s after its last chunk.
      const env = { COUPON_JOB_LEASE_MS: '3000' };
      const a = await startProc(schema, env);
      procs.push(a);
      const { client: adminA } = await login({ baseUrl: a.url, email: ADMIN_EMAIL, password: ADMIN_PASSWORD, retries: 0 });
      const where = await place(adminA, rx, '/crash');
      const r = await adminA.POST(ASYNC, { params: { path: where }, body });
      expect(r.response.status).toBe(202);
      const batchId = (r.data as { batchId: string }).batchId;
      const before = await eventually(async () => {
        const j = unwrap(await adminA.GET(JOB, { params: { path: { ...where, batchId } } }));
        return j.createdCoupons >= 100_000 ? j : undefined;
      }, 120_000);
      a.child.kill('SIGKILL');
      await processExited(a);
      expect(before.createdCoupons).toBeLessThan(MILLION);

      const b = await startProc(schema, env);
      procs.push(b);
      const { client: adminB } = await login({ baseUrl: b.url, email: ADMIN_EMAIL, password: ADMIN_PASSWORD, retries: 0 });
      const killedAt = unwrap(await adminB.GET(JOB, { params: { path: { ...where, batchId } } }));
      // What the dead node committed stays; the chunk in flight was rolled back.
      expect(killedAt.createdCoupons).toBeGreaterThanOrEqual(before.createdCoupons);
      expect(killedAt.createdCoupons).toBeLessThan(MILLION);
      await waitForNotifications(rx, '/crash', 1, 'AsyncCouponsCreated', 300_000);
      const job = unwrap(await adminB.GET(JOB, { params: { path: { ...where, batchId } } }));
      expect(job).toMatchObject({ state: 'done', createdCoupons: MILLION });
      const counted = await fetchCounts(schema, where.applicationId, batchId);
      expect(counted).toEqual({ n: MILLION, distinct: MILLION });
      await sleep(500);
      expect(notificationsAt(rx, '/crash')).toHaveLength(1);
      expect(rx.to('/crash')).toHaveLength(1);
    } finally {
      for (const p of procs) {
        if (p.child.exitCode === null && p.child.signalCode === null) {
          p.child.kill('SIGTERM');
          await processExited(p);
        }
      }
      await dropSchema(schema);
    }
  }, 600_000);
});

async function fetchCounts(schema: string, applicationId: number, batchId: string): Promise<{ n: number; distinct: number }> {
  const { default: postgres } = await import('postgres');
  const sql = postgres(TEST_DATABASE_URL, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql.unsafe(
      `SELECT count(*)::int AS n, count(DISTINCT value)::int AS distinct FROM ${schema}.coupons WHERE application_id = $1 AND batch_id = $2`,
      [applicationId, batchId],
    );
    return { n: row!.n as number, distinct: row!.distinct as number };
  } finally {
    await sql.end();
  }
}
