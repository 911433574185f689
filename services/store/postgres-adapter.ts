import postgres from 'postgres';
import { againOnConflict } from './conflicts.js';
import { assertSchemaName, type Db, type DbOptions, type Queryable, type Row } from './db.js';

/** The server adapter: a postgres.js pool. int8 is read as a JS number; numeric stays a string. */
export async function createPostgresDb(url: string, options: DbOptions = {}): Promise<Db> {
  const target = connectionOf(url);
  const schema = options.schema;
  if (schema !== undefined) {
    assertSchemaName(schema);
    const admin = postgres(target.url, { ...target.options, max: 1, onnotice: () => {} });
    try {
      await admin.unsafe(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    } finally {
      await admin.end();
    }
  }
  const sql = postgres(target.url, {
    ...target.options,
    max: options.maxConnections ?? 10,
    onnotice: () => {},
    types: {
      int8: { to: 20, from: [20], serialize: (x: unknown) => String(x), parse: (x: string) => Number(x) },
      // json/jsonb parameters are passed as JSON text by every caller (the PGlite adapter does the
      // same), so they are sent unchanged instead of being stringified a second time.
      json: {
        to: 3802,
        from: [114, 3802],
        serialize: (x: unknown) => (typeof x === 'string' ? x : JSON.stringify(x)),
        parse: (x: string) => JSON.parse(x) as unknown,
      },
    },
    ...(schema !== undefined ? { connection: { search_path: schema } } : {}),
  });

  const run = async <T extends Row>(exec: postgres.Sql | postgres.TransactionSql, text: string, params?: readonly unknown[]): Promise<T[]> => {
    // Named prepared statements: a statement is parsed and planned once per connection, and a
    // call is one round trip instead of two.
    const rows = await exec.unsafe(text, (params ?? []) as postgres.ParameterOrJSON<never>[], { prepare: true });
    return rows as unknown as T[];
  };

  const queryable = (exec: postgres.Sql | postgres.TransactionSql): Queryable => ({
    query: (text, params) => run(exec, text, params),
    exec: async (text) => {
      await exec.unsafe(text).simple();
    },
  });

  return {
    kind: 'postgres',
    ...queryable(sql),
    // A deadlock or serialization failure aborts the whole transaction and nothing of it stays:
    // it runs again, as the losing side of such a race should.
    transaction: <T>(fn: (tx: Queryable) => Promise<T>): Promise<T> =>
      againOnConflict(async () => (await sql.begin(async (tx) => fn(queryable(tx)))) as T),
    close: () => sql.end({ timeout: 5 }),
  };
}

/** libpq's form for a Unix socket, postgres://user@localhost/db?host=/var/run/postgresql, for postgres.js. */
function connectionOf(url: string): { url: string; options: { host?: string } } {
  const parsed = new URL(url);
  const socketDir = parsed.searchParams.get('host');
  if (!socketDir) return { url, options: {} };
  parsed.searchParams.delete('host');
  return { url: parsed.toString(), options: { host: socketDir } };
}
