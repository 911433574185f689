// Sends the HTTP requests of the outbox (rule-triggered webhooks and notifications) at least once,
// with the delivery rules of the addendum: 10 attempts with exponential backoff (1 s doubling,
// capped at 1 h, with jitter); 2xx is success; a 4xx other than 408/429 stops; every attempt is
// a webhook log entry; `X-Notification-Id` on every request and `X-Signature` when the endpoint
// has a secret.
import { createHmac } from 'node:crypto';
import { DispatchLoop, retryDelay, type Clock, type Logger } from '../shared/index.js';
import type { Db } from '../store/index.js';

export interface OutboxDispatcherOptions {
  db: Db;
  clock: Clock;
  logger: Logger;
  /** How often due requests are looked for (default 1000 ms). */
  pollMs?: number;
  /** Attempts before a request is given up (default 10). */
  maxAttempts?: number;
  /** First retry delay, doubled each attempt (default 1000 ms). */
  backoffMs?: number;
  /** Longest retry delay (default 1 h). */
  maxBackoffMs?: number;
  /** Time a receiver has to answer one attempt (default 10 s). */
  timeoutMs?: number;
  /**
   * How long past the timeout a claimed request stays with the node that claimed it (default
   * 30 s): a node that died mid-attempt leaves it to the others after timeout + this.
   */
  leaseMarginMs?: number;
  /** Requests claimed per round (default 50). */
  batchSize?: number;
  /** Requests in flight at once on this node (default 16). */
  concurrency?: number;
  /** Characters of a response body kept in its log entry (default 64 KiB). */
  maxLoggedResponse?: number;
  /** The User-Agent of every request (default `Perkline`); the node entry adds the node's id. */
  userAgent?: string;
}

interface Claimed extends Record<string, unknown> {
  id: string;
  notification_id: string;
  application_id: number | null;
  kind: 'webhook' | 'notification';
  endpoint_id: number;
  campaign_id: number | null;
  integration_request_uuid: string;
  notification_type: string;
  method: string;
  url: string;
  headers: string[];
  body: string;
  attempts: number;
  secret: string | null;
  /** The endpoint still exists and is enabled. */
  endpoint_ok: boolean;
}

interface Attempt {
  status: number | null;
  response: string;
  error?: string;
  requestTime: Date;
  responseTime: Date;
  sentHeaders: Record<string, string>;
}

/** What an answer means for the request: done, try again later, or never again. */
const outcomeOf = (status: number | null): 'sent' | 'retry' | 'stop' => {
  if (status !== null && status >= 200 && status < 300) return 'sent';
  if (status !== null && status >= 400 && status < 500 && status !== 408 && status !== 429) return 'stop';
  return 'retry';
};

/**
 * Claims due requests with `FOR UPDATE SKIP LOCKED`, moving each one's next attempt past the
 * timeout (a lease): several nodes share the outbox without sending a request twice, and a node
 * that dies mid-attempt leaves its requests to the others once the lease ends. The attempt's log
 * entry and the request's new state are written by one statement after the receiver answered.
 */
export class OutboxDispatcher extends DispatchLoop {
  private readonly maxAttempts: number;
  private readonly backoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly timeoutMs: number;
  private readonly leaseMarginMs: number;
  private readonly batchSize: number;
  private readonly concurrency: number;
  private readonly maxLoggedResponse: number;
  /** Aborted by stop: attempts in flight end at once, unrecorded (their lease lets another node retry). */
  private readonly stopping = new AbortController();

  constructor(private readonly options: OutboxDispatcherOptions) {
    super({ logger: options.logger, pollMs: options.pollMs, name: 'outbox dispatch' });
    this.maxAttempts = options.maxAttempts ?? 10;
    this.backoffMs = options.backoffMs ?? 1000;
    this.maxBackoffMs = options.maxBackoffMs ?? 3600_000;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.leaseMarginMs = options.leaseMarginMs ?? 30_000;
    this.batchSize = options.batchSize ?? 50;
    this.concurrency = options.concurrency ?? 16;
    this.maxLoggedResponse = options.maxLoggedResponse ?? 65_536;
  }

  override async stop(): Promise<void> {
    this.stopping.abort();
    await super.stop();
  }

  async runOnce(): Promise<number> {
    const { db, clock } = this.options;
    const now = clock.now();
    // The lease outlasts an attempt (timeout) with room for writing its outcome.
    const lease = new Date(now.getTime() + this.timeoutMs + this.leaseMarginMs);
    const claimed = await db.query<Claimed>(
      `WITH c AS (
         UPDATE outbox o SET attempts = o.attempts + 1, next_attempt_at = $2
          WHERE o.id IN (SELECT id FROM outbox WHERE state = 'pending' AND next_attempt_at <= $1
                          ORDER BY next_attempt_at, id LIMIT ${this.batchSize} FOR UPDATE SKIP LOCKED)
            AND o.state = 'pending'
         RETURNING o.*
       )
       SELECT c.id::text, c.notification_id::text, c.application_id, c.kind, c.endpoint_id, c.campaign_id, c.integration_request_uuid,
              c.notification_type, c.method, c.url, c.headers, c.body, c.attempts,
              CASE c.kind WHEN 'webhook' THEN w.secret ELSE n.secret END AS secret,
              CASE c.kind WHEN 'webhook' THEN coalesce(w.enabled, false) ELSE coalesce(n.enabled, false) END AS endpoint_ok
         FROM c
         LEFT JOIN webhooks w ON c.kind = 'webhook' AND w.id = c.endpoint_id
         LEFT JOIN notification_webhooks n ON c.kind = 'notification' AND n.id = c.endpoint_id
        ORDER BY c.id`,
      [now.toISOString(), lease.toISOString()],
    );
    let next = 0;
    const worker = async () => {
      while (next < claimed.length && !this.stopping.signal.aborted) {
        const row = claimed[next++]!;
        // One request that cannot be recorded must not end the round for the others: it is tried
        // again once its lease ends, like a request whose node died.
        await this.attempt(row, now.getTime()).catch((e: unknown) =>
          this.logger.warn('outbound request not recorded', { id: row.notification_id, kind: row.kind, endpoint: row.endpoint_id, error: String(e) }),
        );
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.concurrency, claimed.length) }, worker));
    return claimed.length;
  }

  /**
   * Keeps the request for the attempt about to start. The claim's lease covers one attempt, but a
   * request waits in its round behind others (a batch of 50 on 16 workers, each up to the
   * timeout): one that starts late gets a new lease first, only if it is still this claim's (the
   * claim's attempt count fences it); false: another node claimed it meanwhile, and it is left.
   */
  private async keepLease(row: Claimed, claimedAt: number): Promise<boolean> {
    const now = this.options.clock.now().getTime();
    if (now <= claimedAt + this.leaseMarginMs / 2) return true;
    const kept = await this.options.db.query(`UPDATE outbox SET next_attempt_at = $2 WHERE id = $1 AND attempts = $3 AND state = 'pending' RETURNING 1`, [
      row.id,
      new Date(now + this.timeoutMs + this.leaseMarginMs).toISOString(),
      row.attempts,
    ]);
    return kept.length > 0;
  }

  private async attempt(row: Claimed, claimedAt: number): Promise<void> {
    const { db, clock } = this.options;
    if (!row.endpoint_ok) {
      // Deleted or disabled since the request was written: it is not sent.
      await db.query(`UPDATE outbox SET state = 'failed', finished_at = $2, last_error = $3 WHERE id = $1 AND attempts = $4`, [
        row.id,
        clock.now().toISOString(),
        'endpoint deleted or disabled before delivery',
        row.attempts,
      ]);
      this.logger.info('outbound request dropped: endpoint deleted or disabled', { id: row.notification_id, kind: row.kind, endpoint: row.endpoint_id });
      return;
    }
    if (!(await this.keepLease(row, claimedAt))) return;
    const result = await this.send(row);
    if (this.stopping.signal.aborted) return;
    const outcome = outcomeOf(result.status);
    const finished = clock.now();
    const givenUp = outcome === 'stop' || (outcome === 'retry' && row.attempts >= this.maxAttempts);
    const state = outcome === 'sent' ? 'sent' : givenUp ? 'failed' : 'pending';
    const nextAttempt = state === 'pending' ? new Date(finished.getTime() + retryDelay(row.attempts, this.backoffMs, this.maxBackoffMs)) : finished;
    const error = outcome === 'sent' ? null : (result.error ?? `HTTP ${result.status}`).slice(0, 500);
    const request = { url: row.url, method: row.method, headers: result.sentHeaders, body: row.body };
    await db.query(
      `WITH log AS (
         INSERT INTO webhook_logs (application_id, webhook_id, campaign_id, integration_request_uuid, request, request_time, response,
           response_time, status, url, attempt, kind, notification_id)
         SELECT $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10, $11, $12, $13, $14::uuid
          WHERE EXISTS (SELECT 1 FROM applications WHERE id = $2)
       )
       UPDATE outbox SET state = $15, next_attempt_at = $16, last_error = $17, finished_at = CASE WHEN $15 = 'pending' THEN NULL ELSE $9::timestamptz END
        WHERE id = $1 AND attempts = $18`,
      [
        row.id,
        row.application_id,
        row.endpoint_id,
        row.campaign_id,
        row.integration_request_uuid,
        JSON.stringify(request),
        result.requestTime.toISOString(),
        result.response.slice(0, this.maxLoggedResponse),
        result.responseTime.toISOString(),
        result.status,
        row.url,
        row.attempts,
        row.kind,
        row.notification_id,
        state,
        nextAttempt.toISOString(),
        error,
        // Only while the request is still this claim's: a later claim (another node's, after a
        // lease that ran out) owns its state now; this attempt is logged all the same.
        row.attempts,
      ],
    );
    if (givenUp) {
      this.logger.warn('outbound request given up', { id: row.notification_id, kind: row.kind, endpoint: row.endpoint_id, attempts: row.attempts, error });
    }
  }

  /** One attempt: never throws; a network error or a timeout is an attempt without a status. */
  private async send(row: Claimed): Promise<Attempt> {
    const headers: Record<string, string> = {};
    // The endpoint's own header values often authenticate to the receiver: its log entry, which
    // every reader of the Application sees, names them without their values.
    const configured = new Set<string>();
    for (const line of row.headers) {
      const colon = line.indexOf(':');
      if (colon <= 0) continue;
      const name = line.slice(0, colon).trim();
      headers[name] = line.slice(colon + 1).trim();
      configured.add(name);
    }
    const hasBody = row.body !== '' && row.method !== 'GET' && row.method !== 'HEAD';
    if (hasBody && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['Content-Type'] = 'application/json';
    headers['User-Agent'] = this.options.userAgent ?? 'Perkline';
    headers['X-Notification-Id'] = row.notification_id;
    if (row.notification_type) headers['X-Notification-Type'] = row.notification_type;
    if (row.secret) headers['X-Signature'] = `sha256=${createHmac('sha256', row.secret).update(row.body).digest('hex')}`;
    const requestTime = this.options.clock.now();
    try {
      const res = await fetch(row.url, {
        method: row.method,
        headers,
        ...(hasBody ? { body: row.body } : {}),
        redirect: 'manual',
        signal: AbortSignal.any([AbortSignal.timeout(this.timeoutMs), this.stopping.signal]),
      });
      const response = await readLogged(res, this.maxLoggedResponse);
      return { status: res.status, response, requestTime, responseTime: this.options.clock.now(), sentHeaders: forLog(headers, configured) };
    } catch (e) {
      const error = (e as Error)?.name === 'TimeoutError' ? `no answer within ${this.timeoutMs} ms` : storable(String((e as { cause?: unknown })?.cause ?? e));
      return { status: null, response: '', error, requestTime, responseTime: this.options.clock.now(), sentHeaders: forLog(headers, configured) };
    }
  }
}

/** Text as a text column takes it: NUL (which UTF-8 text in PostgreSQL cannot hold) becomes U+FFFD. */
const storable = (text: string): string => (text.includes('\u0000') ? text.replaceAll('\u0000', '\ufffd') : text);

/**
 * The start of an answer's body as its log entry keeps it: at most `max` characters, read as
 * UTF-8, or what came before the attempt's time ran out. The rest is not read: a receiver
 * answering with a body of gigabytes, one that never ends or one that trickles neither fills this
 * node's memory nor turns a delivered request (its status came) into a timeout, and a second
 * delivery. A binary body is kept as text that can be stored.
 */
async function readLogged(res: Response, max: number): Promise<string> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  try {
    while (text.length < max) {
      const { done, value } = await reader.read();
      if (done) {
        text += decoder.decode();
        break;
      }
      text += decoder.decode(value, { stream: true });
    }
  } catch {
    // The timeout (or the connection) ended the body: the answer's status stands.
  } finally {
    // Closes the connection of an answer not read to its end.
    await reader.cancel().catch(() => undefined);
  }
  return storable(text.slice(0, max));
}

/** The headers sent, as a log entry shows them: configured values and the signature redacted. */
function forLog(headers: Record<string, string>, configured: ReadonlySet<string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    out[name] = configured.has(name) ? '[redacted]' : name === 'X-Signature' ? 'sha256=[redacted]' : value;
  }
  return out;
}
