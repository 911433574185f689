// Background jobs that any node may work (asynchronous coupon creation, strikethrough pricing): a
// use case writes a row in the transaction of its change; every node's runner claims due rows
// with SKIP LOCKED and a lease, the way the outbox's rows are claimed, and works a claimed job
// step by step, each step one transaction that commits only while the node still holds the job
// (the job's row lock keeps other nodes from claiming it meanwhile). A node that dies leaves its
// job to the others once the lease runs out, and they continue from its last step.
//
// A job table has the columns id, state (pending, running, done, failed), error, updated,
// finished_at, claimed_by, lease_until and attempts (see migrations 019 and 020).
import { AppError, DispatchLoop, retryDelay, type Clock, type Logger } from '../shared/index.js';
import type { Db, Queryable, Row } from './db.js';

export interface LeasedJobRunnerOptions {
  db: Db;
  clock: Clock;
  logger: Logger;
  /** Names this node in its claims. */
  nodeId: string;
  /** How often jobs are looked for (default 1000 ms). */
  pollMs?: number;
  /** How long a claimed job stays with its node after its last step (default 60 s): a node that died leaves its job to the others after this. */
  leaseMs?: number;
  /** Failed steps (other than a refusal: an invalid_argument error) before the job fails (default 10). */
  maxAttempts?: number;
  /** First delay after a failed step, doubled each time (default 1000 ms). */
  backoffMs?: number;
}

/** What a step left: more to do, the job done, or the job lost to another node (or deleted). */
export type JobStep = 'more' | 'done' | 'lost';

type Claimed = {
  id: string;
  attempts: number;
};

export abstract class LeasedJobRunner extends DispatchLoop {
  protected readonly db: Db;
  protected readonly clock: Clock;
  protected readonly nodeId: string;
  private readonly leaseMs: number;
  private readonly maxAttempts: number;
  private readonly backoffMs: number;
  private stopping = false;

  /**
   * @param table the job table
   * @param gaveUp the job's error when its steps kept failing
   */
  constructor(
    options: LeasedJobRunnerOptions & { name: string },
    private readonly table: string,
    private readonly gaveUp: string,
  ) {
    super({ logger: options.logger, pollMs: options.pollMs, name: options.name });
    this.db = options.db;
    this.clock = options.clock;
    this.nodeId = options.nodeId;
    this.leaseMs = options.leaseMs ?? 60_000;
    this.maxAttempts = options.maxAttempts ?? 10;
    this.backoffMs = options.backoffMs ?? 1000;
  }

  /** One step of the job (see hold and advance); refusals (invalid_argument) fail the job with their message. */
  protected abstract step(jobId: string): Promise<JobStep>;

  /** A further condition on the claimed row (aliased `j`), e.g. an order among jobs; '' for none. */
  protected claimCondition(): string {
    return '';
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

  protected lease(from = this.clock.now()): string {
    return new Date(from.getTime() + this.leaseMs).toISOString();
  }

  /** The oldest job that is due: new, or left by a node whose lease ran out. */
  private async claim(): Promise<Claimed | undefined> {
    const now = this.clock.now();
    const [job] = await this.db.query<Claimed>(
      `UPDATE ${this.table} SET claimed_by = $2, lease_until = $3, state = 'running', updated = $1
        WHERE id = (SELECT j.id FROM ${this.table} j WHERE j.state IN ('pending', 'running') AND j.lease_until <= $1 ${this.claimCondition()}
                     ORDER BY j.id LIMIT 1 FOR UPDATE SKIP LOCKED)
        RETURNING id::text, attempts`,
      [now.toISOString(), this.nodeId, this.lease(now)],
    );
    return job;
  }

  private async work(job: Claimed): Promise<void> {
    for (;;) {
      if (this.stopping) {
        // Left to the other nodes (or this one's next start) at once rather than after the lease.
        await this.release(job.id, this.clock.now()).catch(() => undefined);
        return;
      }
      try {
        if ((await this.step(job.id)) !== 'more') return;
        // A step that committed set the job's failed attempts back to 0 (advance): a later failure is a first one again.
        job.attempts = 0;
      } catch (e) {
        if (e instanceof AppError && e.kind === 'invalid_argument') {
          await this.fail(job.id, e.message);
          return;
        }
        const attempts = job.attempts + 1;
        this.logger.warn(`${this.table} step failed`, { job: job.id, attempts, error: String(e) });
        if (attempts >= this.maxAttempts) {
          await this.fail(job.id, this.gaveUp).catch(() => undefined);
          return;
        }
        const due = new Date(this.clock.now().getTime() + retryDelay(attempts, this.backoffMs, 600_000));
        await this.release(job.id, due, attempts).catch(() => undefined);
        return;
      }
    }
  }

  /** In a step's transaction, first: the job's row, locked, while this node still holds the job (undefined: lost). */
  protected async hold(tx: Queryable, jobId: string): Promise<Row | undefined> {
    const [job] = await tx.query(`SELECT * FROM ${this.table} WHERE id = $1 AND claimed_by = $2 AND state = 'running' FOR UPDATE`, [jobId, this.nodeId]);
    return job;
  }

  /**
   * In a step's transaction, after hold: the step's progress (columns set to values), a renewed
   * lease, and the job's end when `done`.
   */
  protected async advance(tx: Queryable, jobId: string, done: boolean, progress: Record<string, unknown> = {}): Promise<void> {
    const now = this.clock.now();
    const columns = Object.keys(progress);
    await tx.query(
      `UPDATE ${this.table} SET updated = $2, lease_until = $3, state = $4, finished_at = $5, attempts = 0,
         claimed_by = CASE WHEN $4 = 'done' THEN NULL ELSE claimed_by END
         ${columns.map((c, i) => `, ${c} = $${i + 6}`).join('')}
        WHERE id = $1`,
      [jobId, now.toISOString(), this.lease(now), done ? 'done' : 'running', done ? now.toISOString() : null, ...columns.map((c) => progress[c])],
    );
  }

  private async release(jobId: string, due: Date, attempts?: number): Promise<void> {
    await this.db.query(`UPDATE ${this.table} SET claimed_by = NULL, lease_until = $3, attempts = coalesce($4, attempts) WHERE id = $1 AND claimed_by = $2`, [
      jobId,
      this.nodeId,
      due.toISOString(),
      attempts ?? null,
    ]);
  }

  private async fail(jobId: string, error: string): Promise<void> {
    const now = this.clock.now().toISOString();
    await this.db.query(`UPDATE ${this.table} SET state = 'failed', error = $3, finished_at = $4, updated = $4, claimed_by = NULL WHERE id = $1 AND claimed_by = $2`, [
      jobId,
      this.nodeId,
      error,
      now,
    ]);
    this.logger.warn(`${this.table} job failed`, { job: jobId, error });
  }
}
