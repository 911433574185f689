import type { AppRef } from '../actors/port.js';
import { badRequest, notFound, randomToken, sha256Hex, unauthenticated, isConfigurationChange } from '../shared/index.js';
import { iso, paging, requireApplication, type ListQuery, type ManagementContext, type Principal } from './context.js';

const keyView = (r: Record<string, unknown>) => ({
  id: r.id as number,
  title: r.title as string,
  expires: iso(r.expires)!,
  created: iso(r.created)!,
  applicationId: r.application_id as number,
});

/** POST /v1/applications/{applicationId}/api_keys: the key appears in this response only. */
export async function createApiKey(
  ctx: ManagementContext,
  principal: Principal,
  applicationId: number,
  body: { title: string; expires: string },
): Promise<Record<string, unknown>> {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  const expires = new Date(body.expires);
  if (expires.getTime() <= ctx.clock.now().getTime()) throw badRequest('`expires` must be in the future', '/expires');
  const key = randomToken(32);
  const [row] = await ctx.db.query(
    `INSERT INTO api_keys (application_id, title, key_hash, expires, created_by) VALUES ($1, $2, $3, $4, $5) RETURNING *`,
    [applicationId, body.title, sha256Hex(key), expires.toISOString(), principal.userId],
  );
  return { ...keyView(row!), key };
}

export async function listApiKeys(ctx: ManagementContext, principal: Principal, applicationId: number, query: ListQuery) {
  await requireApplication(ctx.db, principal, applicationId, 'read');
  const { clause } = paging(query, { id: 'id', title: 'title', created: 'created', expires: 'expires' });
  const rows = await ctx.db.query(`SELECT * FROM api_keys WHERE application_id = $1 ${clause}`, [applicationId]);
  const [count] = await ctx.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM api_keys WHERE application_id = $1`, [applicationId]);
  return { totalResultSize: count!.n, data: rows.map(keyView) };
}

export async function deleteApiKey(ctx: ManagementContext, principal: Principal, applicationId: number, keyId: number): Promise<void> {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  const rows = await ctx.db.query(`DELETE FROM api_keys WHERE id = $1 AND application_id = $2 RETURNING id`, [keyId, applicationId]);
  if (rows.length === 0) throw notFound('API key', '/keyId');
  ctx.events.publish({ kind: 'api_keys', applicationId });
}

export interface ApiKeyResolverOptions {
  /** Backstop for a missed change announcement. Default 30 s. */
  ttlMs?: number;
}

/** What an Integration API key resolves to on this node (never sent between nodes). */
export interface ResolvedApiKey {
  app: AppRef;
  /** The key's id: what the edge rate-limits by. */
  keyId: number;
  /** The Application's secret for `Content-Signature` (HMAC-SHA256 key, used as UTF-8 text). */
  signingSecret: string;
}

interface CachedKey {
  key: ResolvedApiKey;
  expires: number;
  loadedAt: number;
}

/**
 * Resolves `Authorization: ApiKey-v1 <key>` to its Application. Resolved keys are cached by hash
 * (no database work on the hot path); a deleted key's Application announces the change, which
 * drops its entries at once. A key is read by one query at a time: the requests that find it
 * missing or stale meanwhile wait for that query instead of sending their own.
 */
export class ApiKeyResolver {
  private readonly cache = new Map<string, CachedKey>();
  private readonly loading = new Map<string, Promise<CachedKey | undefined>>();
  /** Moves with every configuration change: a read that began before one is not cached. */
  private generation = 0;
  private readonly hashes = new Map<string, string>();
  private readonly ttlMs: number;
  private readonly unsubscribe: () => void;

  constructor(private readonly ctx: ManagementContext, options: ApiKeyResolverOptions = {}) {
    this.ttlMs = options.ttlMs ?? 30_000;
    this.unsubscribe = ctx.events.subscribe((change) => {
      if (!isConfigurationChange(change)) return;
      this.generation++;
      this.loading.clear();
      for (const [hash, entry] of this.cache) if (entry.key.app.applicationId === change.applicationId) this.cache.delete(hash);
    });
  }

  async resolve(authorization: string | undefined): Promise<AppRef> {
    return (await this.resolveKey(authorization)).app;
  }

  /** Like resolve, with the key's id and the Application's signing secret. */
  async resolveKey(authorization: string | undefined): Promise<ResolvedApiKey> {
    const match = /^ApiKey-v1\s+(\S+)$/.exec(authorization ?? '');
    if (!match) throw unauthenticated('Missing or malformed `Authorization: ApiKey-v1 <key>` header');
    const hash = this.hashOf(match[1]!);
    const now = this.ctx.clock.now().getTime();
    let entry = this.cache.get(hash);
    if (!entry || now - entry.loadedAt > this.ttlMs) {
      entry = await this.load(hash, now);
      if (!entry) throw unauthenticated('Invalid API key');
    }
    if (entry.expires <= now) throw unauthenticated('Expired API key');
    return entry.key;
  }

  /** The key as stored (undefined: no such key), read once for all the requests that wait for it. */
  private load(hash: string, now: number): Promise<CachedKey | undefined> {
    const pending = this.loading.get(hash);
    if (pending) return pending;
    const generation = this.generation;
    const read = (async (): Promise<CachedKey | undefined> => {
      const [row] = await this.ctx.db.query<{ id: number; application_id: number; account_id: number; expires: Date; signing_secret: string }>(
        `SELECT k.id, k.application_id, a.account_id, k.expires, a.signing_secret FROM api_keys k JOIN applications a ON a.id = k.application_id
          WHERE k.key_hash = $1`,
        [hash],
      );
      const current = generation === this.generation;
      if (!row) {
        if (current) this.cache.delete(hash);
        return undefined;
      }
      const entry: CachedKey = {
        key: {
          app: { applicationId: row.application_id, accountId: row.account_id },
          keyId: Number(row.id),
          signingSecret: row.signing_secret,
        },
        expires: new Date(iso(row.expires)!).getTime(),
        loadedAt: now,
      };
      if (current) this.cache.set(hash, entry);
      return entry;
    })().finally(() => {
      if (this.loading.get(hash) === read) this.loading.delete(hash);
    });
    this.loading.set(hash, read);
    return read;
  }

  /** SHA-256 of a key, remembered for the keys in use (hashing on every request is measurable). */
  private hashOf(key: string): string {
    let hash = this.hashes.get(key);
    if (hash === undefined) {
      hash = sha256Hex(key);
      if (this.hashes.size >= 10_000) this.hashes.clear();
      this.hashes.set(key, hash);
    }
    return hash;
  }

  close(): void {
    this.unsubscribe();
  }
}
