import { createHash, randomBytes, randomUUID } from 'node:crypto';

/** A random secret in URL-safe base64 (API keys, bearer tokens). */
export const randomToken = (bytes = 32): string => randomBytes(bytes).toString('base64url');

/** Secrets are stored as SHA-256: they are long random strings, so a slow hash adds nothing. */
export const sha256Hex = (value: string): string => createHash('sha256').update(value).digest('hex');

export const uuid = (): string => randomUUID();

/** FNV-1a 32-bit: stable across processes and versions, used for shard placement. */
export function fnv1a(value: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < value.length; i++) {
    h ^= value.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}
