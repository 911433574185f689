import { AppError } from '../shared/index.js';

export interface RateLimitOptions {
  /** Sustained requests per second per API key (default 1000; 0 disables the limit). */
  ratePerSecond?: number;
  /** Requests a key may send at once after being idle (default 2000, at least 1). */
  burst?: number;
  /** Buckets kept before idle ones are dropped (default 100,000). */
  maxBuckets?: number;
}

interface Bucket {
  tokens: number;
  /** When `tokens` was computed, in ms. */
  at: number;
}

/**
 * Token buckets per API key, refilled continuously from the elapsed time when a key is used: no
 * timer per key and no work while a key is idle. A bucket that has refilled to `burst` is the
 * same as no bucket, so idle buckets are dropped when the map grows (memory stays bounded by the
 * keys active within the last burst/rate seconds, or by maxBuckets).
 */
export class RateLimiter {
  readonly ratePerSecond: number;
  readonly burst: number;
  private readonly maxBuckets: number;
  private readonly perMs: number;
  private readonly buckets = new Map<string | number, Bucket>();
  private nextSweep = 0;

  constructor(options: RateLimitOptions = {}) {
    const rate = options.ratePerSecond ?? 1000;
    const burst = options.burst ?? 2000;
    if (!(rate >= 0) || !Number.isFinite(rate)) throw new Error(`rateLimit.ratePerSecond must be a non-negative number, got ${rate}`);
    if (!(burst >= 0) || !Number.isFinite(burst)) throw new Error(`rateLimit.burst must be a non-negative number, got ${burst}`);
    this.ratePerSecond = rate;
    this.burst = Math.max(1, burst);
    this.perMs = rate / 1000;
    this.maxBuckets = options.maxBuckets ?? 100_000;
  }

  get enabled(): boolean {
    return this.ratePerSecond > 0;
  }

  /** Buckets held now (for tests and metrics). */
  get size(): number {
    return this.buckets.size;
  }

  /**
   * Takes one token for `key`. Returns 0 when the request may pass, otherwise the whole seconds
   * (at least 1) after which one token will be there again.
   */
  take(key: string | number, now: number = performance.now()): number {
    if (this.perMs === 0) return 0;
    let b = this.buckets.get(key);
    if (b === undefined) {
      if (this.buckets.size >= this.maxBuckets || now >= this.nextSweep) this.sweep(now);
      b = { tokens: this.burst, at: now };
      this.buckets.set(key, b);
    } else {
      if (now > b.at) {
        b.tokens = Math.min(this.burst, b.tokens + (now - b.at) * this.perMs);
        b.at = now;
      }
      // Most recently used last: when too many keys are active, the least recently used go first.
      this.buckets.delete(key);
      this.buckets.set(key, b);
    }
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - b.tokens) / this.perMs / 1000));
  }

  /** Drops buckets that have refilled (they hold no information); the oldest too when still full. */
  private sweep(now: number): void {
    // A bucket untouched for burst/rate is full again; sweeping at most that often keeps the cost
    // amortised to O(1) per new key.
    const fullAfterMs = this.burst / this.perMs;
    this.nextSweep = now + Math.max(1000, fullAfterMs);
    for (const [k, b] of this.buckets) if (now - b.at >= fullAfterMs) this.buckets.delete(k);
    // Still too many active keys: forget the least recently used (they get a fresh bucket, at
    // worst one extra burst). Map order is the order of last use.
    if (this.buckets.size >= this.maxBuckets) {
      let excess = this.buckets.size - Math.floor(this.maxBuckets * 0.9);
      for (const k of this.buckets.keys()) {
        if (excess-- <= 0) break;
        this.buckets.delete(k);
      }
    }
  }
}

/** The 429 of the Integration API rate limit; errorMiddleware turns retryAfter into Retry-After. */
export const rateLimited = (retryAfterSeconds: number): AppError => {
  const message = `Rate limit exceeded for this API key; retry after ${retryAfterSeconds} s`;
  return new AppError(
    'too_many_requests',
    message,
    [{ title: 'Too Many Requests', details: message, source: { pointer: '/headers/authorization', parameter: 'Authorization' } }],
    retryAfterSeconds,
  );
};
