import { randomUUID } from 'node:crypto';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { AppRef, IntegrationPort } from '../actors/port.js';
import {
  ApiKeyResolver,
  authenticateBearer,
  type AccessLogSink,
  type ManagementContext,
  type Principal,
} from '../management/index.js';
import { AppError, badRequest, type Logger, silentLogger } from '../shared/index.js';
import { createMetrics, type EdgeMetrics, type GaugeSources } from './metrics.js';
import { loadOperations, type Operation } from './openapi.js';
import { managementHandlers } from './management-routes.js';
import { integrationHandlers } from './integration-routes.js';
import { RateLimiter, rateLimited, type RateLimitOptions } from './rate-limit.js';
import { verifyContentSignature } from './content-signature.js';
import { DirectRoutes, EMPTY_BODY, sendError, sendJson, tooLarge } from './direct-routes.js';

export interface Readiness {
  ready: boolean;
  checks: Record<string, boolean>;
}

export interface EdgeOptions {
  port: IntegrationPort;
  management: ManagementContext;
  apiKeys: ApiKeyResolver;
  /** What /readyz reports. */
  readiness: () => Promise<Readiness>;
  gauges?: GaugeSources;
  logger?: Logger;
  /** Largest accepted body (default 10 MiB). */
  bodyLimitBytes?: number;
  /**
   * Integration API token bucket per API key (default 1000/s, burst 2000; ratePerSecond 0
   * disables), or a limiter shared with the node's other Integration API entry (gRPC).
   */
  rateLimit?: RateLimitOptions | RateLimiter;
  /** Receives one entry per API request of a known account (none: requests are not logged). */
  accessLog?: AccessLogSink;
}

/**
 * Requests that carry a password or a one-time token to trade for a session: never logged, not
 * even redacted (`method path` as in the OpenAPI document).
 */
const UNLOGGED = new Set(['post /v1/sessions', 'post /v1/accept_invite', 'post /v1/reset_password']);

/** What a route handler receives: validated input and the authenticated caller. */
export interface RouteInput {
  params: Record<string, any>;
  query: Record<string, any>;
  body: any;
  headers: Request['headers'];
  app?: AppRef;
  principal?: Principal;
  bearerToken?: string;
  /** The request's id: its access log entry's `uuid`, and what its webhook calls name as integrationRequestUuid. */
  requestUuid: string;
}

export interface RouteOutput {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export type RouteHandler = (input: RouteInput) => Promise<RouteOutput>;

/**
 * The REST edge: every route comes from the OpenAPI documents, is authenticated by its security
 * scheme, validated against its schemas and answered by the handler named by its operationId.
 * Errors become the spec's error body in exactly one place (sendError, which express's error
 * middleware calls too). `handle` is the server's request listener: the operations' own router
 * first, express for the rest (see direct-routes.ts).
 */
export function createEdgeApp(options: EdgeOptions): { app: express.Express; handle: RequestListener; metrics: EdgeMetrics } {
  const logger = options.logger ?? silentLogger;
  const metrics = createMetrics(options.gauges);
  const limiter = options.rateLimit instanceof RateLimiter ? options.rateLimit : new RateLimiter(options.rateLimit);
  const handlers: Record<string, RouteHandler> = {
    ...managementHandlers(options.management),
    ...integrationHandlers(options.port),
  };
  const app = express();
  app.disable('x-powered-by');
  // API responses are not cached by validators; hashing every body for an ETag costs CPU for nothing.
  app.disable('etag');
  app.set('query parser', 'simple');

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (_req, res) => {
    const r = await options.readiness().catch(() => ({ ready: false, checks: {} }));
    res.status(r.ready ? 200 : 503).json(r);
  });
  app.get('/metrics', async (_req, res) => {
    res.set('Content-Type', metrics.registry.contentType).send(await metrics.registry.metrics());
  });

  const bodyLimit = options.bodyLimitBytes ?? 10 * 1024 * 1024;
  const raw = express.raw({ type: () => true, limit: bodyLimit });
  const accessLog = options.accessLog;
  const direct = new DirectRoutes(logger);
  for (const op of loadOperations()) {
    const handler = handlers[op.operationId];
    if (!handler) throw new Error(`no handler for operation ${op.operationId}`);
    const logged = accessLog !== undefined && !UNLOGGED.has(`${op.method} ${op.path}`);
    const underApplication = op.path.startsWith('/v1/applications/{applicationId}');
    /** One call of the operation, whichever way it came in; answers it in every case. */
    const serve = async (req: IncomingMessage, res: ServerResponse, params: Record<string, string>, query: Record<string, unknown>, body: Buffer | undefined): Promise<void> => {
      const started = process.hrtime.bigint();
      const input: RouteInput = { params, query, body: undefined, headers: req.headers, requestUuid: randomUUID() };
      const time = logged ? options.management.clock.now() : undefined;
      let responsePayload: string | undefined;
      res.on('finish', () => {
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        metrics.requests.inc({ route: op.path, method: op.method, status: String(res.statusCode) });
        metrics.latency.observe({ route: op.path, method: op.method }, seconds);
        // Only calls whose account is known (authenticated) are logged: there is no one to show the others to.
        const accountId = input.app?.accountId ?? input.principal?.accountId;
        if (!logged || accountId === undefined) return;
        const applicationId = input.app?.applicationId ?? (underApplication ? Number(params.applicationId) : undefined);
        const url = req.url ?? '';
        const q = url.indexOf('?');
        accessLog!.write({
          uuid: input.requestUuid,
          accountId,
          applicationId: Number.isSafeInteger(applicationId) ? applicationId : undefined,
          time: time!,
          status: res.statusCode,
          method: req.method ?? '',
          path: q < 0 ? url : url.slice(0, q),
          requestUri: url,
          requestPayload: body,
          responsePayload,
        });
      });
      try {
        await prepare(op, req, body ?? EMPTY_BODY, input, options, limiter);
        const out = await handler(input);
        responsePayload = sendJson(res, out.status, out.body, out.headers);
      } catch (e) {
        responsePayload = sendError(res, e, logger, req);
      }
    };
    direct.add(op, bodyLimit, serve);
    app[op.method](op.expressPath, raw, (req: Request, res: Response) =>
      serve(req, res, { ...(req.params as Record<string, string>) }, { ...(req.query as Record<string, unknown>) }, Buffer.isBuffer(req.body) ? req.body : undefined),
    );
  }

  app.use((req: Request, _res: Response, next: NextFunction) => {
    next(new AppError('not_found', `No route ${req.method} ${req.path}`, [
      { title: 'Not Found', details: `No route ${req.method} ${req.path}`, source: { pointer: '/path' } },
    ]));
  });
  app.use(errorMiddleware(logger));
  // Requests of the documents' operations in their exact form go straight to their operation;
  // express (its router, body parser and response helpers cost three times what the rest of an
  // HTTP exchange does) takes everything else: other paths and methods, paths in another letter
  // case or with a trailing slash, compressed bodies.
  const handle: RequestListener = (req, res) => {
    if (!direct.serve(req, res)) app(req, res);
  };
  return { app, handle, metrics };
}

/** Fills `input` step by step, so that who called is known even when a later step refuses the call. */
async function prepare(op: Operation, req: IncomingMessage, raw: Buffer, input: RouteInput, options: EdgeOptions, limiter: RateLimiter): Promise<RouteInput> {
  // Authenticate before anything else is looked at; then the key's rate limit, then the
  // Content-Signature when the caller sent one (it signs the raw body).
  if (op.security === 'api_key_v1') {
    const key = await options.apiKeys.resolveKey(req.headers.authorization);
    input.app = key.app;
    const wait = limiter.take(key.keyId);
    if (wait > 0) throw rateLimited(wait);
    const signature = req.headers['content-signature'];
    if (signature !== undefined) verifyContentSignature(signature, key, raw);
  } else if (op.security === 'management_key') {
    input.principal = await authenticateBearer(options.management, req.headers.authorization);
    input.bearerToken = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '')?.[1];
  }
  // The Management API's refusal of text the database cannot store (the Integration API answers
  // it with a 400 on the whole request, as its tests and clients expect).
  const management = op.security !== 'api_key_v1';
  if (management) checkParamText(input.params, input.query);
  op.validateParams(input.params, input.query);
  if (op.hasBody) {
    if (raw.length === 0) {
      if (op.bodyRequired) throw badRequest('A JSON request body is required', '');
    } else {
      try {
        input.body = JSON.parse(raw.toString('utf8'));
      } catch (e) {
        throw badRequest(`Malformed JSON: ${(e as Error).message}`, '', 'MalformedJSON');
      }
      checkBodyShape(input.body, management);
      op.validateBody(input.body);
    }
  }
  return input;
}

/**
 * Deepest nesting of arrays and objects a body may have. JSON.parse takes far deeper documents
 * than the rest of the request can: JSON.stringify (to store attributes as jsonb), the rule
 * compiler and Postgres all recurse, and a body nested some thousand levels deep overflowed the
 * stack there (a 500). No body of the API needs more than a few dozen levels.
 */
export const MAX_JSON_NESTING = 128;

const escapeKey = (k: string): string => k.replace(/~/g, '~0').replace(/\//g, '~1');

/**
 * Text the database cannot store: a NUL character (U+0000, in text or jsonb), or a lone UTF-16
 * surrogate (JSON's "\ud800" escape, which has no UTF-8 form). Refused here, on the pointer of the
 * value, instead of as a failed statement that can only point at the whole request.
 */
const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const unstorable = (text: string): boolean => text.includes('\u0000') || loneSurrogate.test(text);
const notText = (pointer: string) => badRequest('Text cannot contain the NUL character (U+0000) or a lone UTF-16 surrogate', pointer);

function checkParamText(params: Record<string, unknown>, query: Record<string, unknown>): void {
  for (const [where, values] of [['/path', params], ['/query', query]] as const) {
    for (const [name, v] of Object.entries(values)) {
      if ((Array.isArray(v) ? v : [v]).some((x) => typeof x === 'string' && unstorable(x))) throw notText(`${where}/${escapeKey(name)}`);
    }
  }
}

/**
 * Refuses a body nested deeper than MAX_JSON_NESTING, pointing at the first value too deep, and
 * (checkText) text, values or property names, that the database cannot store; without recursion.
 */
function checkBodyShape(body: unknown, checkText: boolean): void {
  // Runs on every request (the Integration API's hot path too): the pointer of a value is built
  // only when it is refused, from the chain of parents.
  interface Entry {
    value: unknown;
    depth: number;
    parent: Entry | undefined;
    key: string;
  }
  const pointerOf = (e: Entry | undefined): string => (e === undefined || e.parent === undefined ? '' : `${pointerOf(e.parent)}/${escapeKey(e.key)}`);
  const stack: Entry[] = [{ value: body, depth: 0, parent: undefined, key: '' }];
  while (stack.length > 0) {
    const entry = stack.pop()!;
    const value = entry.value;
    if (typeof value === 'string') {
      if (checkText && unstorable(value)) throw notText(pointerOf(entry));
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    if (entry.depth >= MAX_JSON_NESTING) {
      throw badRequest(`The body is nested more than ${MAX_JSON_NESTING} levels deep`, pointerOf(entry));
    }
    for (const k in value) {
      const v = (value as Record<string, unknown>)[k];
      if (checkText && unstorable(k)) throw notText(pointerOf({ value: v, depth: 0, parent: entry, key: k }));
      if ((checkText && typeof v === 'string') || (v !== null && typeof v === 'object')) stack.push({ value: v, depth: entry.depth + 1, parent: entry, key: k });
    }
  }
}

function errorMiddleware(logger: Logger) {
  return (err: unknown, req: Request, res: Response, _next: NextFunction): void => {
    const type = (err as { type?: string } | null)?.type;
    if (type === 'entity.too.large') sendError(res, tooLarge(), logger, req);
    else if (type === 'entity.parse.failed' || type === 'encoding.unsupported' || type === 'charset.unsupported') {
      sendError(res, badRequest('Malformed request body', '', 'MalformedJSON'), logger, req);
    } else sendError(res, err, logger, req);
  };
}
