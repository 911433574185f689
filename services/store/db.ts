import type { Logger } from '../shared/index.js';

export type Row = Record<string, unknown>;

/**
 * Anything that runs a parameterised statement: the database itself or an open transaction.
 * Parameters: json/jsonb values are passed as JSON text (`JSON.stringify(v)` with a `::jsonb`
 * cast), times as RFC 3339 strings, money as decimal strings.
 */
export interface Queryable {
  query<T extends Row = Row>(text: string, params?: readonly unknown[]): Promise<T[]>;
  /** Runs a script of several statements without parameters (migrations). */
  exec(text: string): Promise<void>;
}

export interface Db extends Queryable {
  readonly kind: 'postgres' | 'pglite';
  /** Runs fn in one transaction; commits when it resolves, rolls back when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export interface DbOptions {
  /** postgres:// URL; when absent the embedded PGlite adapter is used. */
  databaseUrl?: string | undefined;
  /** PGlite data directory (default ./data); `memory://` keeps it in memory. */
  dataDir?: string | undefined;
  /** Postgres schema to use (created when missing); lets tests share one server. */
  schema?: string | undefined;
  /** Pool size for the postgres adapter (default 10). */
  maxConnections?: number | undefined;
  logger?: Logger | undefined;
}

const schemaName = /^[a-z_][a-z0-9_]{0,62}$/;

export function assertSchemaName(schema: string): void {
  if (!schemaName.test(schema)) throw new Error(`invalid schema name ${JSON.stringify(schema)}`);
}
