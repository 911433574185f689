// Loyalty in sessions (issue 6, area J): addLoyaltyPoints / deductLoyaltyPoints final on close,
// rolled back on cancel and (pro rata) on returns; loyaltyBalance and Profile.Loyalty facts; a
// controllable clock for pending points, activation and expiry; parallel closes on Postgres.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIntegrationClient, login, unwrap } from '../../sdk/index.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, setupShop, startTestNode, TestClock, type ShopSetup, type TestNode } from '../helpers/node.js';
import { addCampaign, rule } from '../helpers/promotions.js';
import { createProgram, longKey, noopRuleset } from '../helpers/loyalty.js';
import { postgresUp } from '../helpers/services.js';
import { settleDueLedgers } from '../../services/integration/index.js';

const DAY = 86_400_000;
const noop = noopRuleset;
const program = async (t: TestNode, applicationId: number, body: Record<string, unknown> = {}): Promise<number> => (await createProgram(t.admin, applicationId, body)).id;

type Client = ShopSetup['integration'];
const closeSession = (c: Client, id: string, session: Record<string, unknown>, responseContent: string[] = []) =>
  c.PUT('/v2/customer_sessions/{customerSessionId}', {
    params: { path: { customerSessionId: id } },
    body: { customerSession: { state: 'closed', ...session } as never, responseContent: responseContent as never },
  });
const lines = (...prices: number[]) => prices.map((price, i) => ({ name: `Item ${i}`, sku: `SKU-${i}`, quantity: 1, price }));

/** A profile exists before Management adds points to it. */
const touch = (c: Client, integrationId: string) =>
  c.PUT('/v2/customer_profiles/{integrationId}', { params: { path: { integrationId } }, body: { attributes: {} } as never });

async function ledger(t: TestNode, programID: number, integrationID: string) {
  return unwrap(await t.admin.GET('/v1/loyalty_programs/{programID}/profile/{integrationID}', { params: { path: { programID, integrationID } } })).ledger;
}

/** The grants of a ledger with what is left of each, oldest first. */
async function grants(t: TestNode, programId: number, integrationId: string) {
  const rows = await t.node.db.query<{ amount: string; remaining: string; name: string }>(
    `SELECT t.amount::text AS amount, t.remaining::text AS remaining, t.name FROM loyalty_transactions t
       JOIN customer_profiles p ON p.id = t.profile_id AND p.integration_id = $2
      WHERE t.program_id = $1 AND t.type = 'addition' ORDER BY t.id`,
    [programId, integrationId],
  );
  return rows.map((r) => [r.name, Number(r.amount), Number(r.remaining)]);
}

describe('loyalty in sessions (PGlite, controllable clock)', () => {
  let t: TestNode;
  const clock = new TestClock();
  let shop: ShopSetup;
  let other: ShopSetup;
  let pid: number;

  beforeAll(async () => {
    t = await startTestNode('pglite', { clock, loyaltySchedulerMs: 100 });
    shop = await longKey(t, await setupShop(t.url, t.admin, { ruleset: noop }));
    other = await longKey(t, await setupShop(t.url, t.admin, { ruleset: noop }));
    pid = await program(t, shop.applicationId, {
      defaultPending: '7D',
      defaultValidity: '1Y',
      tiers: [
        { name: 'Silver', minPoints: 100 },
        { name: 'Gold', minPoints: 300 },
      ],
    });
    // Earn the session total on purchases of 10 or more; spend 50 points on small purchases when
    // the balance allows it; a Gold member's purchase is tagged through Profile.Loyalty.
    await addCampaign(t.admin, shop.applicationId, [
      rule(['>=', ['.', 'Session', 'Total'], 10], [['addLoyaltyPoints', pid, ['.', 'Session', 'Total'], { name: 'purchase' }]], 'earn'),
      rule(['and', ['<', ['.', 'Session', 'Total'], 10], ['>=', ['loyaltyBalance', pid], 50]], [['deductLoyaltyPoints', pid, 50, { name: 'redeem' }]], 'spend'),
    ]);
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });
  /** Management tokens expire with the moved clock: log in again. */
  const relogin = async () => {
    t.admin = (await login({ baseUrl: t.url, email: ADMIN_EMAIL, password: ADMIN_PASSWORD, retries: 0 })).client;
  };

  it('deducts on close from the earliest-expiring grants; a cancel gives the points back to them', async () => {
    unwrap(await touch(shop.integration, 'bob'));
    for (const [name, expiryDuration] of [
      ['late', '90D'],
      ['never', undefined],
      ['soon', '10D'],
    ] as const) {
      unwrap(
        await t.admin.PUT('/v1/loyalty_programs/{programID}/profile/{integrationID}/add_points', {
          params: { path: { programID: pid, integrationID: 'bob' } },
          body: { points: 30, name, pendingDuration: 'immediate', ...(expiryDuration ? { expiryDuration } : { expiryDuration: 'unlimited' }) } as never,
        }),
      );
    }
    const r = unwrap(await closeSession(shop.integration, 'spend-1', { profileId: 'bob', cartItems: lines(5) }));
    expect(r.effects.find((e) => e.effectType === 'deductLoyaltyPoints')?.props).toMatchObject({ programId: pid, value: 50, name: 'redeem' });
    // 30 from the grant expiring in 10 days, 20 from the one in 90 days, none from the unlimited one.
    expect(await grants(t, pid, 'bob')).toEqual([
      ['late', 30, 10],
      ['never', 30, 30],
      ['soon', 30, 0],
    ]);
    expect(await ledger(t, pid, 'bob')).toMatchObject({ totalActivePoints: 40, totalSpentPoints: 50 });

    // 40 left: the rule no longer fires (no negative balance).
    const second = unwrap(await closeSession(shop.integration, 'spend-2', { profileId: 'bob', cartItems: lines(5) }));
    expect(second.effects.map((e) => e.effectType)).not.toContain('deductLoyaltyPoints');

    const cancelled = unwrap(
      await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'spend-1' } },
        body: { customerSession: { state: 'cancelled' } },
      }),
    );
    expect(cancelled.effects.map((e) => e.effectType)).toContain('rollbackDeductedLoyaltyPoints');
    expect(await grants(t, pid, 'bob')).toEqual([
      ['late', 30, 30],
      ['never', 30, 30],
      ['soon', 30, 30],
    ]);
    expect(await ledger(t, pid, 'bob')).toMatchObject({ totalActivePoints: 90, totalSpentPoints: 0 });
  });

  it('a return takes back the earned points pro rata', async () => {
    unwrap(await closeSession(shop.integration, 'earn-ret', { profileId: 'cid', cartItems: lines(150, 50) }));
    expect(await grants(t, pid, 'cid')).toEqual([['purchase', 200, 200]]);
    const r = await shop.integration.POST('/v2/customer_sessions/{customerSessionId}/returns', {
      params: { path: { customerSessionId: 'earn-ret' } },
      body: { return: { returnedCartItems: [{ position: 1 }] as never } },
    });
    expect(r.response.status).toBe(200);
    // A quarter of the purchase came back: a quarter of the points go.
    expect(await grants(t, pid, 'cid')).toEqual([['purchase', 200, 150]]);
    const l = await ledger(t, pid, 'cid');
    expect(l.transactions.map((x) => [x.type, x.amount, x.name])).toEqual([
      ['addition', 200, 'purchase'],
      ['subtraction', 50, 'rollback'],
    ]);
  });

  it('Profile.Loyalty gives the balance, pending balance and tier of the session profile to the rules', async () => {
    const club = `club${Date.now()}`;
    const cid = await program(t, shop.applicationId, { name: club, tiers: [{ name: 'Silver', minPoints: 100 }, { name: 'Gold', minPoints: 300 }] });
    await addCampaign(t.admin, shop.applicationId, [
      rule(['=', ['.', 'Profile', 'Loyalty', club, 'Tier'], 'Gold'], [['setDiscount', 'gold', 1]], 'gold'),
      rule(['=', ['.', 'Profile', 'Loyalty', club, 'Balance'], 300], [['setDiscount', 'exact', 2]], 'exact'),
    ]);
    unwrap(await touch(shop.integration, 'dora'));
    const silver = unwrap(await closeSession(shop.integration, 'dora-0', { profileId: 'dora', cartItems: lines(5) }));
    expect(silver.effects.filter((e) => e.effectType === 'setDiscount')).toEqual([]);
    unwrap(
      await t.admin.PUT('/v1/loyalty_programs/{programID}/profile/{integrationID}/add_points', {
        params: { path: { programID: cid, integrationID: 'dora' } },
        body: { points: 300, pendingDuration: 'immediate' } as never,
      }),
    );
    const gold = unwrap(await closeSession(shop.integration, 'dora-1', { profileId: 'dora', cartItems: lines(5) }));
    expect(gold.effects.filter((e) => e.effectType === 'setDiscount').map((e) => e.props.name)).toEqual(['gold', 'exact']);
  });

  it('balances: active, pending, spent, tier and pointsToNextTier; loyalty in the v2 state', async () => {
    unwrap(await touch(shop.integration, 'gus'));
    const add = (points: number, pendingDuration = 'immediate') =>
      t.admin.PUT('/v1/loyalty_programs/{programID}/profile/{integrationID}/add_points', {
        params: { path: { programID: pid, integrationID: 'gus' } },
        body: { points, pendingDuration } as never,
      });
    unwrap(await add(120));
    unwrap(await add(40, '3D'));
    const balances = (client: Client, programID: number, integrationID: string, query: Record<string, unknown> = {}) =>
      client.GET('/v1/loyalty_programs/{programID}/profile/{integrationID}/balances', { params: { path: { programID, integrationID }, query: query as never } });
    const b = unwrap(await balances(shop.integration, pid, 'gus'));
    expect(b.balance).toEqual({
      activePoints: 120,
      pendingPoints: 40,
      spentPoints: 0,
      expiredPoints: 0,
      negativePoints: 0,
      currentTier: { name: 'Silver', minPoints: 100 },
      pointsToNextTier: 180,
      nextTierName: 'Gold',
    });
    expect(b.subLedgerBalances).toEqual({});
    // As of four days on, the pending points are active.
    const later = unwrap(await balances(shop.integration, pid, 'gus', { endDate: new Date(clock.now().getTime() + 4 * DAY).toISOString() }));
    expect(later.balance).toMatchObject({ activePoints: 160, pendingPoints: 0, pointsToNextTier: 140 });

    // Spending on close moves the tier down.
    unwrap(await closeSession(shop.integration, 'gus-spend', { profileId: 'gus', cartItems: lines(5) }));
    const after = unwrap(await balances(shop.integration, pid, 'gus'));
    expect(after.balance).toMatchObject({ activePoints: 70, spentPoints: 50, pointsToNextTier: 30, nextTierName: 'Silver' });
    expect(after.balance!.currentTier).toBeUndefined();

    // The v2 state's loyalty part, on a session update and a profile update.
    const state = unwrap(
      await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'gus-look' } },
        body: { customerSession: { profileId: 'gus', cartItems: lines(5) } as never, responseContent: ['loyalty'] as never },
      }),
    ) as unknown as { loyalty: { cards: unknown[]; programs: Record<string, { id: number; ledger: Record<string, unknown>; joinDate: string }> } };
    const entry = Object.values(state.loyalty.programs).find((p) => p.id === pid)!;
    expect(entry.ledger).toMatchObject({ currentBalance: 70, pendingBalance: 40, spentBalance: 50, negativeBalance: 0, expiredBalance: 0, pointsToNextTier: 30 });
    expect(Date.parse(entry.joinDate)).not.toBeNaN();
    expect(state.loyalty.cards).toEqual([]);
    const viaProfile = unwrap(
      await shop.integration.PUT('/v2/customer_profiles/{integrationId}', {
        params: { path: { integrationId: 'gus' } },
        body: { attributes: {}, responseContent: ['loyalty'] } as never,
      }),
    ) as unknown as { loyalty: { programs: Record<string, { id: number; ledger: Record<string, unknown> }> } };
    expect(Object.values(viaProfile.loyalty.programs).find((p) => p.id === pid)!.ledger).toMatchObject({ currentBalance: 70 });

    // Bad input, keys, other Applications and unknown profiles.
    const bad = await balances(shop.integration, pid, 'gus', { endDate: 'yesterday' });
    expect(bad.response.status).toBe(400);
    expect((bad.error as { errors: Array<{ source: { pointer: string } }> }).errors[0]!.source.pointer).toContain('endDate');
    const badId = await balances(shop.integration, 0, 'gus');
    expect(badId.response.status).toBe(400);
    const anonymous = createIntegrationClient({ baseUrl: t.url, apiKey: 'not-a-key', retries: 0 });
    expect((await balances(anonymous, pid, 'gus')).response.status).toBe(401);
    // The other Application does not subscribe to the program: it does not exist there.
    const foreign = await balances(other.integration, pid, 'gus');
    expect(foreign.response.status).toBe(404);
    expect((foreign.error as { errors: Array<{ source: { pointer: string } }> }).errors[0]!.source.pointer).toBe('/programID');
    const nobody = await balances(shop.integration, pid, 'nobody-here');
    expect(nobody.response.status).toBe(404);
  });

  it('replays the identical body, loyalty and ledger entries included, for a close sent again with its Idempotency-Key', async () => {
    unwrap(await touch(shop.integration, 'ida'));
    const send = () =>
      shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'ida-1' } },
        body: { customerSession: { profileId: 'ida', state: 'closed', cartItems: lines(30) } as never, responseContent: ['loyalty', 'customerProfile', 'customerSession', 'event', 'triggeredCampaigns'] as never },
        headers: { 'Idempotency-Key': 'ida-close' },
      });
    const first = await send();
    expect(first.response.status).toBe(200);
    const body = first.data as unknown as { loyalty: { programs: Record<string, { id: number; ledger: { pendingBalance: number } }> } };
    expect(Object.values(body.loyalty.programs).find((p) => p.id === pid)!.ledger.pendingBalance).toBe(30);
    const again = await send();
    expect(again.response.status).toBe(200);
    expect(again.data).toEqual(first.data);
    // Earned once; the key with another body is refused.
    expect(await grants(t, pid, 'ida')).toEqual([['purchase', 30, 30]]);
    const other = await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
      params: { path: { customerSessionId: 'ida-1' } },
      body: { customerSession: { profileId: 'ida', state: 'closed', cartItems: lines(31) } as never },
      headers: { 'Idempotency-Key': 'ida-close' },
    });
    expect(other.response.status).toBe(409);
  });

  it("another Application's program earns nothing, and the other Application's sessions earn nothing in it", async () => {
    const foreign = await program(t, other.applicationId);
    await addCampaign(t.admin, shop.applicationId, [rule(true, [['addLoyaltyPoints', foreign, 10]], 'foreign')]);
    unwrap(await closeSession(shop.integration, 'foreign-1', { profileId: 'eve', cartItems: lines(20) }));
    expect(await grants(t, foreign, 'eve')).toEqual([]);
    expect(await grants(t, pid, 'eve')).toEqual([['purchase', 20, 20]]);
    unwrap(await closeSession(other.integration, 'other-1', { profileId: 'eve', cartItems: lines(20) }));
    expect(await grants(t, pid, 'eve')).toEqual([['purchase', 20, 20]]);
  });
  it('earns on close: pending for 7 days, then active for a year from its start, then expired', async () => {
    const start = clock.now().getTime();
    const r = unwrap(await closeSession(shop.integration, 'earn-1', { profileId: 'ann', cartItems: lines(120, 80) }));
    const add = r.effects.find((e) => e.effectType === 'addLoyaltyPoints');
    expect(add?.props).toMatchObject({ programId: pid, value: 200, recipientIntegrationId: 'ann', name: 'purchase' });

    let l = await ledger(t, pid, 'ann');
    expect(l).toMatchObject({ totalActivePoints: 0, totalPendingPoints: 200, totalSpentPoints: 0 });
    const entry = l.transactions[0]!;
    expect(entry).toMatchObject({ type: 'addition', amount: 200, customerSessionID: 'earn-1', name: 'purchase' });
    const startDate = Date.parse(entry.startDate!);
    expect(startDate - start).toBeGreaterThanOrEqual(7 * DAY);
    expect(startDate - start).toBeLessThan(7 * DAY + 60_000);
    expect(new Date(entry.expiryDate!).toISOString()).toBe(new Date(new Date(startDate).setUTCFullYear(new Date(startDate).getUTCFullYear() + 1)).toISOString());

    // Pending points cannot be spent.
    const early = unwrap(await closeSession(shop.integration, 'spend-early', { profileId: 'ann', cartItems: lines(5) }));
    expect(early.effects.map((e) => e.effectType)).not.toContain('deductLoyaltyPoints');

    clock.advance(7 * DAY + 60_000);
    await relogin();
    l = await ledger(t, pid, 'ann');
    expect(l).toMatchObject({ totalActivePoints: 200, totalPendingPoints: 0 });

    clock.advance(366 * DAY);
    await relogin();
    l = await ledger(t, pid, 'ann');
    expect(l).toMatchObject({ totalActivePoints: 0, totalExpiredPoints: 200 });
    // The scheduler writes the expiry off without any request, once.
    const expires = async () =>
      (
        await t.node.db.query<{ amount: string }>(
          `SELECT t.amount::text AS amount FROM loyalty_transactions t JOIN customer_profiles p ON p.id = t.profile_id AND p.integration_id = 'ann'
            WHERE t.program_id = $1 AND t.type = 'expire'`,
          [pid],
        )
      ).map((r) => Number(r.amount));
    for (let i = 0; i < 50 && (await expires()).length === 0; i++) await new Promise((r) => setTimeout(r, 100));
    await new Promise((r) => setTimeout(r, 300));
    expect(await expires()).toEqual([200]);
    expect(await grants(t, pid, 'ann')).toEqual([['purchase', 200, 0]]);
  });

});

describe.skipIf(!postgresUp)('loyalty deductions racing on Postgres', () => {
  let t: TestNode;

  beforeAll(async () => {
    t = await startTestNode('postgres');
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  it('50 parallel closes spending 10 points each from a balance of 105: exactly 10 deduct, the balance never goes below zero', async () => {
    const shop = await setupShop(t.url, t.admin, { ruleset: noop, retries: 3 });
    const pid = await program(t, shop.applicationId);
    await addCampaign(t.admin, shop.applicationId, [rule(['>=', ['loyaltyBalance', pid], 10], [['deductLoyaltyPoints', pid, 10]], 'spend')]);
    unwrap(await touch(shop.integration, 'racer'));
    unwrap(
      await t.admin.PUT('/v1/loyalty_programs/{programID}/profile/{integrationID}/add_points', {
        params: { path: { programID: pid, integrationID: 'racer' } },
        body: { points: 105 } as never,
      }),
    );
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => closeSession(shop.integration, `race-${i}`, { profileId: 'racer', cartItems: lines(5) })),
    );
    expect(results.map((r) => r.response.status)).toEqual(Array(50).fill(200));
    const deducting = results.filter((r) => r.data!.effects.some((e) => e.effectType === 'deductLoyaltyPoints'));
    expect(deducting).toHaveLength(10);
    const l = await ledger(t, pid, 'racer');
    expect(l).toMatchObject({ totalActivePoints: 5, totalSpentPoints: 100 });
    expect(l.transactions.filter((x) => x.type === 'subtraction')).toHaveLength(10);
  }, 30_000);

  it('settles each expired grant exactly once when schedulers run in parallel', async () => {
    const shop = await setupShop(t.url, t.admin, { ruleset: noop });
    const pid = await program(t, shop.applicationId);
    for (const who of ['x1', 'x2', 'x3']) {
      unwrap(await touch(shop.integration, who));
      unwrap(
        await t.admin.PUT('/v1/loyalty_programs/{programID}/profile/{integrationID}/add_points', {
          params: { path: { programID: pid, integrationID: who } },
          body: { points: 7, expiryDuration: '1s' } as never,
        }),
      );
    }
    await new Promise((r) => setTimeout(r, 1200));
    await Promise.all(Array.from({ length: 5 }, () => settleDueLedgers(t.node.db, new Date())));
    const rows = await t.node.db.query<{ n: string; total: string }>(
      `SELECT count(*)::text AS n, sum(amount)::text AS total FROM loyalty_transactions WHERE program_id = $1 AND type = 'expire'`,
      [pid],
    );
    expect(rows[0]).toEqual({ n: '3', total: '21' });
    expect(await ledger(t, pid, 'x1')).toMatchObject({ totalActivePoints: 0, totalExpiredPoints: 7 });
  }, 20_000);
});
