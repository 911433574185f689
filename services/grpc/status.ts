import { Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { AppError, toAppError, type ErrorBody, type ErrorKind } from '../shared/index.js';

const codeOf: Record<ErrorKind, status> = {
  invalid_argument: status.INVALID_ARGUMENT,
  unauthenticated: status.UNAUTHENTICATED,
  permission_denied: status.PERMISSION_DENIED,
  not_found: status.NOT_FOUND,
  conflict: status.ABORTED,
  too_many_requests: status.RESOURCE_EXHAUSTED,
  payload_too_large: status.RESOURCE_EXHAUSTED,
  unavailable: status.UNAVAILABLE,
  internal: status.INTERNAL,
};

const kindOf: Partial<Record<status, ErrorKind>> = {
  [status.INVALID_ARGUMENT]: 'invalid_argument',
  [status.UNAUTHENTICATED]: 'unauthenticated',
  [status.PERMISSION_DENIED]: 'permission_denied',
  [status.NOT_FOUND]: 'not_found',
  [status.ABORTED]: 'conflict',
  [status.RESOURCE_EXHAUSTED]: 'too_many_requests',
  [status.UNAVAILABLE]: 'unavailable',
  [status.DEADLINE_EXCEEDED]: 'unavailable',
};

export const ERROR_METADATA_KEY = 'perkline-error';

/**
 * The one mapping of the error taxonomy to gRPC: the status code for any client, and the spec's
 * error body in metadata so Perkline nodes (and clients that want it) get the whole error back.
 */
export function toServiceError(err: unknown): Partial<ServiceError> {
  const e = toAppError(err);
  const metadata = new Metadata();
  metadata.set(ERROR_METADATA_KEY, JSON.stringify({ kind: e.kind, body: e.toBody(), retryAfter: e.retryAfter }));
  return { code: codeOf[e.kind], details: e.message, metadata };
}

/** Rebuilds the AppError a peer sent; a transport failure becomes `unavailable`. */
export function fromServiceError(err: ServiceError): AppError {
  const raw = err.metadata?.get(ERROR_METADATA_KEY)?.[0];
  if (typeof raw === 'string') {
    try {
      const parsed = JSON.parse(raw) as { kind: ErrorKind; body: ErrorBody; retryAfter?: number };
      return AppError.fromBody(parsed.kind, parsed.body, parsed.retryAfter);
    } catch {
      // fall through to the status code
    }
  }
  const kind = kindOf[err.code] ?? (err.code === status.UNKNOWN || err.code === status.INTERNAL ? 'internal' : 'unavailable');
  return new AppError(kind, kind === 'internal' ? 'Internal server error' : `peer call failed: ${err.details || err.message}`);
}
