import { describe, expect, it } from 'vitest';
import { ApiKeyResolver } from '../../services/management/api-keys.js';
import type { ManagementContext } from '../../services/management/context.js';
import { createLocalConfigEvents, sha256Hex } from '../../services/shared/index.js';

/**
 * A resolver over a database that knows one key and answers each query when the test says, so
 * that requests can arrive while a read is under way.
 */
function setup() {
  const known = new Set([sha256Hex('good-key')]);
  const queries: string[] = [];
  const answers: Array<() => void> = [];
  const events = createLocalConfigEvents();
  let now = Date.parse('2026-11-24T10:00:00Z');
  const db = {
    query: async (_text: string, params: unknown[]) => {
      const hash = params[0] as string;
      // What the read sees is decided when it starts (its snapshot), whenever it is answered.
      const exists = known.has(hash);
      queries.push(hash);
      await new Promise<void>((r) => answers.push(r));
      return exists ? [{ id: 7, application_id: 3, account_id: 2, expires: new Date('2027-01-01T00:00:00Z'), signing_secret: 's' }] : [];
    },
  };
  const ctx = { db, events, clock: { now: () => new Date(now) } } as unknown as ManagementContext;
  const resolver = new ApiKeyResolver(ctx, { ttlMs: 1_000 });
  /** Answers the queries sent so far (in the order given by `order`, indexes into them), and lets their callers go on. */
  const answer = async (order?: number[]) => {
    const pending = answers.splice(0);
    for (const i of order ?? pending.keys()) pending[i]!();
    await new Promise((r) => setImmediate(r));
  };
  return { resolver, queries, answer, events, known, later: (ms: number) => (now += ms) };
}

describe('ApiKeyResolver', () => {
  it('reads a key once for the requests that arrive while it is being read, and again once its entry is stale', async () => {
    const { resolver, queries, answer, later } = setup();
    const first = Array.from({ length: 20 }, () => resolver.resolve('ApiKey-v1 good-key'));
    await answer();
    expect(await Promise.all(first)).toEqual(Array.from({ length: 20 }, () => ({ applicationId: 3, accountId: 2 })));
    expect(queries).toHaveLength(1);
    // Cached: no query at all.
    expect(await resolver.resolve('ApiKey-v1 good-key')).toEqual({ applicationId: 3, accountId: 2 });
    expect(queries).toHaveLength(1);
    later(1_001);
    const again = Array.from({ length: 20 }, () => resolver.resolveKey('ApiKey-v1 good-key'));
    await answer();
    expect((await Promise.all(again)).map((k) => k.keyId)).toEqual(Array.from({ length: 20 }, () => 7));
    expect(queries).toHaveLength(2);
  });

  it('refuses every request that waited for an unknown key, with one query', async () => {
    const { resolver, queries, answer } = setup();
    const settled = Promise.allSettled(Array.from({ length: 5 }, () => resolver.resolve('ApiKey-v1 bad-key')));
    await answer();
    const outcomes = await settled;
    expect(outcomes.map((o) => (o.status === 'rejected' ? (o.reason as { kind: string; message: string }) : undefined))).toEqual(
      Array.from({ length: 5 }, () => expect.objectContaining({ kind: 'unauthenticated', message: 'Invalid API key' })),
    );
    expect(queries).toHaveLength(1);
  });

  it('does not cache a read that began before a configuration change: a deleted key is refused once the change is known', async () => {
    const { resolver, queries, answer, events, known } = setup();
    const before = resolver.resolve('ApiKey-v1 good-key');
    // The key is deleted while it is being read, and its Application announces the change.
    known.clear();
    events.publish({ kind: 'api_keys', applicationId: 3 });
    // A request after the change does not wait for the read begun before it.
    const after = resolver.resolve('ApiKey-v1 good-key').catch((e: Error) => e);
    expect(queries).toHaveLength(2);
    // The later read is answered first; the earlier one, which still saw the key, last.
    await answer([1, 0]);
    expect(await after).toMatchObject({ kind: 'unauthenticated', message: 'Invalid API key' });
    expect(await before).toEqual({ applicationId: 3, accountId: 2 });
    // Had the earlier read been cached, this would be let in without a query.
    const third = resolver.resolve('ApiKey-v1 good-key').catch((e: Error) => e);
    await answer();
    expect(await third).toMatchObject({ kind: 'unauthenticated', message: 'Invalid API key' });
    expect(queries).toHaveLength(3);
  });
});
