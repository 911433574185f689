// Asynchronous coupon creation (POST .../coupons_async, up to 5,000,000 coupons): the request only
// checks the body and writes a job; the nodes' CouponJobRunners create the coupons in chunks with
// the code of synchronous creation (insertCoupons), each chunk one transaction that also counts
// its coupons in the job, so progress (GET .../coupons_async/{batchId}) is exact and a node that
// dies loses at most the chunk in flight. Jobs are claimed with SKIP LOCKED and a lease like the
// outbox's rows: any node picks up a new job or one whose node died. When the last chunk commits,
// one AsyncCouponsCreated notification with the batch id is written in its transaction. The claiming,
// leases and retries are the store's LeasedJobRunner, shared with strikethrough pricing.
import { notFound, randomToken } from '../shared/index.js';
import { enqueueNotifications, LeasedJobRunner, type JobStep, type LeasedJobRunnerOptions } from '../store/index.js';
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

export interface CouponJobRunnerOptions extends Omit<LeasedJobRunnerOptions, 'db' | 'clock' | 'logger'> {
  ctx: ManagementContext;
  /** Coupons per chunk, each chunk one transaction (default 50,000). */
  chunkSize?: number;
}

/** Works the coupon jobs: one job at a time on this node, chunk by chunk, until done, lost or stopped. */
export class CouponJobRunner extends LeasedJobRunner {
  private readonly chunkSize: number;

  constructor(private readonly options: CouponJobRunnerOptions) {
    super(
      { ...options, db: options.ctx.db, clock: options.ctx.clock, logger: options.ctx.logger, name: 'coupon jobs' },
      'coupon_jobs',
      'The coupons could not be created; the coupons of the batch created so far remain',
    );
    this.chunkSize = options.chunkSize ?? 50_000;
  }

  /**
   * One chunk in one transaction, while this node still holds the job: its coupons, the job's
   * count and lease, and on the last chunk the job's end and its notification. A refusal (a
   * pattern out of free codes) fails the job; the coupons of the batch created so far stay
   * (DELETE .../coupons?batchId= removes them).
   */
  protected async step(jobId: string): Promise<JobStep> {
    const { ctx } = this.options;
    let written = 0;
    const step = await ctx.db.transaction(async (tx) => {
      const job = await this.hold(tx, jobId);
      // Claimed by another node after this one's lease ran out, or deleted with its campaign.
      if (!job) return 'lost' as const;
      const [app] = await tx.query(`SELECT * FROM applications WHERE id = $1`, [job.application_id]);
      const total = job.total as number;
      const count = Math.min(this.chunkSize, total - (job.created_count as number));
      const batch = { applicationId: job.application_id as number, campaignId: job.campaign_id as number, batchId: job.batch_id as string, created: iso(job.created)! };
      if (count > 0) await insertCoupons(tx, app!, job.request as NewCouponsBody, batch, count);
      const now = ctx.clock.now();
      const done = (job.created_count as number) + count >= total;
      await this.advance(tx, jobId, done, { created_count: (job.created_count as number) + count });
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
}
