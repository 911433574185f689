// The edge's own router for the documents' operations, in front of express, and the two ways an
// answer is written (a JSON body or the spec's error body) with node:http alone.
//
// Measured on the 2-core machine (`npm run bench:api` and a bare comparison): express 5 with its
// router, body parser and `res.json` costs about 0.39 ms of CPU per JSON request against 0.10 ms
// for node:http with JSON.parse and JSON.stringify. The Integration API's hot path cannot afford
// the difference, so a request whose method and path match an operation exactly is served here;
// every other request (unknown paths, HEAD and OPTIONS, a path in another letter case or with a
// trailing slash, a compressed body) still goes through express, whose routes call the same
// operation pipeline.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseQuery } from 'node:querystring';
import { AppError, badRequest, toAppError, type Logger } from '../shared/index.js';
import type { Operation } from './openapi.js';

/** Serves one call of an operation: path parameters decoded, query parsed, the raw body read. */
export type ServeOperation = (
  req: IncomingMessage,
  res: ServerResponse,
  params: Record<string, string>,
  query: Record<string, unknown>,
  body: Buffer | undefined,
) => Promise<void>;

interface DirectRoute {
  /** Literal segments as written in the document; null where a parameter stands. */
  segments: Array<string | null>;
  /** The same literals in lower case (express matches paths case-insensitively). */
  lower: Array<string | null>;
  names: string[];
  bodyLimit: number;
  serve: ServeOperation;
}

export const EMPTY_BODY = Buffer.alloc(0);

/** 413, as express answers a body over the limit. */
export const tooLarge = (): AppError =>
  new AppError('payload_too_large', 'Request body too large', [{ title: 'Payload Too Large', details: 'the body exceeds the limit of 10 MiB', source: { pointer: '' } }]);

export class DirectRoutes {
  private readonly byMethod = new Map<string, DirectRoute[]>();

  constructor(private readonly logger: Logger) {}

  add(op: Operation, bodyLimit: number, serve: ServeOperation): void {
    const names: string[] = [];
    const segments = op.path.split('/').map((s) => {
      const m = /^\{([^}]+)\}$/.exec(s);
      if (!m) return s;
      names.push(m[1]!);
      return null;
    });
    const method = op.method.toUpperCase();
    const routes = this.byMethod.get(method) ?? [];
    routes.push({ segments, lower: segments.map((s) => (s === null ? null : s.toLowerCase())), names, bodyLimit, serve });
    this.byMethod.set(method, routes);
  }

  /** Takes the request when it is one of the operations in its exact form; false leaves it to express. */
  serve(req: IncomingMessage, res: ServerResponse): boolean {
    const routes = this.byMethod.get(req.method ?? '');
    const url = req.url;
    if (!routes || url === undefined || url.charCodeAt(0) !== 47 /* / */) return false;
    const encoding = req.headers['content-encoding'];
    if (encoding !== undefined && encoding.toLowerCase() !== 'identity') return false;
    // A raw `#` (a fragment a client sent along): express (parseurl) drops it with what follows,
    // and reads `\` before it as `/`; left to express, so that both routes read the same target.
    if (url.includes('#')) return false;
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    if (path.length > 1 && path.endsWith('/')) return false;
    const parts = path.split('/');
    // The first route express would take (it compares case-insensitively); served here only when
    // that match is exact.
    const lower = path.toLowerCase().split('/');
    let route: DirectRoute | undefined;
    for (const r of routes) {
      if (r.segments.length !== parts.length) continue;
      let ok = true;
      for (let i = 0; i < parts.length && ok; i++) {
        const lit = r.lower[i];
        ok = lit === null ? parts[i]!.length > 0 : lower[i] === lit;
      }
      if (ok) {
        route = r;
        break;
      }
    }
    if (!route) return false;
    for (let i = 0; i < parts.length; i++) {
      const lit = route.segments[i];
      if (lit !== null && lit !== parts[i]) return false;
    }
    const params: Record<string, string> = {};
    try {
      let k = 0;
      for (let i = 0; i < parts.length; i++) if (route.segments[i] === null) params[route.names[k++]!] = decodeURIComponent(parts[i]!);
    } catch (e) {
      readBody(req, route.bodyLimit, () => sendError(res, e, this.logger, req), () => sendError(res, tooLarge(), this.logger, req));
      return true;
    }
    const query: Record<string, unknown> = q < 0 ? {} : { ...parseQuery(url.slice(q + 1)) };
    const r = route;
    readBody(
      req,
      r.bodyLimit,
      (body) => void r.serve(req, res, params, query, body),
      () => sendError(res, tooLarge(), this.logger, req),
    );
    return true;
  }
}

/** Reads the whole body (undefined when there is none), or refuses it past `limit` bytes. */
function readBody(req: IncomingMessage, limit: number, done: (body: Buffer | undefined) => void, over: () => void): void {
  const declared = Number(req.headers['content-length']);
  if (declared > limit) {
    over();
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  let refused = false;
  req.on('data', (chunk: Buffer) => {
    if (refused) return;
    size += chunk.length;
    if (size > limit) {
      refused = true;
      chunks.length = 0;
      over();
      return;
    }
    chunks.push(chunk);
  });
  req.on('end', () => {
    if (!refused) done(size === 0 ? undefined : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
  });
  // A client that goes away mid-body gets no answer; there is no one to send it to.
  req.on('error', () => {});
}

/**
 * Writes a JSON answer (or an empty one when body is undefined) and returns the text sent, which
 * the access log keeps.
 */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>): string | undefined {
  if (headers) for (const name in headers) res.setHeader(name, headers[name]!);
  if (body === undefined) {
    res.statusCode = status;
    res.end();
    return undefined;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
  return text;
}

/** The spec's error body for anything thrown while serving a request; internals are logged, never sent. */
export function sendError(res: ServerResponse, err: unknown, logger: Logger, req: IncomingMessage): string | undefined {
  // The router could not percent-decode a path parameter (e.g. %ED%A0%80, a lone surrogate): the client's path.
  const e = err instanceof URIError ? badRequest('A path parameter is not valid percent-encoded UTF-8', '/path') : toAppError(err);
  if (e.kind === 'internal') logger.error('request failed', { method: req.method, path: (req.url ?? '').split('?')[0], error: String((err as Error)?.stack ?? err) });
  if (res.headersSent) {
    res.end();
    return undefined;
  }
  return sendJson(res, e.status, e.toBody(), e.retryAfter !== undefined ? { 'Retry-After': String(e.retryAfter) } : undefined);
}
