import postgres from 'postgres';
import { createPgliteDb, createPostgresDb, migrate, type Db } from '../../services/store/index.js';
import { TEST_DATABASE_URL, uniqueName } from './services.js';

export type AdapterName = 'postgres' | 'pglite';

export interface TestDb {
  db: Db;
  /** The schema (postgres) the database lives in, for nodes that must share it. */
  schema?: string;
  cleanup(): Promise<void>;
}

/** A migrated database of either adapter, isolated from every other test file. */
export async function createTestDb(adapter: AdapterName): Promise<TestDb> {
  if (adapter === 'pglite') {
    const db = await createPgliteDb({ dataDir: 'memory://' });
    await migrate(db);
    return { db, cleanup: () => db.close() };
  }
  const schema = uniqueName('t');
  const db = await createPostgresDb(TEST_DATABASE_URL, { schema, maxConnections: 20 });
  await migrate(db);
  return { db, schema, cleanup: async () => { await db.close(); await dropSchema(schema); } };
}

export async function dropSchema(schema: string): Promise<void> {
  const sql = postgres(TEST_DATABASE_URL, { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  } finally {
    await sql.end();
  }
}
