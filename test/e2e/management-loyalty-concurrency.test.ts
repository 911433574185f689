import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unwrap } from '../../sdk/index.js';
import { postgresUp } from '../helpers/services.js';
import { startTestNode, type TestNode } from '../helpers/node.js';

type Err = { errors: Array<{ source?: { pointer?: string } }> } | undefined;

describe.skipIf(!postgresUp)('Management API: loyalty ledgers under concurrency (Postgres)', () => {
  let t: TestNode;

  beforeAll(async () => {
    t = await startTestNode('postgres');
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  const setup = async (name: string, integrationId: string) => {
    const p = unwrap(await t.admin.POST('/v1/loyalty_programs', { body: { name, title: name } }));
    await t.node.db.query(`INSERT INTO customer_profiles (account_id, integration_id) VALUES ((SELECT account_id FROM users ORDER BY id LIMIT 1), $1)`, [integrationId]);
    return { params: { path: { programID: p.id, integrationID: integrationId } } };
  };

  it('lets exactly 20 of 50 parallel deductions of 10 through a balance of 200, never below zero', async () => {
    const path = await setup('race', 'racer');
    // Three grants, so the deductions also race over which grant they take from.
    for (const [points, expiryDuration] of [[50, '1D'], [70, '2D'], [80, 'unlimited']] as const) {
      unwrap(await t.admin.PUT('/v1/loyalty_programs/{programID}/profile/{integrationID}/add_points', { ...path, body: { points, expiryDuration } }));
    }
    const started = Date.now();
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        t.admin.PUT('/v1/loyalty_programs/{programID}/profile/{integrationID}/deduct_points', { ...path, body: { points: 10, name: `d${i}` } }),
      ),
    );
    const elapsed = Date.now() - started;
    const statuses = results.map((r) => r.response.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(20);
    expect(statuses.filter((s) => s === 400)).toHaveLength(30);
    for (const r of results.filter((x) => x.response.status === 400)) {
      expect((r.error as Err)?.errors.map((e) => e.source?.pointer)).toEqual(['/points']);
    }
    const l = unwrap(await t.admin.GET('/v1/loyalty_programs/{programID}/profile/{integrationID}', path));
    expect(l.ledger).toMatchObject({ total: 0, totalSpentPoints: 200 });
    expect(l.ledger.transactions.filter((x) => x.type === 'subtraction')).toHaveLength(20);
    // Every grant is used up exactly, and what the deductions took adds up to what they say.
    const grants = await t.node.db.query<{ amount: string; remaining: string; taken: string }>(
      `SELECT g.amount::text AS amount, g.remaining::text AS remaining, (SELECT sum(amount) FROM loyalty_consumptions c WHERE c.grant_id = g.id)::text AS taken
       FROM loyalty_transactions g WHERE g.type = 'addition' AND g.profile_id = (SELECT id FROM customer_profiles WHERE integration_id = 'racer') ORDER BY g.id`,
    );
    expect(grants.map((g) => [Number(g.amount), Number(g.remaining), Number(g.taken)])).toEqual([
      [50, 0, 50],
      [70, 0, 70],
      [80, 0, 80],
    ]);
    console.log(`[loyalty] 50 parallel deduct_points: ${elapsed} ms`);
  }, 30_000);

  it('keeps the balance exact when additions and deductions race', async () => {
    const path = await setup('mixed', 'mixer');
    unwrap(await t.admin.PUT('/v1/loyalty_programs/{programID}/profile/{integrationID}/add_points', { ...path, body: { points: 150 } }));
    // 30 additions of 5 and 30 deductions of 5, interleaved; 150 to start with covers every
    // deduction even if all of them run before any addition, so all 60 must succeed.
    const results = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        i % 2 === 0
          ? t.admin.PUT('/v1/loyalty_programs/{programID}/profile/{integrationID}/add_points', { ...path, body: { points: 5 } })
          : t.admin.PUT('/v1/loyalty_programs/{programID}/profile/{integrationID}/deduct_points', { ...path, body: { points: 5 } }),
      ),
    );
    const adds = results.filter((_, i) => i % 2 === 0).map((r) => r.response.status);
    const deducted = results.filter((_, i) => i % 2 === 1 && results[i]!.response.status === 200).length;
    expect(adds.every((s) => s === 200)).toBe(true);
    expect(deducted).toBe(30);
    const l = unwrap(await t.admin.GET('/v1/loyalty_programs/{programID}/profile/{integrationID}', path));
    expect(l.ledger).toMatchObject({ total: 150, totalSpentPoints: 150 });
    expect(l.ledger.transactions).toHaveLength(61);
  }, 30_000);
});
