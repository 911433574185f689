// Idempotency-Key (addendum, Behaviour): the response of a v2 write is stored with a hash of its
// request and replayed for 24 hours; the same key with another request is a 409.
import { AppError, badRequest, sha256Hex, type Clock } from '../shared/index.js';
import type { Queryable } from '../store/index.js';

export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
const MAX_KEY_LENGTH = 255;

export interface IdempotencyScope {
  applicationId: number;
  key: string;
  /** The operation and its target, e.g. `returnSession:<sessionId>`. */
  operation: string;
  /** Everything that makes two requests the same request. */
  request: unknown;
}

export const requestHash = (operation: string, request: unknown): string => sha256Hex(`${operation}\n${JSON.stringify(request)}`);

export function checkIdempotencyKey(key: string): void {
  if (key.length === 0 || key.length > MAX_KEY_LENGTH) {
    throw badRequest(`Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} characters`, '/headers/idempotency-key');
  }
}

/** The stored response of this key, if one is still valid; a 409 when it was made by another request. */
export async function replayed(db: Queryable, scope: IdempotencyScope, clock: Clock): Promise<Record<string, unknown> | undefined> {
  checkIdempotencyKey(scope.key);
  const [row] = await db.query<{ request_hash: string; operation: string; response: Record<string, unknown>; created: Date | string }>(
    `SELECT request_hash, operation, response, created FROM idempotency_keys WHERE application_id = $1 AND key = $2`,
    [scope.applicationId, scope.key],
  );
  if (!row) return undefined;
  if (clock.now().getTime() - new Date(row.created).getTime() > IDEMPOTENCY_TTL_MS) return undefined;
  if (row.operation !== scope.operation || row.request_hash !== requestHash(scope.operation, scope.request)) {
    throw new AppError('conflict', 'This Idempotency-Key was used with a different request', [
      { title: 'IdempotencyKeyReused', details: 'the same Idempotency-Key was sent with another request body or target', source: { pointer: '/headers/idempotency-key' } },
    ]);
  }
  return row.response;
}

/**
 * Another request took this key first (it committed while this one ran): this one must not commit.
 * Thrown inside the transaction, it rolls the change back; the caller then replays what the
 * other request stored.
 */
export class IdempotencyKeyTaken extends AppError {
  constructor() {
    super('conflict', 'A request with this Idempotency-Key was processed at the same time', [
      { title: 'IdempotencyKeyInUse', details: 'retry to get the stored response', source: { pointer: '/headers/idempotency-key' } },
    ]);
  }
}

/**
 * Stores the response in the caller's transaction, so it exists exactly when the write does. The
 * key is claimed here: when a valid claim exists already, IdempotencyKeyTaken rolls this write back.
 */
export async function remember(tx: Queryable, scope: IdempotencyScope, response: Record<string, unknown>, clock: Clock): Promise<void> {
  const claimed = await tx.query(
    `INSERT INTO idempotency_keys (application_id, key, operation, request_hash, status, response, created)
     VALUES ($1, $2, $3, $4, 200, $5::jsonb, $6)
     ON CONFLICT (application_id, key) DO UPDATE SET operation = EXCLUDED.operation, request_hash = EXCLUDED.request_hash,
       response = EXCLUDED.response, created = EXCLUDED.created
     WHERE idempotency_keys.created < $6::timestamptz - interval '24 hours'
     RETURNING key`,
    [scope.applicationId, scope.key, scope.operation, requestHash(scope.operation, scope.request), JSON.stringify(response), clock.now().toISOString()],
  );
  if (claimed.length === 0) throw new IdempotencyKeyTaken();
}

/**
 * Runs a write under its Idempotency-Key: a stored response is replayed; when another request
 * with the key committed first while this one ran (its `remember` refused the key and rolled the
 * write back), that request's response is replayed too.
 */
export async function withIdempotency<T>(
  db: Queryable,
  clock: Clock,
  scope: IdempotencyScope | undefined,
  run: () => Promise<T>,
  fromStored: (state: Record<string, unknown>) => T,
): Promise<T> {
  if (!scope) return run();
  const previous = await replayed(db, scope, clock);
  if (previous) return fromStored(previous);
  try {
    return await run();
  } catch (e) {
    if (!(e instanceof IdempotencyKeyTaken)) throw e;
    const stored = await replayed(db, scope, clock);
    if (!stored) throw e;
    return fromStored(stored);
  }
}
