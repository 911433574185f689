// Statements that join rows sent as one JSON parameter to tables: the plan a connection keeps for
// them (the generic plan, from the sixth execution on) is made while a new database's tables hold
// a few rows, and is kept as they grow (no ANALYZE on PGlite or on a server without autovacuum).
// Each must still find its rows by index, not scan a table or a whole account. The session batch
// has the same test in sessions-together.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADD_MEMBERS_SQL, REMOVE_MEMBERS_SQL } from '../../services/integration/audiences.js';
import { LIMIT_COUNTERS_SQL } from '../../services/integration/facts.js';
import { createTestDb, genericPlan, type AdapterName, type TestDb } from '../helpers/db.js';
import { postgresUp } from '../helpers/services.js';

const adapters: AdapterName[] = postgresUp ? ['pglite', 'postgres'] : ['pglite'];

describe.each(adapters)('generic plans of statements fed with JSON rows (%s)', (adapter) => {
  let t: TestDb;

  beforeAll(async () => {
    t = await createTestDb(adapter);
    // A new database: a few rows in each table, never analyzed.
    await t.db.query(`INSERT INTO accounts DEFAULT VALUES`);
    await t.db.query(`INSERT INTO applications (account_id, name, timezone, currency, signing_secret) VALUES (1, 'a', 'UTC', 'EUR', 'x')`);
    await t.db.query(`INSERT INTO campaigns (application_id, name) VALUES (1, 'c')`);
    await t.db.query(`INSERT INTO customer_profiles (account_id, integration_id) SELECT 1, 'p' || i FROM generate_series(1, 5) i`);
    await t.db.query(`INSERT INTO audiences (account_id, name) VALUES (1, 'au')`);
    await t.db.query(`INSERT INTO audience_memberships (audience_id, profile_id) SELECT 1, id FROM customer_profiles`);
    await t.db.query(`INSERT INTO limit_counters (campaign_id, action, entity, counter) VALUES (1, 'redeemCoupon', '', 1), (1, 'setDiscount', 'p1', 2)`);
  }, 30_000);
  afterAll(async () => {
    await t?.cleanup();
  });

  it('reads the limit counters of an evaluation by their primary key', async () => {
    const plan = await genericPlan(t.db, LIMIT_COUNTERS_SQL, ['jsonb', 'int'], [`'[]'`, '1']);
    expect(plan).toMatch(/Index Scan using limit_counters_pkey on limit_counters/);
    expect(plan).not.toMatch(/Seq Scan on limit_counters/);
  });

  it('adds audience memberships looking each profile up by account and integration id', async () => {
    const plan = await genericPlan(t.db, ADD_MEMBERS_SQL, ['int', 'jsonb', 'timestamptz', 'int'], ['1', `'[]'`, 'now()', '1']);
    expect(plan).toMatch(/Index Scan using customer_profiles_account_id_integration_id_key on customer_profiles/);
    expect(plan).toMatch(/Index Cond: \(\(account_id = \$1\) AND \(integration_id = /);
    expect(plan).not.toMatch(/(Seq|Bitmap Heap) Scan on customer_profiles/);
  });

  it('removes audience memberships by profile and audience, not by reading the audience or the account', async () => {
    const plan = await genericPlan(t.db, REMOVE_MEMBERS_SQL, ['int', 'jsonb', 'int'], ['1', `'[]'`, '1']);
    expect(plan).toMatch(/Index Cond: \(\(account_id = \$1\) AND \(integration_id = /);
    expect(plan).toMatch(/Index Scan using audience_memberships_pkey on audience_memberships m/);
    expect(plan).not.toMatch(/(Seq|Bitmap Heap) Scan on (customer_profiles|audience_memberships)/);
  });
});
