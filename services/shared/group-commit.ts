// Group commit in the application: items (writes) that arrive while earlier ones are being
// committed are sent together, so that many requests share one round trip, one wake-up of the
// database and one WAL flush (on a small machine these cost more CPU than the statements).
// An item that finds the database idle starts a batch at once. Only while commits stream in (the
// last batch ended a moment ago) may a small batch wait a little for more (`gather`).

export interface GroupCommitOptions<I, O> {
  /** Commits one item alone. */
  one: (item: I) => Promise<O>;
  /** Commits several together: a result or an error per item, in order. */
  many: (items: I[]) => Promise<Array<O | Error>>;
  /** Most items in one batch (default 64). */
  maxBatch?: number;
  /**
   * Batches committing at once (default 1). More in flight makes smaller batches: on a small
   * machine each statement, commit and wake-up costs more CPU than it saves in waiting (measured
   * with `npm run bench:api`: 1 in flight served 0.45x bare against 0.33x with 4). Two let the
   * next batch go while one waits on a slow commit (the session lane uses two; see sessions.ts).
   */
  maxInFlight?: number;
  /**
   * While commits stream in (the last batch ended less than `busyMs` ago, default 5), a batch of
   * fewer than `items` waits up to `waitMs` (default 1) for more; reaching `items` sends it at once.
   * Without it, under a moderate load every batch is small, and the database pays its fixed cost
   * per statement (executor start, commit, WAL flush, wake-ups) for a few items each time.
   */
  gather?: { items: number; waitMs?: number; busyMs?: number };
}

interface Pending<I, O> {
  item: I;
  resolve: (value: O) => void;
  reject: (error: unknown) => void;
}

/**
 * A batch that fails as a whole (the database refused the statement) is committed again item by
 * item, so one bad item never fails another.
 */
export class GroupCommit<I, O> {
  private readonly queue: Array<Pending<I, O>> = [];
  private inFlight = 0;
  private readonly maxBatch: number;
  private readonly maxInFlight: number;
  /** When the last batch ended (performance.now()), for `gather`. */
  private lastEnded = -Infinity;
  /** The wait of a gathering batch; when it ends the batch goes with what it has. */
  private gathering: NodeJS.Timeout | undefined;

  constructor(private readonly options: GroupCommitOptions<I, O>) {
    this.maxBatch = options.maxBatch ?? 64;
    this.maxInFlight = options.maxInFlight ?? 1;
  }

  commit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    if (this.inFlight >= this.maxInFlight || this.queue.length === 0 || this.waitsForMore()) return;
    this.send();
  }

  /** Sends what is queued, as many batches as may be in flight. */
  private send(): void {
    clearTimeout(this.gathering);
    this.gathering = undefined;
    while (this.inFlight < this.maxInFlight && this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      this.inFlight++;
      void this.run(batch).finally(() => {
        this.lastEnded = performance.now();
        this.inFlight--;
        this.pump();
      });
    }
  }

  /** Whether the next batch waits to gather more items (and its wait is set). */
  private waitsForMore(): boolean {
    const gather = this.options.gather;
    if (!gather || this.queue.length >= gather.items) return false;
    if (performance.now() - this.lastEnded >= (gather.busyMs ?? 5)) return false;
    this.gathering ??= setTimeout(() => this.send(), gather.waitMs ?? 1);
    return true;
  }

  private async run(batch: Array<Pending<I, O>>): Promise<void> {
    const alone = (p: Pending<I, O>) => this.options.one(p.item).then(p.resolve, p.reject);
    if (batch.length === 1) return alone(batch[0]!);
    let results: Array<O | Error>;
    try {
      results = await this.options.many(batch.map((p) => p.item));
    } catch {
      await Promise.all(batch.map(alone));
      return;
    }
    batch.forEach((p, i) => {
      const r = results[i];
      if (r instanceof Error) p.reject(r);
      else p.resolve(r as O);
    });
  }
}
