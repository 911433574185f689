// Group commit in the application: writes that arrive while earlier ones are being committed are
// sent together, pipelined, in one transaction, so that many requests share one WAL flush (on a
// small machine the flush costs more CPU than the statements). Nothing waits on purpose: a write
// that finds no batch in flight starts one at once.
import type { Db, Queryable } from './db.js';

export interface TransactionBatcherOptions {
  /** Most writes in one transaction (default 64). */
  maxBatch?: number;
  /** Batches committing at once (default 4: some execute in the server while others flush). */
  maxInFlight?: number;
}

interface Pending {
  fn: (q: Queryable) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * Runs writes that are each atomic on their own (one statement, or statements whose partial
 * effect is harmless) in shared transactions. A write that throws does not undo the others of
 * its batch unless the database aborted the transaction; then every write of the batch runs
 * again on its own, so one bad write never fails another.
 */
export class TransactionBatcher {
  private readonly queue: Pending[] = [];
  private inFlight = 0;
  private readonly maxBatch: number;
  private readonly maxInFlight: number;

  constructor(
    private readonly db: Db,
    options: TransactionBatcherOptions = {},
  ) {
    this.maxBatch = options.maxBatch ?? 64;
    this.maxInFlight = options.maxInFlight ?? 4;
  }

  run<T>(fn: (q: Queryable) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ fn, resolve: resolve as (v: unknown) => void, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < this.maxInFlight && this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      this.inFlight++;
      void this.commit(batch).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  private async commit(batch: Pending[]): Promise<void> {
    if (batch.length === 1) {
      const [only] = batch;
      await only!.fn(this.db).then(only!.resolve, only!.reject);
      return;
    }
    let outcomes: PromiseSettledResult<unknown>[];
    try {
      // Started together, the statements are pipelined on the transaction's connection.
      outcomes = await this.db.transaction((tx) => Promise.allSettled(batch.map((p) => p.fn(tx))).then(abortIfDatabaseFailed));
    } catch {
      // The transaction was aborted (a statement failed in the database): nothing of it stays.
      // Each write runs again on its own and meets its own fate.
      await Promise.all(batch.map((p) => p.fn(this.db).then(p.resolve, p.reject)));
      return;
    }
    outcomes.forEach((o, i) => (o.status === 'fulfilled' ? batch[i]!.resolve(o.value) : batch[i]!.reject(o.reason)));
  }
}

/** A database error inside the transaction aborted it: the commit must not pretend otherwise. */
function abortIfDatabaseFailed(outcomes: PromiseSettledResult<unknown>[]): PromiseSettledResult<unknown>[] {
  const failed = outcomes.find((o) => o.status === 'rejected' && isDatabaseError(o.reason));
  if (failed) throw (failed as PromiseRejectedResult).reason;
  return outcomes;
}

const isDatabaseError = (e: unknown): boolean =>
  typeof e === 'object' && e !== null && typeof (e as { code?: unknown }).code === 'string' && /^[0-9A-Z]{5}$/.test((e as { code: string }).code);
