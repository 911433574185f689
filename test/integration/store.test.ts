import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPgliteDb, createPostgresDb, loadMigrations, migrate, type Db } from '../../services/store/index.js';
import { createTestDb, dropSchema, type AdapterName, type TestDb } from '../helpers/db.js';
import { postgresUp, TEST_DATABASE_URL, uniqueName } from '../helpers/services.js';

const adapters: AdapterName[] = postgresUp ? ['pglite', 'postgres'] : ['pglite'];

describe.each(adapters)('Db (%s adapter)', (adapter) => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb(adapter);
  });
  afterAll(async () => {
    await t?.cleanup();
  });

  it('records every migration once and applies nothing on a second run', async () => {
    const rows = await t.db.query<{ id: number }>('SELECT id FROM schema_migrations ORDER BY id');
    expect(rows.map((r) => r.id)).toEqual(loadMigrations().map((m) => m.id));
    expect(await migrate(t.db)).toEqual([]);
  });

  it('compresses the large values of sessions, events and access logs with lz4 on PostgreSQL; PGlite, without lz4, keeps pglz', async () => {
    const rows = await t.db.query<{ col: string; compression: string }>(
      `SELECT attrelid::regclass::text || '.' || attname AS col, attcompression::text AS compression FROM pg_attribute
        WHERE (attrelid = 'customer_sessions'::regclass AND attname IN ('cart_items', 'effects', 'committed_effects', 'committed_counters'))
           OR (attrelid = 'events'::regclass AND attname = 'effects')
           OR (attrelid = 'access_logs'::regclass AND attname IN ('request_payload', 'response_payload'))
        ORDER BY 1`,
    );
    expect(rows.map((r) => r.col)).toEqual([
      'access_logs.request_payload',
      'access_logs.response_payload',
      'customer_sessions.cart_items',
      'customer_sessions.committed_counters',
      'customer_sessions.committed_effects',
      'customer_sessions.effects',
      'events.effects',
    ]);
    expect(new Set(rows.map((r) => r.compression))).toEqual(new Set([adapter === 'postgres' ? 'l' : '']));
    // A payload large enough to be compressed is stored with it.
    const [row] = await t.db.query<{ id: number }>(
      `INSERT INTO access_logs (uuid, account_id, time, status, method, path, request_uri, response_payload)
       VALUES (gen_random_uuid(), 1, now(), 200, 'PUT', '/p', '/p', repeat('{"effectType":"setDiscount"},', 400)) RETURNING id`,
    );
    const [stored] = await t.db.query<{ method: string | null }>(`SELECT pg_column_compression(response_payload) AS method FROM access_logs WHERE id = $1`, [row!.id]);
    expect(stored?.method).toBe(adapter === 'postgres' ? 'lz4' : 'pglz');
  });

  it('reads int8 as numbers, numeric as exact strings and jsonb as objects', async () => {
    const [row] = await t.db.query<{ a: number; b: string; c: unknown }>(
      `SELECT 9007199254740::int8 AS a, 0.1::numeric + 0.2::numeric AS b, $1::jsonb AS c`,
      [JSON.stringify({ x: [1, 'y'] })],
    );
    expect(row).toEqual({ a: 9007199254740, b: '0.3', c: { x: [1, 'y'] } });
  });

  it('commits a transaction that resolves and rolls back one that throws', async () => {
    await t.db.query(`INSERT INTO accounts (company_name) VALUES ('kept')`);
    await t.db.transaction(async (tx) => {
      await tx.query(`INSERT INTO accounts (company_name) VALUES ('committed')`);
    });
    await expect(
      t.db.transaction(async (tx) => {
        await tx.query(`INSERT INTO accounts (company_name) VALUES ('rolled-back')`);
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    const names = (await t.db.query<{ company_name: string }>(`SELECT company_name FROM accounts ORDER BY id`)).map(
      (r) => r.company_name,
    );
    expect(names).toContain('committed');
    expect(names).toContain('kept');
    expect(names).not.toContain('rolled-back');
  });

  it('keeps statements outside a transaction out of it while it is open', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const tx = t.db.transaction(async (q) => {
      await q.query(`INSERT INTO accounts (company_name) VALUES ('inside')`);
      await gate;
      throw new Error('rollback');
    });
    const outside = t.db.query(`INSERT INTO accounts (company_name) VALUES ('outside')`);
    release();
    await expect(tx).rejects.toThrow('rollback');
    await outside;
    const names = (await t.db.query<{ company_name: string }>(`SELECT company_name FROM accounts`)).map(
      (r) => r.company_name,
    );
    expect(names).toContain('outside');
    expect(names).not.toContain('inside');
  });
});

describe.each(adapters)('migration 017: IDs of any length (%s adapter)', (adapter) => {
  let db: Db;
  let schema: string | undefined;
  beforeAll(async () => {
    schema = adapter === 'postgres' ? uniqueName('m17') : undefined;
    db = adapter === 'postgres' ? await createPostgresDb(TEST_DATABASE_URL, { schema, maxConnections: 2 }) : await createPgliteDb({ dataDir: 'memory://' });
  });
  afterAll(async () => {
    await db?.close();
    if (schema) await dropSchema(schema);
  });

  // Characters that would break a byte-for-byte copy: backslashes before digits (octal escapes to
  // decode), quotes, and one to four bytes of UTF-8.
  const tricky = ['', 'plain', '\\', '\\123\\x', "it's", 'é€😀', `${'\\0'.repeat(50)}𠀀`];

  it('keys sessions and limit counters stored before it on the SHA-256 of their UTF-8 bytes', async () => {
    const all = loadMigrations();
    await migrate(db, all.filter((m) => m.id < 17));
    await db.query(`INSERT INTO accounts (company_name) VALUES ('m17')`);
    const [app] = await db.query<{ id: number }>(
      `INSERT INTO applications (account_id, name, timezone, currency, signing_secret) SELECT id, 'm17', 'UTC', 'EUR', 's' FROM accounts RETURNING id`,
    );
    const [campaign] = await db.query<{ id: number }>(`INSERT INTO campaigns (application_id, name) VALUES ($1, 'c') RETURNING id`, [app!.id]);
    for (const id of tricky.filter((x) => x !== '')) {
      await db.query(`INSERT INTO customer_sessions (application_id, integration_id) VALUES ($1, $2)`, [app!.id, id]);
      await db.query(`INSERT INTO limit_counters (campaign_id, action, entity, counter) VALUES ($1, 'createCoupon', $2, 3)`, [campaign!.id, `p:${id}`]);
    }

    expect(await migrate(db)).toEqual(all.filter((m) => m.id >= 17).map((m) => m.id));

    for (const id of tricky) {
      const [h] = await db.query<{ same: boolean }>(`SELECT text_sha256($1) = sha256(convert_to($1, 'UTF8')) AS same`, [id]);
      expect(h!.same, JSON.stringify(id)).toBe(true);
    }
    for (const id of tricky.filter((x) => x !== '')) {
      const found = await db.query<{ integration_id: string }>(
        `SELECT integration_id FROM customer_sessions WHERE application_id = $1 AND integration_id_hash = text_sha256($2) AND integration_id = $2`,
        [app!.id, id],
      );
      expect(found.map((r) => r.integration_id)).toEqual([id]);
      // The unique key is the hash: the same ID again conflicts on it.
      const again = await db.query(
        `INSERT INTO customer_sessions (application_id, integration_id) VALUES ($1, $2) ON CONFLICT (application_id, integration_id_hash) DO NOTHING RETURNING id`,
        [app!.id, id],
      );
      expect(again).toEqual([]);
      const counted = await db.query<{ counter: string }>(
        `INSERT INTO limit_counters (campaign_id, action, entity, counter) VALUES ($1, 'createCoupon', $2, 1)
         ON CONFLICT (campaign_id, coupon_id, action, period, entity_hash) DO UPDATE SET counter = limit_counters.counter + 1 RETURNING counter`,
        [campaign!.id, `p:${id}`],
      );
      expect(Number(counted[0]!.counter)).toBe(4);
    }
  });

  it('stores IDs far past what a B-tree entry holds', async () => {
    // Incompressible: 20,000 distinct four-byte characters, 80,000 bytes.
    const long = Array.from({ length: 20_000 }, (_, i) => String.fromCodePoint(0x20000 + ((i * 7919) % 40000))).join('');
    const [app] = await db.query<{ id: number }>(`SELECT id FROM applications LIMIT 1`);
    const [session] = await db.query<{ id: number }>(`INSERT INTO customer_sessions (application_id, integration_id) VALUES ($1, $2) RETURNING id`, [app!.id, long]);
    await db.query(`INSERT INTO events (application_id, session_id, type) VALUES ($1, $2, 'e')`, [app!.id, long]);
    await db.query(`INSERT INTO session_returns (application_id, session_id, returned_cart_items) VALUES ($1, $2, '[]')`, [app!.id, long]);
    await db.query(`INSERT INTO audiences (account_id, name, integration, integration_id) SELECT id, 'a', $1, $1 FROM accounts`, [long.slice(0, 1000)]);
    const [found] = await db.query<{ id: number; events: number; returns: number }>(
      `SELECT s.id, (SELECT count(*) FROM events WHERE session_id = $2)::int AS events, (SELECT count(*) FROM session_returns WHERE session_id = $2)::int AS returns
         FROM customer_sessions s WHERE s.application_id = $1 AND s.integration_id_hash = text_sha256($2) AND s.integration_id = $2`,
      [app!.id, long],
    );
    expect(found).toEqual({ id: session!.id, events: 1, returns: 1 });
  });
});

describe.skipIf(!postgresUp)('postgres adapter connection', () => {
  it('connects over the Unix socket named by ?host=, as libpq does', async () => {
    const { createPostgresDb } = await import('../../services/store/index.js');
    const db = await createPostgresDb('postgres://postgres@localhost/test?host=/var/run/postgresql', { maxConnections: 1 });
    try {
      const [row] = await db.query<{ local: boolean }>(`SELECT inet_server_addr() IS NULL AS local`);
      expect(row).toEqual({ local: true });
    } finally {
      await db.close();
    }
  });
});
