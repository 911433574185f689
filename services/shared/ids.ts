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

/**
 * A profile integration ID is at most 1000 characters and 2000 bytes of UTF-8 (the OpenAPI
 * documents say so with `maxLength` and `x-maxUtf8Bytes`, which the edge checks): it is a B-tree
 * index key in many tables, and an index entry holds about 2,700 bytes.
 */
export const PROFILE_ID_MAX_CHARACTERS = 1000;
export const PROFILE_ID_MAX_BYTES = 2000;

/** Why a profile integration ID cannot be stored, or undefined when it can. */
export function profileIdProblem(id: string): string | undefined {
  if (Buffer.byteLength(id, 'utf8') > PROFILE_ID_MAX_BYTES) return `must not have more than ${PROFILE_ID_MAX_BYTES} bytes of UTF-8`;
  // Characters as JSON Schema counts them: code points, not UTF-16 units.
  let n = 0;
  for (const _ of id) if (++n > PROFILE_ID_MAX_CHARACTERS) return `must NOT have more than ${PROFILE_ID_MAX_CHARACTERS} characters`;
  return undefined;
}
