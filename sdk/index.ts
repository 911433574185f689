// Perkline's typed TypeScript clients, generated from the OpenAPI documents (openapi/gen) and
// driven by openapi-fetch: createIntegrationClient for shops and apps (ApiKey-v1), and
// createManagementClient for backoffices (Bearer token). Retryable answers (409, 429, 502-504 and
// network failures) are retried with exponential backoff; errors come back typed (PerklineApiError).
import createClient, { type Client } from 'openapi-fetch';
import type { components as IntegrationComponents, paths as IntegrationPaths } from '../openapi/gen/integration.js';
import type { components as ManagementComponents, paths as ManagementPaths } from '../openapi/gen/management.js';
import type { components as NotificationComponents } from '../openapi/gen/notifications.js';

export type { IntegrationPaths, ManagementPaths };
export type IntegrationSchemas = IntegrationComponents['schemas'];
export type ManagementSchemas = ManagementComponents['schemas'];
/** The bodies of outbound notifications (openapi/notifications.yaml), for receivers. */
export type NotificationSchemas = NotificationComponents['schemas'];
export type ErrorBody = IntegrationSchemas['ErrorResponseWithStatus'];

export interface RetryOptions {
  /** Further attempts after the first (default 2; 0 disables retries). */
  retries?: number;
  /** First backoff in ms, doubled each attempt, with jitter (default 100). */
  baseDelayMs?: number;
}

export interface ClientOptions extends RetryOptions {
  baseUrl: string;
  /** A fetch implementation (default: the global fetch). */
  fetch?: typeof globalThis.fetch;
  headers?: Record<string, string>;
}

/** An API error with the spec's error body. */
export class PerklineApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: ErrorBody,
  ) {
    super(body?.message ?? `HTTP ${status}`);
    this.name = 'PerklineApiError';
  }
}

const retryable = new Set([409, 429, 502, 503, 504]);

/** A fetch that retries retryable answers, honouring Retry-After. */
export function retryingFetch(options: RetryOptions & { fetch?: typeof globalThis.fetch } = {}): typeof globalThis.fetch {
  const inner = options.fetch ?? globalThis.fetch;
  const retries = options.retries ?? 2;
  const base = options.baseDelayMs ?? 100;
  return async (input, init) => {
    const request = input instanceof Request ? input : new Request(input, init);
    // Keep the body so that every attempt can send it again.
    const body = request.body ? await request.arrayBuffer() : undefined;
    for (let attempt = 0; ; attempt++) {
      const fresh = new Request(request, body !== undefined ? { body } : {});
      try {
        const res = await inner(fresh);
        if (attempt >= retries || !retryable.has(res.status)) return res;
        const after = Number(res.headers.get('retry-after'));
        await delay(Number.isFinite(after) && after > 0 ? after * 1000 : backoff(base, attempt));
      } catch (e) {
        if (attempt >= retries) throw e;
        await delay(backoff(base, attempt));
      }
    }
  };
}

const backoff = (base: number, attempt: number) => base * 2 ** attempt * (0.5 + Math.random());
const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

function makeClient<P extends {}>(options: ClientOptions, authorization: string): Client<P> {
  return createClient<P>({
    baseUrl: options.baseUrl,
    fetch: retryingFetch(options),
    headers: { ...options.headers, Authorization: authorization },
  });
}

export interface IntegrationClientOptions extends ClientOptions {
  apiKey: string;
}

export interface ManagementClientOptions extends ClientOptions {
  /** Bearer token from POST /v1/sessions (see login). */
  token?: string;
}

export type IntegrationClient = Client<IntegrationPaths>;
export type ManagementClient = Client<ManagementPaths>;

export function createIntegrationClient(options: IntegrationClientOptions): IntegrationClient {
  return makeClient<IntegrationPaths>(options, `ApiKey-v1 ${options.apiKey}`);
}

export function createManagementClient(options: ManagementClientOptions): ManagementClient {
  return makeClient<ManagementPaths>(options, options.token ? `Bearer ${options.token}` : '');
}

/** Logs in and returns a Management client that carries the token. */
export async function login(options: ClientOptions & { email: string; password: string }): Promise<{ client: ManagementClient; token: string; userId: number }> {
  const anonymous = createManagementClient(options);
  const session = unwrap(await anonymous.POST('/v1/sessions', { body: { email: options.email, password: options.password } }));
  return { client: createManagementClient({ ...options, token: session.token }), token: session.token, userId: session.userId };
}

/** The data of a successful call, or a PerklineApiError with the error body. */
export function unwrap<T>(result: { data?: T; error?: unknown; response: Response }): T {
  if (result.error !== undefined || !result.response.ok) throw new PerklineApiError(result.response.status, result.error as ErrorBody);
  return result.data as T;
}
