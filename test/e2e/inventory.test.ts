import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIntegrationClient, unwrap } from '../../sdk/index.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';
import { hoursFromNow, insertCoupon } from '../helpers/promotions.js';
import { postgresUp } from '../helpers/services.js';
import { otherAccount } from '../helpers/users.js';

const ALL = { profile: true, referrals: true, coupons: true, loyalty: true, achievements: true };

describe.skipIf(!postgresUp)('customer inventory', () => {
  let t: TestNode;
  let shop: ShopSetup;
  let other: ShopSetup;
  let programId: number;
  const ids: Record<string, number> = {};

  beforeAll(async () => {
    t = await startTestNode('postgres');
    shop = await setupShop(t.url, t.admin);
    other = await setupShop(t.url, t.admin);
    const db = t.node.db;
    const add = async (name: string, row: Parameters<typeof insertCoupon>[3], s: ShopSetup = shop) => (ids[name] = await insertCoupon(db, s.applicationId, s.campaignId, row));
    await add('hard', { value: 'HARD-1' });
    await add('soft', { value: 'SOFT-1' });
    await add('mine', { value: 'MINE-1', recipientIntegrationId: 'inv-ann' });
    await add('visible', { value: 'SEEN-1' });
    await add('unrelated', { value: 'NOPE-1' });
    await add('otherApp', { value: 'OTHR-1' }, other);
    await db.query(`UPDATE coupons SET is_reservation_mandatory = true WHERE id = $1`, [ids.hard]);
    await db.query(`UPDATE coupons SET implicitly_reserved = true WHERE id = ANY($1::bigint[])`, [[ids.visible, ids.otherApp]]);
    for (const [s, value] of [[shop, 'HARD-1'], [shop, 'SOFT-1'], [other, 'OTHR-1']] as const) {
      unwrap(await s.integration.POST('/v1/coupon_reservations/{couponValue}', { params: { path: { couponValue: value } }, body: { integrationIDs: ['inv-ann'] } }));
    }
    unwrap(await shop.integration.POST('/v1/coupon_reservations/{couponValue}', { params: { path: { couponValue: 'NOPE-1' } }, body: { integrationIDs: ['inv-bob'] } }));

    // A referral of ann as advocate (and one of bob that must not show).
    for (const advocate of ['inv-ann', 'inv-bob']) {
      unwrap(await shop.integration.POST('/v1/referrals', { body: { campaignId: shop.campaignId, advocateProfileIntegrationId: advocate } as never }));
    }
    // A program of the shop's Application with 30 points added, 5 deducted and 7 pending.
    const program = unwrap(await t.admin.POST('/v1/loyalty_programs', { body: { name: 'inv-points', title: 'Points', subscribedApplications: [shop.applicationId], allowSubledger: true } as never }));
    programId = program.id;
    unwrap(await t.admin.POST('/v1/loyalty_programs', { body: { name: 'inv-other', title: 'Other', subscribedApplications: [other.applicationId] } as never }));
    const points = (path: string, body: Record<string, unknown>) =>
      t.admin.PUT(`/v1/loyalty_programs/{programID}/profile/{integrationID}/${path}` as '/v1/loyalty_programs/{programID}/profile/{integrationID}/add_points', {
        params: { path: { programID: programId, integrationID: 'inv-ann' } },
        body: body as never,
      });
    for (const [path, body] of [
      ['add_points', { points: 30 }],
      ['deduct_points', { points: 5 }],
      ['add_points', { points: 7, pendingDuration: '2D' }],
      ['add_points', { points: 4, subLedgerID: 'shoes' }],
    ] as const) {
      const r = await points(path, body);
      expect(r.response.status, `${path} ${JSON.stringify(body)}: ${JSON.stringify(r.error)}`).toBeLessThan(300);
    }
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  const inventory = (s: ShopSetup, integrationId: string, query: Record<string, unknown> = ALL) =>
    s.integration.GET('/v1/customer_profiles/{integrationId}/inventory', { params: { path: { integrationId }, query: query as never } });

  it("shows the profile, its referrals, coupons (reserved, made for it, visible) and loyalty balances", async () => {
    const inv = unwrap(await inventory(shop, 'inv-ann'));
    expect(inv.profile).toMatchObject({ integrationId: 'inv-ann', closedSessions: 0, totalSales: 0 });
    expect(inv.referrals?.map((r) => [r.advocateProfileIntegrationId, r.campaignId])).toEqual([['inv-ann', shop.campaignId]]);
    expect(inv.coupons?.map((c) => c.value)).toEqual(['HARD-1', 'SOFT-1', 'MINE-1', 'SEEN-1']);
    expect(inv.coupons?.map((c) => [c.isReservationMandatory, c.implicitlyReserved])).toEqual([
      [true, false],
      [false, false],
      [false, false],
      [false, true],
    ]);
    expect(inv.coupons?.[2]).toMatchObject({ recipientIntegrationId: 'inv-ann', id: ids.mine });
    expect(inv.loyalty?.programs).toEqual({
      'inv-points': {
        id: programId,
        name: 'inv-points',
        title: 'Points',
        joined: expect.any(String),
        ledger: { activePoints: 25, pendingPoints: 7, spentPoints: 5, expiredPoints: 0 },
        subLedgers: { shoes: { activePoints: 4, pendingPoints: 0, spentPoints: 0, expiredPoints: 0 } },
      },
    });
    expect(inv.achievements).toEqual([]);
  });

  it('returns only the parts its flags ask for', async () => {
    expect(unwrap(await inventory(shop, 'inv-ann', {}))).toEqual({});
    const some = unwrap(await inventory(shop, 'inv-ann', { coupons: true, loyalty: false }));
    expect(Object.keys(some)).toEqual(['coupons']);
    // A profile with nothing shows empty parts, and programs it never joined with zero balances.
    unwrap(await shop.integration.PUT('/v2/customer_profiles/{integrationId}', { params: { path: { integrationId: 'inv-new' } }, body: { attributes: {} } }));
    const empty = unwrap(await inventory(shop, 'inv-new'));
    expect(empty.referrals).toEqual([]);
    expect(empty.coupons?.map((c) => c.value)).toEqual(['SEEN-1']);
    expect(empty.loyalty?.programs?.['inv-points']).toMatchObject({ ledger: { activePoints: 0, pendingPoints: 0, spentPoints: 0, expiredPoints: 0 }, subLedgers: {} });
  });

  it('answers 404 for an unknown profile and 400 for a bad flag', async () => {
    const missing = await inventory(shop, 'inv-nobody');
    expect(missing.response.status).toBe(404);
    expect(missing.error?.errors[0]?.source?.pointer).toBe('/path/integrationId');
    const bad = await inventory(shop, 'inv-ann', { coupons: 'maybe' });
    expect(bad.response.status).toBe(400);
    expect(bad.error?.errors[0]?.source?.pointer).toBe('/query/coupons');
    const nul = await inventory(shop, 'inv\u0000ann');
    expect(nul.response.status).toBe(400);
    expect(nul.error?.errors[0]?.source?.pointer).toBe('/path/integrationId');
  });

  it('answers 401 without or with a wrong API key', async () => {
    const client = createIntegrationClient({ baseUrl: t.url, apiKey: 'wrong-key', retries: 0 });
    const r = await client.GET('/v1/customer_profiles/{integrationId}/inventory', { params: { path: { integrationId: 'inv-ann' } } });
    expect(r.response.status).toBe(401);
    const res = await fetch(`${t.url}/v1/customer_profiles/inv-ann/inventory?profile=true`);
    expect(res.status).toBe(401);
    expect(((await res.json()) as { StatusCode: number }).StatusCode).toBe(401);
  });

  it("answers 404 for a profile of another account, and shows none of its coupons", async () => {
    const stranger = await otherAccount(t.node.db, t.url, 'inv-stranger@test.local');
    const theirs = await setupShop(t.url, stranger.client);
    const r = await inventory(theirs, 'inv-ann');
    expect(r.response.status).toBe(404);
    expect(r.error?.errors[0]?.source?.pointer).toBe('/path/integrationId');
    const reserve = await theirs.integration.POST('/v1/coupon_reservations/{couponValue}', { params: { path: { couponValue: 'HARD-1' } }, body: { integrationIDs: ['inv-ann'] } });
    expect(reserve.response.status).toBe(404);
    // Their own profile of the same ID is a different customer with an empty inventory.
    unwrap(await theirs.integration.PUT('/v2/customer_profiles/{integrationId}', { params: { path: { integrationId: 'inv-ann' } }, body: { attributes: {} } }));
    const own = unwrap(await inventory(theirs, 'inv-ann'));
    expect(own).toMatchObject({ profile: { integrationId: 'inv-ann', accountId: stranger.accountId }, referrals: [], coupons: [], loyalty: { programs: {} }, achievements: [] });
  });

  it("never shows another Application's coupons, referrals or programs", async () => {
    // Profiles belong to the account, so the other Application sees ann, with its own things only.
    const inv = unwrap(await inventory(other, 'inv-ann'));
    expect(inv.profile?.integrationId).toBe('inv-ann');
    expect(inv.referrals).toEqual([]);
    expect(inv.coupons?.map((c) => c.value)).toEqual(['OTHR-1']);
    expect(Object.keys(inv.loyalty?.programs ?? {})).toEqual(['inv-other']);
    // bob exists through a reservation in the shop: the other Application sees him, not the coupon.
    const bob = unwrap(await inventory(other, 'inv-bob', { coupons: true }));
    expect(bob.coupons?.map((c) => c.value)).toEqual(['OTHR-1']);
    const bobShop = unwrap(await inventory(shop, 'inv-bob', { coupons: true, referrals: true }));
    expect(bobShop.coupons?.map((c) => c.value)).toEqual(['SEEN-1', 'NOPE-1']);
    expect(bobShop.referrals?.map((r) => r.advocateProfileIntegrationId)).toEqual(['inv-bob']);
  });

  it('leaves an expired grant out of the active balance', async () => {
    await t.node.db.query(
      `UPDATE loyalty_transactions SET expiry_date = $1 WHERE program_id = $2 AND type = 'addition' AND subledger_id = 'shoes'`,
      [hoursFromNow(-1), programId],
    );
    const inv = unwrap(await inventory(shop, 'inv-ann', { loyalty: true }));
    expect(inv.loyalty?.programs?.['inv-points']?.subLedgers?.shoes).toEqual({ activePoints: 0, pendingPoints: 0, spentPoints: 0, expiredPoints: 4 });
  });
});
