import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TransactionBatcher } from '../../services/store/index.js';
import { createTestDb, type AdapterName, type TestDb } from '../helpers/db.js';
import { postgresUp } from '../helpers/services.js';

const adapters: AdapterName[] = postgresUp ? ['pglite', 'postgres'] : ['pglite'];

describe.each(adapters)('TransactionBatcher (%s)', (adapter) => {
  let t: TestDb;

  beforeAll(async () => {
    t = await createTestDb(adapter);
    await t.db.exec(`CREATE TABLE batch_t (v int NOT NULL)`);
  }, 30_000);
  afterAll(async () => {
    await t?.cleanup();
  });

  it('commits writes that arrive while a batch is in flight together, in one transaction', async () => {
    const batcher = new TransactionBatcher(t.db, { maxInFlight: 1 });
    const txids = await Promise.all(
      Array.from({ length: 10 }, () => batcher.run(async (q) => (await q.query<{ x: string }>(`SELECT txid_current()::text AS x`))[0]!.x)),
    );
    // The first write found nothing in flight and went alone; the nine behind it shared one.
    expect(new Set(txids.slice(1)).size).toBe(1);
    expect(txids[0]).not.toBe(txids[1]);
  });

  it('keeps the other writes of a batch when one throws in the application', async () => {
    await t.db.exec(`DELETE FROM batch_t`);
    const batcher = new TransactionBatcher(t.db, { maxInFlight: 1 });
    const runs = Array.from({ length: 6 }, (_, i) =>
      batcher.run(async (q) => {
        await q.query(`INSERT INTO batch_t (v) VALUES ($1)`, [i]);
        if (i === 3) throw new Error('stale');
        return i;
      }),
    );
    const settled = await Promise.allSettled(runs);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    // An application error does not abort the transaction: what it wrote stays, like a statement of its own would.
    const rows = await t.db.query<{ v: number }>(`SELECT v FROM batch_t ORDER BY v`);
    expect(rows.map((r) => r.v)).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('runs every write of a batch again on its own when the database aborted the batch', async () => {
    await t.db.exec(`DELETE FROM batch_t`);
    const batcher = new TransactionBatcher(t.db, { maxInFlight: 1 });
    const runs = Array.from({ length: 6 }, (_, i) =>
      batcher.run(async (q) => {
        if (i === 2) await q.query(`SELECT 1 / 0`);
        await q.query(`INSERT INTO batch_t (v) VALUES ($1)`, [i]);
        return i;
      }),
    );
    const settled = await Promise.allSettled(runs);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled', 'fulfilled']);
    expect(String((settled[2] as PromiseRejectedResult).reason)).toMatch(/division by zero/);
    // Each other write happened exactly once.
    const rows = await t.db.query<{ v: number }>(`SELECT v FROM batch_t ORDER BY v`);
    expect(rows.map((r) => r.v)).toEqual([0, 1, 3, 4, 5]);
  });
});
