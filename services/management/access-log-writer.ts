// The access log writer: the edge hands it one entry per API request and it inserts them in
// batches, so that logging costs a request a few property reads and a copy of its payloads, never
// a database round trip. Payloads are copied at once into large byte blocks that are reused from
// flush to flush, and turned back into text, redacted and capped at flush time, off the request's
// path: an entry held for a flush interval would otherwise keep its answer's text alive across
// young-generation collections, so that most of what the server promoted to the old generation
// (and the full collections that follow) was the log's queue. The queue is bounded: when the
// database cannot keep up the oldest entries are dropped and counted (requests are never held back
// by their log).
import type { Logger } from '../shared/index.js';
import type { Queryable } from '../store/index.js';

/** One request as the edge saw it. Payloads are kept as they came; the writer makes them text. */
export interface AccessLogEntry {
  uuid: string;
  accountId: number;
  /** The Application of the call (the API key's, or the `{applicationId}` of a Management path). */
  applicationId?: number | undefined;
  time: Date;
  status: number;
  method: string;
  /** Path without the query string. */
  path: string;
  /** Path with the query string, as requested. */
  requestUri: string;
  requestPayload?: Buffer | string | undefined;
  responsePayload?: Buffer | string | undefined;
}

/** Where the edge sends entries; `write` never throws and never waits. */
export interface AccessLogSink {
  write(entry: AccessLogEntry): void;
}

export interface AccessLogWriterOptions {
  db: Queryable;
  logger: Logger;
  /** How often queued entries are written (default 250 ms). */
  flushIntervalMs?: number;
  /** Entries per flush (written 100 to a statement); reaching it flushes at once (default 500). */
  batchSize?: number;
  /** Entries held while the database lags; beyond it the oldest are dropped (default 20 000). */
  maxQueued?: number;
  /** Payload bytes (UTF-8) held while the database lags, the same way (default 64 MiB). */
  maxQueuedBytes?: number;
  /** Characters of each payload kept (bytes of one that came as bytes; default 64 Ki); longer ones are cut and marked. */
  maxPayloadChars?: number;
}

export interface AccessLogStats {
  queued: number;
  written: number;
  dropped: number;
}

/** Property names whose values never reach a log (compared in lower case). */
const SENSITIVE = new Set(['password', 'newpassword', 'token', 'resettoken', 'invitetoken', 'key', 'secret', 'signingsecret']);
/**
 * Cheap pre-check on the raw text: only payloads that may hold a sensitive property are parsed.
 * A `\u` escape could spell a sensitive name in disguise, so it sends the payload down the full path too.
 */
const MAYBE_SENSITIVE = /"(?:password|newpassword|token|resettoken|invitetoken|key|secret|signingsecret)"\s*:|\\u/i;
export const REDACTED = '[redacted]';

function redactValue(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redactValue);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = SENSITIVE.has(k.toLowerCase()) ? REDACTED : redactValue(v);
    return out;
  }
  return value;
}

const decodeName = (raw: string): string => {
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return raw;
  }
};

/**
 * Text that is not JSON (or was cut short): each `"name": value` whose name is sensitive loses
 * its value. A sensitive object or array value cannot be skipped reliably in broken JSON, so the
 * rest of the text is withheld.
 */
function redactLoose(text: string): string {
  const property = /"((?:[^"\\]|\\.)*)"(\s*:\s*)/g;
  let out = '';
  let from = 0;
  for (let m = property.exec(text); m; m = property.exec(text)) {
    if (!SENSITIVE.has(decodeName(m[1]!).toLowerCase())) continue;
    const valueAt = m.index + m[0].length;
    out += text.slice(from, valueAt) + `"${REDACTED}"`;
    const rest = text.slice(valueAt);
    const scalar = /^(?:"(?:[^"\\]|\\.)*"?|[^,}\]\s{[]*)/.exec(rest)!;
    if (rest.startsWith('{') || rest.startsWith('[')) return out + ' [rest withheld]';
    from = valueAt + scalar[0].length;
    property.lastIndex = from;
  }
  return out + text.slice(from);
}

/** A payload with every sensitive property's value replaced by "[redacted]". */
export function redactPayload(text: string): string {
  if (!MAYBE_SENSITIVE.test(text)) return text;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return redactLoose(text);
  }
  return JSON.stringify(redactValue(parsed));
}

/** Entries per INSERT statement: a flush of more sends several. */
const ROWS_PER_STATEMENT = 100;
const COLUMNS = ['uuid', 'integer', 'integer', 'timestamptz', 'integer', 'text', 'text', 'text', 'text', 'text'] as const;

// One statement per chunk of ROWS_PER_STATEMENT entries: the rows, the per-account call counts.
// Every value is a parameter of its own (rows of NULLs, left out, fill the last chunk, so that the
// statement's text never changes): PostgreSQL takes a text parameter as it is, where the same
// payloads inside one JSON document had to be parsed and unescaped (two thirds of the insert's
// time). An Application that is gone (or, defensively, not of the entry's account) leaves the
// entry account-level instead of failing the chunk; an account that is gone drops its entries.
const INSERT = `
WITH batch AS (
  SELECT * FROM (VALUES ${Array.from({ length: ROWS_PER_STATEMENT }, (_, i) => `(${COLUMNS.map((type, k) => `$${i * COLUMNS.length + k + 1}::${type}`).join(', ')})`).join(',\n    ')}
  ) AS r(u, c, a, t, s, m, p, r, q, o)
  WHERE r.u IS NOT NULL
), inserted AS (
  INSERT INTO access_logs (uuid, account_id, application_id, time, status, method, path, request_uri, request_payload, response_payload)
  SELECT b.u, b.c, (SELECT ap.id FROM applications ap WHERE ap.id = b.a AND ap.account_id = b.c), b.t, b.s, b.m, b.p, b.r, b.q, b.o
    FROM batch b
   WHERE EXISTS (SELECT 1 FROM accounts ac WHERE ac.id = b.c)
  RETURNING account_id
)
UPDATE accounts ac SET api_call_count = ac.api_call_count + n.n
  FROM (SELECT account_id, count(*) AS n FROM inserted GROUP BY account_id) n
 WHERE ac.id = n.account_id`;

/** Bytes of queued payloads: one block is written at a time; a block whose entries are all gone is used again. */
interface Block {
  bytes: Buffer;
  used: number;
  /** Queued entries with payload bytes in it. */
  pending: number;
}

/** Block size: a flush interval's payloads at a few thousand requests a second fit in a few. */
const BLOCK_BYTES = 1024 * 1024;
/** Emptied blocks kept for reuse; past a lag's backlog the others are left to the garbage collector. */
const SPARE_BLOCKS = 4;

const newBlock = (size: number): Block => ({ bytes: Buffer.allocUnsafeSlow(size), used: 0, pending: 0 });

/** An entry in the queue: its payloads as bytes in a block (request, then response), and how long they were when cut. */
interface Queued {
  uuid: string;
  accountId: number;
  applicationId: number | undefined;
  time: number;
  status: number;
  method: string;
  path: string;
  requestUri: string;
  block: Block;
  start: number;
  requestEnd: number;
  end: number;
  requestCut: string | undefined;
  responseCut: string | undefined;
}

export class AccessLogWriter implements AccessLogSink {
  private queue: Queued[] = [];
  private flushing: Promise<void> | undefined;
  private readonly timer: NodeJS.Timeout;
  private readonly batchSize: number;
  private readonly maxQueued: number;
  private readonly maxQueuedBytes: number;
  private queuedBytes = 0;
  private readonly maxChars: number;
  private block: Block = newBlock(BLOCK_BYTES);
  private readonly spare: Block[] = [];
  private written = 0;
  private dropped = 0;
  private droppedUnreported = 0;
  private closed = false;

  constructor(private readonly options: AccessLogWriterOptions) {
    this.batchSize = options.batchSize ?? 500;
    this.maxQueued = options.maxQueued ?? 20_000;
    this.maxQueuedBytes = options.maxQueuedBytes ?? 64 * 1024 * 1024;
    this.maxChars = options.maxPayloadChars ?? 64 * 1024;
    this.timer = setInterval(() => void this.flushOnce(), options.flushIntervalMs ?? 250);
    this.timer.unref();
  }

  write(entry: AccessLogEntry): void {
    if (this.closed) return;
    const request = this.cap(entry.requestPayload);
    const response = this.cap(entry.responsePayload);
    // Copied now, so that neither the answer's text nor the body's buffer is held for the queue's
    // lifetime (a cut one only up to its cap).
    const block = this.room(bound(request.head) + bound(response.head));
    const start = block.used;
    const requestEnd = put(block, request.head);
    const end = put(block, response.head);
    block.pending++;
    const queued: Queued = {
      uuid: entry.uuid,
      accountId: entry.accountId,
      applicationId: entry.applicationId,
      time: entry.time.getTime(),
      status: entry.status,
      method: entry.method,
      path: entry.path,
      requestUri: entry.requestUri,
      block,
      start,
      requestEnd,
      end,
      requestCut: request.cut,
      responseCut: response.cut,
    };
    entry.requestPayload = entry.responsePayload = undefined;
    const size = end - start;
    while (this.queue.length > 0 && (this.queue.length >= this.maxQueued || this.queuedBytes + size > this.maxQueuedBytes)) {
      this.release(this.queue.shift()!);
      this.drop(1);
    }
    this.queue.push(queued);
    this.queuedBytes += size;
    if (this.queue.length >= this.batchSize && !this.flushing) setImmediate(() => void this.flushOnce());
  }

  stats(): AccessLogStats {
    return { queued: this.queue.length, written: this.written, dropped: this.dropped };
  }

  /** Writes everything queued so far (waits for a flush in progress first). */
  async flush(): Promise<void> {
    while (this.flushing || this.queue.length > 0) {
      if (this.flushing) await this.flushing;
      else await this.flushOnce();
    }
  }

  /** Stops the timer and writes what is left: the node's stop, after the HTTP server closed. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
    this.closed = true;
  }

  private cap(payload: Buffer | string | undefined): { head: Buffer | string | undefined; cut?: string } {
    if (payload === undefined || payload.length <= this.maxChars) return { head: payload };
    const head = typeof payload === 'string' ? payload.slice(0, this.maxChars) : payload.subarray(0, this.maxChars);
    return { head, cut: `${payload.length} ${typeof payload === 'string' ? 'characters' : 'bytes'}` };
  }

  /** A block with at least `bytes` free: the current one, a spare, or a new one (as large as needed). */
  private room(bytes: number): Block {
    const current = this.block;
    // Every entry of the current block is gone: it is written again from its start.
    if (current.pending === 0) current.used = 0;
    if (current.bytes.length - current.used >= bytes) return current;
    // The current block is left to its queued entries; the last of them to go hands it back.
    const next = bytes <= BLOCK_BYTES ? (this.spare.pop() ?? newBlock(BLOCK_BYTES)) : newBlock(bytes);
    this.block = next;
    return next;
  }

  /** An entry's bytes are no longer needed (written, dropped, or made text for its statement). */
  private release(q: Queued): void {
    this.queuedBytes -= q.end - q.start;
    const block = q.block;
    if (--block.pending > 0 || block === this.block) return;
    block.used = 0;
    if (block.bytes.length === BLOCK_BYTES && this.spare.length < SPARE_BLOCKS) this.spare.push(block);
  }

  private drop(n: number): void {
    this.dropped += n;
    this.droppedUnreported += n;
  }

  private flushOnce(): Promise<void> {
    if (this.flushing) return this.flushing;
    if (this.queue.length === 0) {
      this.reportDrops();
      return Promise.resolve();
    }
    const batch = this.queue.splice(0, this.batchSize);
    this.flushing = this.insert(batch).finally(() => {
      this.flushing = undefined;
      this.reportDrops();
      // More than a batch waiting: keep going rather than wait for the next tick.
      if (this.queue.length >= this.batchSize && !this.closed) setImmediate(() => void this.flushOnce());
    });
    return this.flushing;
  }

  private async insert(batch: Queued[]): Promise<void> {
    for (let from = 0; from < batch.length; from += ROWS_PER_STATEMENT) {
      const chunk = batch.slice(from, from + ROWS_PER_STATEMENT);
      const params: unknown[] = [];
      for (const q of chunk) {
        const bytes = q.block.bytes;
        const request = stored(bytes.toString('utf8', q.start, q.requestEnd), q.requestCut);
        const response = stored(bytes.toString('utf8', q.requestEnd, q.end), q.responseCut);
        params.push(q.uuid, q.accountId, q.applicationId ?? null, new Date(q.time).toISOString(), q.status, q.method, clean(q.path), clean(q.requestUri), clean(request), clean(response));
        this.release(q);
      }
      while (params.length < ROWS_PER_STATEMENT * COLUMNS.length) params.push(null);
      // One retry: a deadlock with another node's flush over the same accounts is worth a second go.
      for (let attempt = 1; ; attempt++) {
        try {
          await this.options.db.query(INSERT, params);
          this.written += chunk.length;
          break;
        } catch (e) {
          if (attempt < 2) continue;
          this.drop(chunk.length);
          // The error only: a payload could hold what the redaction did not know to hide.
          this.options.logger.warn('access log batch not written', { entries: chunk.length, error: (e as Error).message });
          break;
        }
      }
    }
  }

  private reportDrops(): void {
    if (this.droppedUnreported === 0) return;
    this.options.logger.warn('access log entries dropped', { dropped: this.droppedUnreported, droppedSinceStart: this.dropped });
    this.droppedUnreported = 0;
  }
}

/** The text stored for a payload: redacted first, so that the truncation mark is never taken for data. */
function stored(text: string, cut: string | undefined): string {
  const redacted = text === '' ? '' : redactPayload(text);
  return cut === undefined ? redacted : `${redacted}…[truncated; ${cut} in all]`;
}

/** Bytes a payload can take as UTF-8 (a UTF-16 unit takes at most 3). */
const bound = (payload: Buffer | string | undefined): number => (payload === undefined ? 0 : typeof payload === 'string' ? payload.length * 3 : payload.length);

/** Appends a payload to the block; returns where it ends. */
function put(block: Block, payload: Buffer | string | undefined): number {
  if (payload !== undefined) block.used += typeof payload === 'string' ? block.bytes.write(payload, block.used) : payload.copy(block.bytes, block.used);
  return block.used;
}

/** Postgres text cannot hold NUL. */
const clean = (s: string): string => (s.includes('\u0000') ? s.replace(/\u0000/g, '') : s);
