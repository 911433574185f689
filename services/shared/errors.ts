// The closed error taxonomy. Every layer throws AppError; the edge maps it to HTTP and the gRPC
// layer to a gRPC status, each in exactly one place.

export const ErrorKind = {
  invalid_argument: 'invalid_argument',
  unauthenticated: 'unauthenticated',
  permission_denied: 'permission_denied',
  not_found: 'not_found',
  conflict: 'conflict',
  too_many_requests: 'too_many_requests',
  payload_too_large: 'payload_too_large',
  unavailable: 'unavailable',
  internal: 'internal',
} as const;
export type ErrorKind = (typeof ErrorKind)[keyof typeof ErrorKind];

export interface ErrorSource {
  pointer?: string;
  parameter?: string;
  line?: number;
  resource?: string;
}

export interface ErrorDetail {
  title: string;
  details?: string;
  source?: ErrorSource;
}

/** The spec's error body. */
export interface ErrorBody {
  message: string;
  errors: ErrorDetail[];
  StatusCode: number;
}

export const httpStatusOf: Record<ErrorKind, number> = {
  invalid_argument: 400,
  unauthenticated: 401,
  permission_denied: 403,
  not_found: 404,
  conflict: 409,
  too_many_requests: 429,
  payload_too_large: 413,
  unavailable: 503,
  internal: 500,
};

export class AppError extends Error {
  readonly kind: ErrorKind;
  readonly errors: ErrorDetail[];
  /** Seconds, for too_many_requests. */
  readonly retryAfter?: number;

  constructor(kind: ErrorKind, message: string, errors: ErrorDetail[] = [], retryAfter?: number) {
    super(message);
    this.name = 'AppError';
    this.kind = kind;
    this.errors = errors.length > 0 ? errors : [{ title: titleOf(kind), details: message }];
    if (retryAfter !== undefined) this.retryAfter = retryAfter;
  }

  get status(): number {
    return httpStatusOf[this.kind];
  }

  toBody(): ErrorBody {
    return { message: this.message, errors: this.errors, StatusCode: this.status };
  }

  /** Rebuilds an AppError from a body that crossed a process boundary (gRPC between nodes). */
  static fromBody(kind: ErrorKind, body: ErrorBody, retryAfter?: number): AppError {
    return new AppError(kind, body.message, body.errors, retryAfter);
  }
}

function titleOf(kind: ErrorKind): string {
  switch (kind) {
    case 'invalid_argument':
      return 'Bad Request';
    case 'unauthenticated':
      return 'Unauthorized';
    case 'permission_denied':
      return 'Forbidden';
    case 'not_found':
      return 'Not Found';
    case 'conflict':
      return 'Conflict';
    case 'too_many_requests':
      return 'Too Many Requests';
    case 'payload_too_large':
      return 'Payload Too Large';
    case 'unavailable':
      return 'Service Unavailable';
    case 'internal':
      return 'Internal Server Error';
  }
}

export const badRequest = (message: string, pointer: string, title = 'Bad Request'): AppError =>
  new AppError('invalid_argument', message, [{ title, details: message, source: { pointer } }]);

export const notFound = (what: string, pointer?: string): AppError =>
  new AppError('not_found', `${what} not found`, [
    { title: 'Not Found', details: `${what} not found`, ...(pointer ? { source: { pointer } } : {}) },
  ]);

/**
 * Request parts other than the body are pointed at as if the request were a document
 * `{query, path, headers, body}`: `/headers/authorization`, `/query/dry`. Body errors point into
 * the body itself (`/customerSession/cartItems/0/price`), as clients of the hosted API expect.
 */
export const unauthenticated = (message = 'Invalid or missing credentials', pointer = '/headers/authorization'): AppError =>
  new AppError('unauthenticated', message, [
    { title: 'Unauthorized', details: message, source: { pointer, parameter: 'Authorization' } },
  ]);

/** The spec's 409 text for the per-key concurrency limit. */
export const tooManyConcurrent = (entity: 'session' | 'profile' | 'profile/session'): AppError =>
  new AppError(
    'conflict',
    `Too many requests are updating this ${entity} at the same time`,
    [{ title: 'Conflict', details: `Too many requests are updating this ${entity} at the same time`, source: { pointer: '' } }],
  );

export const isAppError = (e: unknown): e is AppError => e instanceof AppError;

/**
 * Anything thrown that is not an AppError becomes an internal error without internals, except a
 * database "data exception" (SQLSTATE class 22: a number out of range, a date the database cannot
 * hold, a NUL character in text): that is a value the client sent, so a 400; and a reference to a
 * row deleted by a racing request (23503 on insert or update): a 404.
 */
export function toAppError(e: unknown): AppError {
  if (e instanceof AppError) return e;
  const code = (e as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^22[0-9A-Z]{3}$/.test(code)) {
    return new AppError('invalid_argument', 'A value of the request cannot be stored: it is out of range or malformed', [
      { title: 'InvalidValue', details: 'a number, date or text of the request is outside what can be stored', source: { pointer: '' } },
    ]);
  }
  // A write that references a row deleted meanwhile (a campaign created while its Application is
  // deleted): the row the request names is gone, as if it had been gone at the start: a 404 on
  // the referencing column's name, e.g. `Key (application_id)=(5) is not present in table "applications"`.
  if (code === '23503') {
    const m = /^Key \(([a-z_]+)\)=\(.*\) is not present in table "([a-z_]+)"/.exec(String((e as { detail?: unknown }).detail ?? ''));
    if (m) {
      const what = m[2]!.replace(/s$/, '').replace(/(^|_)([a-z])/g, (_, sep: string, c: string) => (sep ? ' ' : '') + c.toUpperCase());
      const pointer = '/' + m[1]!.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
      return new AppError('not_found', `${what} not found`, [{ title: 'Not Found', details: `${what} not found (deleted meanwhile)`, source: { pointer } }]);
    }
  }
  return new AppError('internal', 'Internal server error');
}
