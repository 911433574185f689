// Asynchronous coupon creation (POST .../coupons_async, up to 5,000,000 coupons): the request only
// checks the body and writes a job; the nodes' CouponJobRunners create the coupons in chunks with
// the code of synchronous creation (insertCoupons), each chunk one transaction that also counts
// its coupons in the job, so progress (GET .../coupons_async/{batchId}) is exact and a node that
// dies loses at most the chunk in flight. Jobs are claimed with SKIP LOCKED and a lease like the
// outbox's rows: any node picks up a new job or one whose node died. When the last chunk commits,
// one AsyncCouponsCreated notification with the batch id is written in its transaction.
import { AppError, DispatchLoop, notFound, randomToken, retryDelay } from '../shared/index.js';
import { enqueueNotifications } from '../store/index.js';
import { requireCampaign } from './campaigns.js';
import { compact, iso, outboundWritten, requireApplication, userName, type ManagementContext, type Principal } from './context.js';
import { checkNewCoupons, insertCoupons, type NewCouponsBody } from './coupons.js';

/** Spec "Limits": coupons in one asynchronous creation. */
export const MAX_ASYNC_COUPONS = 5_000_000;

export function couponJobView(r: Record<string, unknown>): Record<string, unknown> {
  return compact({
    batchId: r.batch_id as string,
    applicationId: r.application_id as number,
    campaignId: r.campaign_id as number,
    state: r.state as string,
    numberOfCoupons: r.total as number,
    createdCoupons: r.created_count as number,
    created: iso(r.created),
    updated: iso(r.updated),
    finishedAt: iso(r.finished_at),
    error: (r.error as string | null) ?? undefined,
  });
}

/** POST .../campaigns/{campaignId}/coupons_async: checks the body as synchronous creation does and queues the job (202). */
export async function createCouponsAsync(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, body: NewCouponsBody) {
  const app = await requireApplication(ctx.db, principal, applicationId, 'write');
  await requireCampaign(ctx, applicationId, campaignId);
  checkNewCoupons(app, body, MAX_ASYNC_COUPONS);
  const by = await userName(ctx.db, principal);
  const now = ctx.clock.now().toISOString();
  const [row] = await ctx.db.query(
    `INSERT INTO coupon_jobs (account_id, application_id, campaign_id, batch_id, user_id, employee_name, request, total, created, updated, lease_until)
     SELECT $1, application_id, id, $4, $5, $6, $7::jsonb, $8, $9, $9, $9 FROM campaigns WHERE id = $3 AND application_id = $2
     RETURNING *`,
    [principal.accountId, applicationId, campaignId, randomToken(9), principal.userId, by, JSON.stringify(body), body.numberOfCoupons, now],
  );
  // Deleted by a racing request since it was checked.
  if (!row) throw notFound('Campaign', '/campaignId');
  ctx.couponJobs?.wake?.();
  return couponJobView(row);
}

/** GET .../campaigns/{campaignId}/coupons_async/{batchId} (ext): the job's state and progress. */
export async function getCouponCreationJob(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, batchId: string) {
  await requireApplication(ctx.db, principal, applicationId, 'read');
  await requireCampaign(ctx, applicationId, campaignId);
  const [row] = await ctx.db.query(`SELECT * FROM coupon_jobs WHERE application_id = $1 AND campaign_id = $2 AND batch_id = $3`, [
    applicationId,
    campaignId,
    batchId,
  ]);
  if (!row) throw notFound('Coupon creation job', '/batchId');
  return couponJobView(row);
}

export interface CouponJobRunnerOptions {
  ctx: ManagementContext;
  /** Names this node in its claims. */
  nodeId: string;
  /** How often jobs are looked for (default 1000 ms). */
  pollMs?: number;
  /** Coupons per chunk, each chunk one transaction (default 50,000). */
  chunkSize?: number;
  /**
   * How long a claimed job stays with its node after its last chunk (default 60 s): a node that
   * died leaves its job to the others after this.
   */
  leaseMs?: number;
  /** Failed chunks (other than a refusal, such as a pattern out of free codes) before the job fails (default 10). */
  maxAttempts?: number;
  /** First delay after a failed chunk, doubled each time (default 1000 ms). */
  backoffMs?: number;
}

interface Claimed extends Record<string, unknown> {
  id: string;
  attempts: number;
}

/** Works the coupon jobs: one job at a time on this node, chunk by chunk, until done, lost or stopped. */
export class CouponJobRunner extends DispatchLoop {
  private readonly chunkSize: number;
  private readonly leaseMs: number;
  private readonly maxAttempts: number;
  private readonly backoffMs: number;
  private stopping = false;

  constructor(private readonly options: CouponJobRunnerOptions) {
    super({ logger: options.ctx.logger, pollMs: options.pollMs, name: 'coupon jobs' });
    this.chunkSize = options.chunkSize ?? 50_000;
    this.leaseMs = options.leaseMs ?? 60_000;
    this.maxAttempts = options.maxAttempts ?? 10;
    this.backoffMs = options.backoffMs ?? 1000;
  }

  override async stop(): Promise<void> {
    this.stopping = true;
    await super.stop();
  }

  async runOnce(): Promise<number> {
    const job = await this.claim();
    if (!job) return 0;
    await this.work(job);
    return 1;
  }

  private lease(from = this.options.ctx.clock.now()): string {
    return new Date(from.getTime() + this.leaseMs).toISOString();
  }

  /** The oldest job that is due: new, or left by a node whose lease ran out. */
  private async claim(): Promise<Claimed | undefined> {
    const now = this.options.ctx.clock.now();
    const [job] = await this.options.ctx.db.query<Claimed>(
      `UPDATE coupon_jobs SET claimed_by = $2, lease_until = $3, state = 'running', updated = $1
        WHERE id = (SELECT id FROM coupon_jobs WHERE state IN ('pending', 'running') AND lease_until <= $1
                     ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
        RETURNING id::text, attempts`,
      [now.toISOString(), this.options.nodeId, this.lease(now)],
    );
    return job;
  }

  private async work(job: Claimed): Promise<void> {
    const { ctx } = this.options;
    for (;;) {
      if (this.stopping) {
        // Left to the other nodes (or this one's next start) at once rather than after the lease.
        await this.release(job.id, ctx.clock.now()).catch(() => undefined);
        return;
      }
      try {
        if ((await this.chunk(job.id)) !== 'more') return;
      } catch (e) {
        if (e instanceof AppError && e.kind === 'invalid_argument') {
          await this.fail(job.id, e.message);
          return;
        }
        const attempts = job.attempts + 1;
        ctx.logger.warn('coupon job chunk failed', { job: job.id, attempts, error: String(e) });
        if (attempts >= this.maxAttempts) {
          await this.fail(job.id, 'The coupons could not be created; the coupons of the batch created so far remain').catch(() => undefined);
          return;
        }
        const due = new Date(ctx.clock.now().getTime() + retryDelay(attempts, this.backoffMs, 600_000));
        await this.release(job.id, due, attempts).catch(() => undefined);
        return;
      }
    }
  }

  /**
   * One chunk in one transaction, while this node still holds the job (the row lock keeps other
   * nodes from claiming it meanwhile): its coupons, the job's count and lease, and on the last
   * chunk the job's end and its notification.
   */
  private async chunk(jobId: string): Promise<'more' | 'done' | 'lost'> {
    const { ctx } = this.options;
    let written = 0;
    const step = await ctx.db.transaction(async (tx) => {
      const [job] = await tx.query(`SELECT * FROM coupon_jobs WHERE id = $1 AND claimed_by = $2 AND state = 'running' FOR UPDATE`, [jobId, this.options.nodeId]);
      // Claimed by another node after this one's lease ran out, or deleted with its campaign.
      if (!job) return 'lost' as const;
      const [app] = await tx.query(`SELECT * FROM applications WHERE id = $1`, [job.application_id]);
      const total = job.total as number;
      const count = Math.min(this.chunkSize, total - (job.created_count as number));
      const batch = { applicationId: job.application_id as number, campaignId: job.campaign_id as number, batchId: job.batch_id as string, created: iso(job.created)! };
      if (count > 0) await insertCoupons(tx, app!, job.request as NewCouponsBody, batch, count);
      const now = ctx.clock.now();
      const done = (job.created_count as number) + count >= total;
      await tx.query(
        `UPDATE coupon_jobs SET created_count = created_count + $2, updated = $3, lease_until = $4, state = $5, finished_at = $6, attempts = 0,
           claimed_by = CASE WHEN $5 = 'done' THEN NULL ELSE claimed_by END
          WHERE id = $1`,
        [jobId, count, now.toISOString(), this.lease(now), done ? 'done' : 'running', done ? now.toISOString() : null],
      );
      if (done) {
        const body = {
          NotificationType: 'AsyncCouponsCreated',
          Operation: 'AsyncCouponsCreated',
          TypeOfChange: 'management_api',
          EmployeeName: job.employee_name,
          BatchID: job.batch_id,
          ApplicationID: job.application_id,
          CampaignID: job.campaign_id,
          TotalResultSize: total,
        };
        written = await enqueueNotifications(
          tx,
          { accountId: job.account_id as number, applicationId: batch.applicationId, campaignId: batch.campaignId, notificationType: 'AsyncCouponsCreated', bodies: [body] },
          now,
        );
      }
      return done ? ('done' as const) : ('more' as const);
    });
    outboundWritten(ctx, written);
    return step;
  }

  private async release(jobId: string, due: Date, attempts?: number): Promise<void> {
    await this.options.ctx.db.query(
      `UPDATE coupon_jobs SET claimed_by = NULL, lease_until = $3, attempts = coalesce($4, attempts) WHERE id = $1 AND claimed_by = $2`,
      [jobId, this.options.nodeId, due.toISOString(), attempts ?? null],
    );
  }

  /** The job ends without its coupons: those of the batch created so far stay (DELETE .../coupons?batchId= removes them). */
  private async fail(jobId: string, error: string): Promise<void> {
    const now = this.options.ctx.clock.now().toISOString();
    await this.options.ctx.db.query(
      `UPDATE coupon_jobs SET state = 'failed', error = $3, finished_at = $4, updated = $4, claimed_by = NULL WHERE id = $1 AND claimed_by = $2`,
      [jobId, this.options.nodeId, error, now],
    );
    this.logger.warn('coupon job failed', { job: jobId, error });
  }
}
