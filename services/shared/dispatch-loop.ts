// What every background worker over a table of due rows shares (the outbox and mail dispatchers of
// services/notify, the coupon jobs of services/management): a round runs every pollMs, or at once
// when a use case has just written a row (wake), never two rounds at a time on one node; stop
// waits for the round in flight. Rows are shared between nodes by the claim each worker makes
// (see its runOnce).
import type { Logger } from './logger.js';

export interface DispatchLoopOptions {
  logger: Logger;
  /** How often due rows are looked for (default 1000 ms). */
  pollMs?: number;
  /** What the loop is called in logs. */
  name: string;
}

export abstract class DispatchLoop {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  protected readonly logger: Logger;
  private readonly pollMs: number;
  private readonly name: string;

  constructor(options: DispatchLoopOptions) {
    this.logger = options.logger;
    this.pollMs = options.pollMs ?? 1000;
    this.name = options.name;
  }

  /** One round: claims due rows and handles each; returns how many were handled. */
  abstract runOnce(): Promise<number>;

  start(): void {
    this.timer = setInterval(() => this.wake(), this.pollMs);
    this.timer.unref();
  }

  /** Looks for due rows now (after a use case wrote one) rather than at the next poll. */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.runOnce()
      .then((n) => {
        // A full round may have left more due rows behind it.
        if (n > 0) this.again = true;
      })
      .catch((e: unknown) => this.logger.warn(`${this.name} failed`, { error: String(e) }))
      .then(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }
}

/**
 * Delay before attempt `attempt + 1` after `attempt` failed: base doubled per attempt, capped,
 * with jitter (between half and all of it) so that receivers coming back are not hit by every
 * retry at once.
 */
export function retryDelay(attempt: number, baseMs: number, capMs: number, random: () => number = Math.random): number {
  const full = Math.min(baseMs * 2 ** Math.max(0, attempt - 1), capMs);
  return Math.round(full / 2 + (random() * full) / 2);
}
