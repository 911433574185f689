import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Db } from './db.js';

export interface Migration {
  id: number;
  name: string;
  sql: string;
}

const migrationsDir = fileURLToPath(new URL('./migrations/', import.meta.url));

/** Numbered files `NNN_name.sql`, in order. */
export function loadMigrations(dir = migrationsDir): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{3}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((f) => ({ id: Number(f.slice(0, 3)), name: f.slice(4, -4), sql: readFileSync(dir + f, 'utf8') }));
}

/**
 * Applies the pending migrations, each inside one transaction and recorded in schema_migrations.
 * An advisory lock makes nodes that start together on one server apply them once.
 */
export async function migrate(db: Db, migrations = loadMigrations()): Promise<number[]> {
  await db.query(
    `CREATE TABLE IF NOT EXISTS schema_migrations (id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
  );
  const applied: number[] = [];
  for (const m of migrations) {
    const done = await db.transaction(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(7263501)`);
      const rows = await tx.query(`SELECT 1 FROM schema_migrations WHERE id = $1`, [m.id]);
      if (rows.length > 0) return false;
      await tx.exec(m.sql);
      await tx.query(`INSERT INTO schema_migrations (id, name) VALUES ($1, $2)`, [m.id, m.name]);
      return true;
    });
    if (done) applied.push(m.id);
  }
  return applied;
}
