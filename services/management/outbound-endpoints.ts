// What the endpoints of outbound requests (rule-triggered webhooks, notification webhooks) may be
// configured with: only what the outbox dispatcher can send. The contract checks the characters of
// each header line; here the rest, which fetch refuses on every attempt (a URL with credentials,
// framing headers) or which would change what Perkline itself sends.
import { badRequest } from '../shared/index.js';

/**
 * Header names a configuration may not set: the HTTP client's own (fetch refuses or drops them)
 * and the ones Perkline adds to every request (a second X-Notification-Id would make receivers
 * drop, or keep, the wrong duplicates).
 */
const RESERVED_HEADERS = new Set([
  'connection',
  'content-length',
  'expect',
  'host',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'x-notification-id',
  'x-notification-type',
  'x-signature',
]);

/** Refuses a header line that names a reserved header, on its pointer (`/headers/<i>`). */
export function checkEndpointHeaders(headers: readonly string[] | undefined): void {
  (headers ?? []).forEach((line, i) => {
    const name = line.slice(0, line.indexOf(':')).trim().toLowerCase();
    if (RESERVED_HEADERS.has(name)) throw badRequest(`The header ${line.slice(0, line.indexOf(':'))} is set by Perkline or its HTTP client and cannot be configured`, `/headers/${i}`);
  });
}

/**
 * Refuses what is not an absolute http or https URL, and a URL with a user name or password:
 * fetch never sends one (credentials go in a header, whose value is redacted for readers).
 */
export function checkEndpointUrl(text: string, pointer: string): void {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw badRequest('`url` must be an absolute http or https URL', pointer);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') throw badRequest('`url` must be an absolute http or https URL', pointer);
  if (url.username !== '' || url.password !== '') {
    throw badRequest('`url` cannot contain credentials (user:password@); send them in a header such as Authorization', pointer);
  }
}

/** Header lines as a reader who may not change the endpoint sees them: each name, its value redacted. */
export const redactedHeaders = (lines: readonly string[]): string[] => lines.map((h) => `${h.slice(0, Math.max(0, h.indexOf(':')))}: [redacted]`);
