import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, systemClock } from '../../services/shared/index.js';
import { LeasedJobRunner, type JobStep } from '../../services/store/index.js';
import { createTestDb, type TestDb } from '../helpers/db.js';

/** A job runner whose steps follow a script: 'ok' (more to do), 'done', or 'fail' (a transient error). */
class ScriptedRunner extends LeasedJobRunner {
  readonly ran: string[] = [];
  constructor(t: TestDb, private readonly script: Array<'ok' | 'done' | 'fail'>, maxAttempts: number) {
    super({ db: t.db, clock: systemClock, logger: createLogger({ level: 'silent' }), nodeId: 'n1', maxAttempts, backoffMs: 0, name: 'test jobs' }, 'test_jobs', 'gave up');
  }
  protected async step(jobId: string): Promise<JobStep> {
    const next = this.script[this.ran.length] ?? 'done';
    this.ran.push(next);
    if (next === 'fail') throw new Error('transient');
    return this.db.transaction(async (tx) => {
      if (!(await this.hold(tx, jobId))) return 'lost';
      await this.advance(tx, jobId, next === 'done');
      return next === 'done' ? 'done' : 'more';
    });
  }
}

describe('leased job runner', () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb('pglite');
    await t.db.exec(`CREATE TABLE test_jobs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, state text NOT NULL DEFAULT 'pending',
      error text, updated timestamptz, finished_at timestamptz, claimed_by text, lease_until timestamptz NOT NULL DEFAULT now(), attempts int NOT NULL DEFAULT 0)`);
  });
  afterAll(async () => {
    await t?.cleanup();
  });

  const runUntilIdle = async (r: ScriptedRunner) => {
    for (let i = 0; i < 20 && (await r.runOnce()) > 0; i++);
  };

  it('counts the failures of a job since its last committed step, not since it was claimed', async () => {
    await t.db.query(`INSERT INTO test_jobs DEFAULT VALUES`);
    // With 2 attempts allowed: a failure, a step, a failure, then the rest. Each failure follows a
    // committed step or the start, so none is a second one in a row and the job completes.
    const r = new ScriptedRunner(t, ['fail', 'ok', 'fail', 'ok', 'done'], 2);
    await runUntilIdle(r);
    expect(r.ran).toEqual(['fail', 'ok', 'fail', 'ok', 'done']);
    const [job] = await t.db.query<{ state: string; attempts: number }>(`SELECT state, attempts FROM test_jobs`);
    expect(job).toEqual({ state: 'done', attempts: 0 });
  });

  it('fails a job whose steps keep failing', async () => {
    await t.db.query(`DELETE FROM test_jobs`);
    await t.db.query(`INSERT INTO test_jobs DEFAULT VALUES`);
    const r = new ScriptedRunner(t, ['ok', 'fail', 'fail', 'fail'], 2);
    await runUntilIdle(r);
    expect(r.ran).toEqual(['ok', 'fail', 'fail']);
    const [job] = await t.db.query<{ state: string; error: string }>(`SELECT state, error FROM test_jobs`);
    expect(job).toEqual({ state: 'failed', error: 'gave up' });
  });
});
