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

/**
 * The plan a connection keeps for a prepared statement from its sixth execution on (PostgreSQL's
 * generic plan, forced here), made for the tables as they are now: `types` are the parameters'
 * types, `args` the literals EXPLAIN EXECUTE passes.
 */
export async function genericPlan(db: Db, sql: string, types: readonly string[], args: readonly string[]): Promise<string> {
  return db.transaction(async (tx) => {
    await tx.exec(`SET LOCAL plan_cache_mode = force_generic_plan`);
    await tx.exec(`PREPARE generic_plan(${types.join(', ')}) AS ${sql}`);
    try {
      const rows = await tx.query<{ 'QUERY PLAN': string }>(`EXPLAIN EXECUTE generic_plan(${args.join(', ')})`);
      return rows.map((r) => r['QUERY PLAN']).join('\n');
    } finally {
      await tx.exec(`DEALLOCATE generic_plan`);
    }
  });
}
