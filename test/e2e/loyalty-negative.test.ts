// Negative balances (issue 6): programs with allowNegativeBalance take deductions below zero as a
// debt that later active points pay first; parallel closes on Postgres against such a program and
// against a card shared by two profiles.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIntegrationClient, login, unwrap, type ManagementClient } from '../../sdk/index.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, setupShop, startTestNode, TestClock, type ShopSetup, type TestNode } from '../helpers/node.js';
import { addCampaign, rule } from '../helpers/promotions.js';
import { postgresUp } from '../helpers/services.js';

const DAY = 86_400_000;
const noop = { rules: [rule(false, [['noop']])], bindings: [], activate: true };
type Client = ShopSetup['integration'];
type Err = { errors: Array<{ title?: string; source?: { pointer?: string } }> };
const lines = (...prices: number[]) => prices.map((price, i) => ({ name: `Item ${i}`, sku: `SKU-${i}`, quantity: 1, price }));
const total = ['.', 'Session', 'Total'];

const updateSession = (c: Client, id: string, session: Record<string, unknown>, responseContent: string[] = []) =>
  c.PUT('/v2/customer_sessions/{customerSessionId}', {
    params: { path: { customerSessionId: id } },
    body: { customerSession: session as never, responseContent: responseContent as never },
  });
const closeSession = (c: Client, id: string, session: Record<string, unknown>, responseContent: string[] = []) => updateSession(c, id, { state: 'closed', ...session }, responseContent);
const touch = (c: Client, integrationId: string) => c.PUT('/v2/customer_profiles/{integrationId}', { params: { path: { integrationId } }, body: { attributes: {} } });

async function program(admin: ManagementClient, applicationId: number, body: Record<string, unknown> = {}) {
  return unwrap(
    await admin.POST('/v1/loyalty_programs', {
      body: { name: `n${Math.random().toString(36).slice(2, 10)}`, title: 'Points', subscribedApplications: [applicationId], ...body } as never,
    }),
  );
}

function points(admin: () => ManagementClient, programID: number) {
  const call = (path: 'add_points' | 'deduct_points', integrationID: string, body: Record<string, unknown>) =>
    admin().PUT(`/v1/loyalty_programs/{programID}/profile/{integrationID}/${path}` as '/v1/loyalty_programs/{programID}/profile/{integrationID}/add_points', {
      params: { path: { programID, integrationID } },
      body: body as never,
    });
  return {
    add: (integrationID: string, body: Record<string, unknown>) => call('add_points', integrationID, body),
    deduct: (integrationID: string, body: Record<string, unknown>) => call('deduct_points', integrationID, body),
    ledger: async (integrationID: string) =>
      unwrap(await admin().GET('/v1/loyalty_programs/{programID}/profile/{integrationID}', { params: { path: { programID, integrationID } } })).ledger,
  };
}

describe('negative balances (PGlite, controllable clock)', () => {
  let t: TestNode;
  const clock = new TestClock();
  let shop: ShopSetup;
  let neg: number;
  let p: ReturnType<typeof points>;

  beforeAll(async () => {
    t = await startTestNode('pglite', { clock, loyaltySchedulerMs: 100 });
    shop = await setupShop(t.url, t.admin, { ruleset: noop });
    const key = unwrap(
      await t.admin.POST('/v1/applications/{applicationId}/api_keys', {
        params: { path: { applicationId: shop.applicationId } },
        body: { title: 'long', expires: new Date(Date.now() + 800 * DAY).toISOString() },
      }),
    );
    shop = { ...shop, integration: createIntegrationClient({ baseUrl: t.url, apiKey: key.key, retries: 0 }) };
    const made = await program(t.admin, shop.applicationId, { allowNegativeBalance: true });
    expect(made.allowNegativeBalance).toBe(true);
    neg = made.id;
    p = points(() => t.admin, neg);
    // Spend 100 on small carts whatever the balance; earn the total on big ones; rules see the debt.
    await addCampaign(t.admin, shop.applicationId, [
      rule(['and', ['>', total, 0], ['<', total, 10]], [['deductLoyaltyPoints', neg, 100, { name: 'redeem' }]], 'spend'),
      rule(['>=', total, 100], [['addLoyaltyPoints', neg, total, { name: 'purchase' }]], 'earn'),
      rule(['and', ['>', total, 0], ['<', ['loyaltyBalance', neg], 0]], [['setDiscount', 'owes', 1]], 'owes'),
    ]);
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });
  const relogin = async () => {
    t.admin = (await login({ baseUrl: t.url, email: ADMIN_EMAIL, password: ADMIN_PASSWORD, retries: 0 })).client;
  };
  const debts = async (integrationId: string) =>
    (
      await t.node.db.query<{ uncovered: string }>(
        `SELECT t.uncovered::text AS uncovered FROM loyalty_transactions t JOIN customer_profiles p ON p.id = t.profile_id AND p.integration_id = $2
          WHERE t.program_id = $1 AND t.type = 'subtraction' ORDER BY t.id`,
        [neg, integrationId],
      )
    ).map((r) => Number(r.uncovered));

  it('takes a deduction below zero as a debt that later points pay first, on close and by Management', async () => {
    unwrap(await touch(shop.integration, 'nora'));
    unwrap(await p.add('nora', { points: 30 }));
    const spent = unwrap(await closeSession(shop.integration, 'nora-1', { profileId: 'nora', cartItems: lines(5) }, ['loyalty', 'event']));
    expect(spent.effects.find((e) => e.effectType === 'deductLoyaltyPoints')?.props).toMatchObject({ programId: neg, value: 100 });
    expect(spent.event!.ledgerEntries).toMatchObject([{ amount: -100, reason: 'redeem', loyaltyProgramId: neg, profileId: 'nora' }]);
    const entry = Object.values(spent.loyalty!.programs).find((x) => x.id === neg)!;
    expect(entry.ledger).toMatchObject({ currentBalance: 0, negativeBalance: 70, spentBalance: 100, tentativeNegativeBalance: 70 });
    expect(await p.ledger('nora')).toMatchObject({ total: 0, totalActivePoints: 0, totalNegativePoints: 70, totalSpentPoints: 100 });
    const balances = unwrap(
      await shop.integration.GET('/v1/loyalty_programs/{programID}/profile/{integrationID}/balances', { params: { path: { programID: neg, integrationID: 'nora' } } }),
    );
    expect(balances.balance).toMatchObject({ activePoints: 0, negativePoints: 70, spentPoints: 100 });

    // The rules see the debt as a negative balance.
    const owes = unwrap(await updateSession(shop.integration, 'nora-look', { profileId: 'nora', cartItems: lines(50) }));
    expect(owes.effects.filter((e) => e.effectType === 'setDiscount').map((e) => e.props.name)).toEqual(['owes']);

    // 100 new points: 70 pay the debt, 30 are left to spend.
    unwrap(await p.add('nora', { points: 100, name: 'gift' }));
    expect(await p.ledger('nora')).toMatchObject({ totalActivePoints: 30, totalNegativePoints: 0 });
    expect(await debts('nora')).toEqual([0]);
    // Management deducts past zero too, in this program.
    expect((await p.deduct('nora', { points: 50 })).response.status).toBe(200);
    expect(await p.ledger('nora')).toMatchObject({ totalActivePoints: 0, totalNegativePoints: 20, totalSpentPoints: 150 });

    // Pending points pay nothing until they start; then (without a request) they pay the debt first.
    unwrap(await p.add('nora', { points: 40, pendingDuration: '1D' }));
    expect(await p.ledger('nora')).toMatchObject({ totalActivePoints: 0, totalPendingPoints: 40, totalNegativePoints: 20 });
    clock.advance(DAY + 60_000);
    await relogin();
    expect(await p.ledger('nora')).toMatchObject({ totalActivePoints: 20, totalPendingPoints: 0, totalNegativePoints: 0 });
    for (let i = 0; i < 50 && (await debts('nora')).some((d) => d > 0); i++) await new Promise((r) => setTimeout(r, 100));
    expect(await debts('nora')).toEqual([0, 0]);

    // Cancelling the close gives its 100 points back to the grants they came from: 170 granted, 50 deducted.
    const undo = unwrap(await updateSession(shop.integration, 'nora-1', { state: 'cancelled' }, ['event']));
    expect(undo.event!.ledgerEntries).toMatchObject([{ amount: 100, reason: 'rollback' }]);
    expect(await p.ledger('nora')).toMatchObject({ totalActivePoints: 120, totalNegativePoints: 0, totalSpentPoints: 50 });
  });

  it('a cancelled purchase takes its points back even when they were spent, as a debt', async () => {
    unwrap(await closeSession(shop.integration, 'olga-1', { profileId: 'olga', cartItems: lines(120) }));
    expect(await p.ledger('olga')).toMatchObject({ totalActivePoints: 120 });
    unwrap(await closeSession(shop.integration, 'olga-2', { profileId: 'olga', cartItems: lines(5) }));
    expect(await p.ledger('olga')).toMatchObject({ totalActivePoints: 20, totalSpentPoints: 100 });
    const undo = unwrap(await updateSession(shop.integration, 'olga-1', { state: 'cancelled' }, ['event', 'loyalty']));
    expect(undo.event!.ledgerEntries).toMatchObject([{ amount: -120, reason: 'rollback', referenceId: expect.any(Number) }]);
    expect(Object.values(undo.loyalty!.programs).find((x) => x.id === neg)!.ledger).toMatchObject({ currentBalance: 0, negativeBalance: 100 });
    // Giving the spending back pays that debt.
    unwrap(await updateSession(shop.integration, 'olga-2', { state: 'cancelled' }));
    expect(await p.ledger('olga')).toMatchObject({ totalActivePoints: 0, totalNegativePoints: 0 });
  });

  it('a program that stops allowing it refuses deductions past the balance again, and keeps its debts payable', async () => {
    unwrap(await touch(shop.integration, 'pia'));
    unwrap(await p.deduct('pia', { points: 15 }));
    expect(await p.ledger('pia')).toMatchObject({ totalNegativePoints: 15 });
    const updated = unwrap(await t.admin.PUT('/v1/loyalty_programs/{programID}', { params: { path: { programID: neg } }, body: { allowNegativeBalance: false } }));
    expect(updated.allowNegativeBalance).toBe(false);
    const refused = await p.deduct('pia', { points: 1 });
    expect(refused.response.status).toBe(400);
    expect((refused.error as Err).errors[0]).toMatchObject({ title: 'InsufficientPoints', source: { pointer: '/points' } });
    unwrap(await p.add('pia', { points: 20 }));
    expect(await p.ledger('pia')).toMatchObject({ totalActivePoints: 5, totalNegativePoints: 0 });
    // Sessions are refused too, with their reason.
    const r = unwrap(await closeSession(shop.integration, 'pia-1', { profileId: 'pia', cartItems: lines(5) }, ['ruleFailureReasons']));
    expect(r.effects.map((e) => e.effectType)).not.toContain('deductLoyaltyPoints');
    expect(r.ruleFailureReasons!.map((f) => String(f.details).split(':')[0])).toEqual(['InsufficientLoyaltyPoints']);
    expect(await p.ledger('pia')).toMatchObject({ totalActivePoints: 5 });
    unwrap(await t.admin.PUT('/v1/loyalty_programs/{programID}', { params: { path: { programID: neg } }, body: { allowNegativeBalance: true } }));
  });
});

describe.skipIf(!postgresUp)('parallel closes on Postgres', () => {
  let t: TestNode;

  beforeAll(async () => {
    t = await startTestNode('postgres');
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  it('50 parallel closes on a program that allows a negative balance: every deduction applies exactly once', async () => {
    const shop = await setupShop(t.url, t.admin, { ruleset: noop, retries: 3 });
    const pid = (await program(t.admin, shop.applicationId, { allowNegativeBalance: true })).id;
    await addCampaign(t.admin, shop.applicationId, [rule(true, [['deductLoyaltyPoints', pid, 10]], 'spend')]);
    unwrap(await touch(shop.integration, 'racer'));
    const p = points(() => t.admin, pid);
    unwrap(await p.add('racer', { points: 105 }));
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => closeSession(shop.integration, `neg-race-${i}`, { profileId: 'racer', cartItems: lines(5) })));
    expect(results.map((r) => r.response.status)).toEqual(Array(50).fill(200));
    expect(results.filter((r) => r.data!.effects.some((e) => e.effectType === 'deductLoyaltyPoints'))).toHaveLength(50);
    const l = await p.ledger('racer');
    expect(l.transactions.filter((x) => x.type === 'subtraction')).toHaveLength(50);
    // Balance = grants - deductions: 105 - 500.
    expect(l).toMatchObject({ totalActivePoints: 0, totalNegativePoints: 395, totalSpentPoints: 500 });
    const [sums] = await t.node.db.query<{ consumed: string; uncovered: string }>(
      `SELECT (SELECT sum(c.amount) FROM loyalty_consumptions c JOIN loyalty_transactions s ON s.id = c.transaction_id WHERE s.program_id = $1)::text AS consumed,
              (SELECT sum(uncovered) FROM loyalty_transactions WHERE program_id = $1)::text AS uncovered`,
      [pid],
    );
    expect([Number(sums!.consumed), Number(sums!.uncovered)]).toEqual([105, 395]);
  }, 60_000);

  it('50 parallel closes by two profiles on one card: the card never goes below zero', async () => {
    const shop = await setupShop(t.url, t.admin, { ruleset: noop, retries: 3 });
    const pid = (await program(t.admin, shop.applicationId, { cardBased: true })).id;
    unwrap(await t.admin.POST('/v1/loyalty_programs/{programID}/cards', { params: { path: { programID: pid } }, body: { identifier: 'SHARED', profiles: ['sue', 'tom'] } }));
    await addCampaign(t.admin, shop.applicationId, [
      rule(['>=', total, 100], [['addLoyaltyPoints', pid, total]], 'earn'),
      rule(['<', total, 10], [['deductLoyaltyPoints', pid, 10]], 'spend'),
    ]);
    unwrap(await closeSession(shop.integration, 'fill', { profileId: 'sue', loyaltyCards: ['SHARED'], cartItems: lines(105) }));
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        closeSession(shop.integration, `card-race-${i}`, { profileId: i % 2 === 0 ? 'sue' : 'tom', loyaltyCards: ['SHARED'], cartItems: lines(5) }, ['ruleFailureReasons']),
      ),
    );
    expect(results.map((r) => r.response.status)).toEqual(Array(50).fill(200));
    const deducting = results.filter((r) => r.data!.effects.some((e) => e.effectType === 'deductLoyaltyPoints'));
    expect(deducting).toHaveLength(10);
    expect(results.filter((r) => r.data!.ruleFailureReasons!.some((f) => String(f.details).startsWith('InsufficientLoyaltyPoints')))).toHaveLength(40);
    const card = unwrap(await t.admin.GET('/v1/loyalty_programs/{programID}/cards/{cardId}', { params: { path: { programID: pid, cardId: 'SHARED' } } }));
    expect(card.ledger).toMatchObject({ currentBalance: 5, spentBalance: 100, negativeBalance: 0 });
    const [count] = await t.node.db.query<{ n: string }>(`SELECT count(*)::text AS n FROM loyalty_transactions WHERE program_id = $1 AND type = 'subtraction' AND card_id IS NOT NULL`, [pid]);
    expect(Number(count!.n)).toBe(10);
  }, 60_000);
});
