import { tooManyConcurrent } from '../shared/index.js';

export interface ActorHostOptions {
  /** Calls allowed per key at once: one running plus this many waiting (spec: 2). */
  maxQueued?: number;
  /** Entity named in the 409 message. */
  entity?: (key: string) => 'session' | 'profile' | 'profile/session';
  /** Most cached states kept (least recently used are dropped first). Default 50,000. */
  cacheSize?: number;
  /**
   * Test hook: awaited before each admitted call runs, while it holds its actor. Lets a test keep an
   * actor busy to observe queueing and 409s. Never set in production.
   */
  beforeRun?: (key: string) => Promise<void>;
}

interface Mailbox {
  running: boolean;
  queue: Array<() => void>;
}

interface CacheEntry {
  shard: number;
  value: unknown;
}

/**
 * Keyed actors: one mailbox per integration ID. One call runs at a time per key, up to `maxQueued`
 * wait, and a further call is refused with the spec's 409. Each actor may keep the state it owns
 * in a cache that is written through by its caller and dropped when its shard moves away.
 */
export class ActorHost {
  private readonly mailboxes = new Map<string, Mailbox>();
  private readonly cache = new Map<string, CacheEntry>();
  private readonly maxQueued: number;
  private readonly cacheSize: number;
  private readonly entity: (key: string) => 'session' | 'profile' | 'profile/session';
  private readonly beforeRun: ((key: string) => Promise<void>) | undefined;
  private active = 0;
  private queued = 0;

  constructor(options: ActorHostOptions = {}) {
    this.maxQueued = options.maxQueued ?? 2;
    this.cacheSize = options.cacheSize ?? 50_000;
    this.entity = options.entity ?? (() => 'session');
    this.beforeRun = options.beforeRun;
  }

  /** Calls being processed now, over all keys. */
  get activeCount(): number {
    return this.active;
  }

  /** Calls waiting behind another call of their key, over all keys. */
  get queueDepth(): number {
    return this.queued;
  }

  get cachedCount(): number {
    return this.cache.size;
  }

  /** Runs fn as the actor of key: serialised with every other call of the same key. */
  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    let box = this.mailboxes.get(key);
    if (!box) {
      box = { running: false, queue: [] };
      this.mailboxes.set(key, box);
    }
    if (box.running) {
      if (box.queue.length >= this.maxQueued) throw tooManyConcurrent(this.entity(key));
      this.queued++;
      await new Promise<void>((resolve) => box!.queue.push(resolve));
      this.queued--;
    }
    box.running = true;
    this.active++;
    try {
      if (this.beforeRun) await this.beforeRun(key);
      return await fn();
    } finally {
      this.active--;
      const next = box.queue.shift();
      if (next) next();
      else {
        box.running = false;
        this.mailboxes.delete(key);
      }
    }
  }

  /** Resolves when no call of any key in the shard runs or waits (used before a shard moves). */
  async drain(isInShard: (key: string) => boolean, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ([...this.mailboxes.keys()].some(isInShard) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  getCached<T>(key: string): T | undefined {
    const entry = this.cache.get(key);
    if (!entry) return undefined;
    // Refresh recency: Map keeps insertion order, so the first key is the least recently used.
    this.cache.delete(key);
    this.cache.set(key, entry);
    return entry.value as T;
  }

  setCached(key: string, shard: number, value: unknown): void {
    this.cache.delete(key);
    this.cache.set(key, { shard, value });
    if (this.cache.size > this.cacheSize) {
      const oldest = this.cache.keys().next().value;
      if (oldest !== undefined) this.cache.delete(oldest);
    }
  }

  dropCached(key: string): void {
    this.cache.delete(key);
  }

  dropCachedWhere(matches: (key: string) => boolean): void {
    for (const key of this.cache.keys()) if (matches(key)) this.cache.delete(key);
  }

  /** Forgets every cached state of a shard: another node may change it from now on. */
  dropShard(shard: number): void {
    for (const [key, entry] of this.cache) if (entry.shard === shard) this.cache.delete(key);
  }
}
