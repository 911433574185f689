import { mkdirSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import type { Db, DbOptions, Queryable, Row } from './db.js';

/**
 * The embedded adapter. PGlite is one connection: a statement issued while a transaction is open
 * would run inside that transaction, so every use takes the same lock and a transaction holds it
 * until it ends.
 */
export async function createPgliteDb(options: DbOptions = {}): Promise<Db> {
  const dataDir = options.dataDir ?? './data';
  if (!dataDir.startsWith('memory://')) mkdirSync(dataDir, { recursive: true });
  const pg = new PGlite(dataDir);
  await pg.waitReady;

  let tail: Promise<unknown> = Promise.resolve();
  const exclusive = <T>(fn: () => Promise<T>): Promise<T> => {
    const next = tail.then(fn, fn);
    tail = next.catch(() => undefined);
    return next;
  };

  const query = async <T extends Row>(text: string, params?: readonly unknown[]): Promise<T[]> => {
    const result = await pg.query<T>(text, params as unknown[] | undefined);
    return result.rows;
  };

  return {
    kind: 'pglite',
    query: (text, params) => exclusive(() => query(text, params)),
    exec: (text) => exclusive(async () => void (await pg.exec(text))),
    transaction: <T>(fn: (tx: Queryable) => Promise<T>): Promise<T> =>
      exclusive(() =>
        pg.transaction(async (tx) =>
          fn({
            query: async <R extends Row>(text: string, params?: readonly unknown[]) =>
              (await tx.query<R>(text, params as unknown[] | undefined)).rows,
            exec: async (text: string) => void (await tx.exec(text)),
          }),
        ),
      ),
    close: () => exclusive(() => pg.close()),
  };
}
