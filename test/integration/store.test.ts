import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadMigrations, migrate } from '../../services/store/index.js';
import { createTestDb, type AdapterName, type TestDb } from '../helpers/db.js';
import { postgresUp } from '../helpers/services.js';

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
