import { createHmac, timingSafeEqual } from 'node:crypto';
import type { ResolvedApiKey } from '../management/index.js';
import { AppError } from '../shared/index.js';

const POINTER = '/headers/content-signature';

const refused = (message: string): AppError =>
  new AppError('unauthenticated', message, [
    { title: 'Unauthorized', details: message, source: { pointer: POINTER, parameter: 'Content-Signature' } },
  ]);

/**
 * Checks `Content-Signature: signer=<applicationId>; signature=<hex HMAC-SHA256 of the raw body>`
 * against the Application the API key belongs to. The HMAC key is the Application's signing
 * secret as UTF-8 text. Throws 401 pointing at the header when it is malformed, names another
 * Application, or does not match.
 */
export function verifyContentSignature(header: string | string[], key: ResolvedApiKey, rawBody: Buffer): void {
  if (typeof header !== 'string') throw refused('Content-Signature must be sent once');
  let signer: string | undefined;
  let signature: string | undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) {
      if (part.trim() === '') continue;
      throw refused('Malformed Content-Signature: expected `signer=<applicationId>; signature=<hex>`');
    }
    const name = part.slice(0, eq).trim().toLowerCase();
    const value = part.slice(eq + 1).trim();
    if (name === 'signer' && signer === undefined) signer = value;
    else if (name === 'signature' && signature === undefined) signature = value;
    else throw refused('Malformed Content-Signature: expected `signer=<applicationId>; signature=<hex>`');
  }
  if (signer === undefined || signature === undefined || !/^[0-9]+$/.test(signer) || !/^[0-9a-fA-F]{64}$/.test(signature)) {
    throw refused('Malformed Content-Signature: expected `signer=<applicationId>; signature=<64 hex digits>`');
  }
  if (Number(signer) !== key.app.applicationId) throw refused('Content-Signature signer is not the Application of the API key');
  const expected = createHmac('sha256', key.signingSecret).update(rawBody).digest();
  if (!timingSafeEqual(expected, Buffer.from(signature, 'hex'))) throw refused('Content-Signature does not match the request body');
}
