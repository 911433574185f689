import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIntegrationClient, unwrap } from '../../sdk/index.js';
import { cart } from '../helpers/fixtures.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';
import { effectSummary, hoursFromNow, insertCoupon, rule } from '../helpers/promotions.js';
import { postgresUp } from '../helpers/services.js';

const couponRuleset = () => ({ rules: [rule(['couponValid'], [['setDiscount', 'coupon', 10]], 'with coupon')], bindings: [], activate: true });

describe.skipIf(!postgresUp)('coupon reservations', () => {
  let t: TestNode;
  let shop: ShopSetup;
  let other: ShopSetup;

  beforeAll(async () => {
    t = await startTestNode('postgres');
    shop = await setupShop(t.url, t.admin, { ruleset: couponRuleset(), application: { caseSensitivity: 'insensitive-uppercase' } });
    other = await setupShop(t.url, t.admin, { ruleset: couponRuleset() });
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  let seq = 0;
  /** A coupon of the shop's campaign; hard when `mandatory`, with a reservation limit when given. */
  const coupon = async (s: ShopSetup, opts: { mandatory?: boolean; reservationLimit?: number; expiryDate?: string; recipientIntegrationId?: string } = {}) => {
    const value = `RES${++seq}X`;
    const id = await insertCoupon(t.node.db, s.applicationId, s.campaignId, {
      value,
      ...(opts.expiryDate ? { expiryDate: opts.expiryDate } : {}),
      ...(opts.recipientIntegrationId ? { recipientIntegrationId: opts.recipientIntegrationId } : {}),
    });
    await t.node.db.query(`UPDATE coupons SET is_reservation_mandatory = $2, reservation_limit = $3 WHERE id = $1`, [id, opts.mandatory ?? false, opts.reservationLimit ?? 0]);
    return { id, value };
  };
  const reserve = (s: ShopSetup, couponValue: string, integrationIDs: unknown) =>
    s.integration.POST('/v1/coupon_reservations/{couponValue}', { params: { path: { couponValue } }, body: { integrationIDs } as never });
  const unreserve = (s: ShopSetup, couponValue: string, integrationIDs: unknown) =>
    s.integration.DELETE('/v1/coupon_reservations/{couponValue}', { params: { path: { couponValue } }, body: { integrationIDs } as never });
  const holders = (s: ShopSetup, couponValue: string) =>
    s.integration.GET('/v1/coupon_reservations/customerprofiles/{couponValue}', { params: { path: { couponValue } } });
  const holderIds = async (s: ShopSetup, couponValue: string) => {
    const list = unwrap(await holders(s, couponValue));
    expect(list.totalResultSize).toBe(list.data.length);
    return list.data.map((p) => p.integrationId);
  };
  const put = async (s: ShopSetup, id: string, customerSession: Record<string, unknown>) =>
    unwrap(await s.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: id } }, body: { customerSession: customerSession as never } }));

  it('creates reservations (creating missing profiles), lists the holders and deletes them', async () => {
    const c = await coupon(shop);
    const created = await reserve(shop, c.value, ['ann', 'bob']);
    expect(created.response.status).toBe(201);
    expect(created.data).toMatchObject({ id: c.id, value: c.value, campaignId: shop.campaignId, reservationCounter: 2, reservationLimit: 0, isReservationMandatory: false, implicitlyReserved: false });

    // Lower case matches under insensitive-uppercase; a holder listed again is not counted again.
    const again = unwrap(await reserve(shop, c.value.toLowerCase(), ['bob', 'cid', 'cid']));
    expect(again.reservationCounter).toBe(3);
    expect(await holderIds(shop, c.value)).toEqual(['ann', 'bob', 'cid']);
    const list = unwrap(await holders(shop, c.value.toLowerCase()));
    expect(list.data[0]).toMatchObject({ integrationId: 'ann', closedSessions: 0, totalSales: 0, attributes: {} });

    const deleted = await unreserve(shop, c.value, ['bob', 'nobody']);
    expect(deleted.response.status).toBe(204);
    expect(await holderIds(shop, c.value)).toEqual(['ann', 'cid']);
    const [row] = await t.node.db.query<{ reservation_counter: number }>(`SELECT reservation_counter FROM coupons WHERE id = $1`, [c.id]);
    expect(row!.reservation_counter).toBe(2);
  });

  it('refuses bad input with 400 and its pointer, and an unknown coupon with 404', async () => {
    const c = await coupon(shop);
    const cases: Array<[unknown, string]> = [
      [[], '/integrationIDs'],
      [Array.from({ length: 1001 }, (_, i) => `p${i}`), '/integrationIDs'],
      [['ok', ''], '/integrationIDs/1'],
      [['ok', 7], '/integrationIDs/1'],
      ['ann', '/integrationIDs'],
      [['ok', 'a\u0000b'], '/integrationIDs/1'],
      [['x'.repeat(1001)], '/integrationIDs/0'],
    ];
    for (const [ids, pointer] of cases) {
      for (const call of [reserve, unreserve]) {
        const r = await call(shop, c.value, ids);
        expect(r.response.status, `${call.name} ${pointer}`).toBe(400);
        expect(r.error?.errors[0]?.source?.pointer).toBe(pointer);
      }
    }
    const missing = await shop.integration.POST('/v1/coupon_reservations/{couponValue}', { params: { path: { couponValue: c.value } }, body: {} as never });
    expect(missing.response.status).toBe(400);
    expect(missing.error?.errors[0]?.source?.pointer).toBe('/integrationIDs');
    // 1000 IDs is the limit, and is accepted.
    const thousand = await reserve(shop, c.value, Array.from({ length: 1000 }, (_, i) => `k${i}`));
    expect(thousand.response.status).toBe(201);
    expect(thousand.data?.reservationCounter).toBe(1000);

    for (const r of [await reserve(shop, 'NOPE-404', ['ann']), await unreserve(shop, 'NOPE-404', ['ann']), await holders(shop, 'NOPE-404')]) {
      expect(r.response.status).toBe(404);
      expect(r.error?.errors[0]?.source?.pointer).toBe('/path/couponValue');
    }
    expect(await holderIds(shop, c.value)).toHaveLength(1000);
    const nul = await holders(shop, 'AB\u0000CD');
    expect(nul.response.status).toBe(400);
    expect(nul.error?.errors[0]?.source?.pointer).toBe('/path/couponValue');
  });

  it('answers 401 without or with a wrong API key', async () => {
    const c = await coupon(shop);
    const shopWith = { ...shop, integration: createIntegrationClient({ baseUrl: t.url, apiKey: 'wrong-key', retries: 0 }) };
    expect((await reserve(shopWith, c.value, ['ann'])).response.status).toBe(401);
    expect((await unreserve(shopWith, c.value, ['ann'])).response.status).toBe(401);
    expect((await holders(shopWith, c.value)).response.status).toBe(401);
    // No Authorization header at all.
    for (const [method, path] of [
      ['POST', `/v1/coupon_reservations/${c.value}`],
      ['DELETE', `/v1/coupon_reservations/${c.value}`],
      ['GET', `/v1/coupon_reservations/customerprofiles/${c.value}`],
    ] as const) {
      const res = await fetch(`${t.url}${path}`, {
        method,
        headers: { 'content-type': 'application/json' },
        ...(method === 'GET' ? {} : { body: JSON.stringify({ integrationIDs: ['ann'] }) }),
      });
      expect(res.status, `${method} ${path}`).toBe(401);
      expect(((await res.json()) as { StatusCode: number }).StatusCode).toBe(401);
    }
    expect(await holderIds(shop, c.value)).toEqual([]);
  });

  it("never shows or changes another Application's coupon (404)", async () => {
    const c = await coupon(shop);
    unwrap(await reserve(shop, c.value, ['ann']));
    expect((await reserve(other, c.value, ['eve'])).response.status).toBe(404);
    expect((await unreserve(other, c.value, ['ann'])).response.status).toBe(404);
    expect((await holders(other, c.value)).response.status).toBe(404);
    expect(await holderIds(shop, c.value)).toEqual(['ann']);
  });

  it('keeps a reservationLimit: a request that would pass it changes nothing (409 ReservationLimitReached)', async () => {
    const c = await coupon(shop, { reservationLimit: 2 });
    unwrap(await reserve(shop, c.value, ['ann']));
    const over = await reserve(shop, c.value, ['bob', 'cid']);
    expect(over.response.status).toBe(409);
    expect(over.error?.errors[0]).toMatchObject({ title: 'ReservationLimitReached', source: { pointer: '/integrationIDs' } });
    expect(await holderIds(shop, c.value)).toEqual(['ann']);
    // Holders already there do not count again: ann + bob fill the limit exactly.
    expect(unwrap(await reserve(shop, c.value, ['ann', 'bob'])).reservationCounter).toBe(2);
    expect((await reserve(shop, c.value, ['cid'])).response.status).toBe(409);
    // A deletion frees a place.
    await unreserve(shop, c.value, ['ann']);
    expect(unwrap(await reserve(shop, c.value, ['cid'])).reservationCounter).toBe(2);
    expect(await holderIds(shop, c.value)).toEqual(['bob', 'cid']);
  });

  it('restricts a hard reservation to its holders (CouponReservationRequired) and lets a soft one be redeemed by anyone', async () => {
    const hard = await coupon(shop, { mandatory: true });
    const soft = await coupon(shop);
    unwrap(await reserve(shop, hard.value, ['holder']));
    unwrap(await reserve(shop, soft.value, ['holder']));

    expect(effectSummary((await put(shop, 'h-1', cart([40], { profileId: 'holder', couponCodes: [hard.value] }))).effects)).toEqual(['acceptCoupon', 'setDiscount']);
    const stranger = await put(shop, 'h-2', cart([40], { profileId: 'stranger', couponCodes: [hard.value] }));
    expect(effectSummary(stranger.effects)).toEqual(['rejectCoupon:CouponReservationRequired']);
    expect(stranger.effects[0]!.props).toMatchObject({ value: hard.value, rejectionReason: 'CouponReservationRequired' });
    expect(effectSummary((await put(shop, 'h-3', cart([40], { profileId: '', couponCodes: [hard.value] }))).effects)).toEqual(['rejectCoupon:CouponReservationRequired']);
    // The code as entered in another case is the same coupon, with the same rule.
    expect(effectSummary((await put(shop, 'h-4', cart([40], { profileId: 'stranger', couponCodes: [hard.value.toLowerCase()] }))).effects)).toEqual([
      'rejectCoupon:CouponReservationRequired',
    ]);

    // Soft: only an association, anyone may redeem.
    expect(effectSummary((await put(shop, 's-1', cart([40], { profileId: 'stranger', couponCodes: [soft.value] }))).effects)).toEqual(['acceptCoupon', 'setDiscount']);

    // A deleted reservation no longer lets its former holder redeem; a new one does.
    await unreserve(shop, hard.value, ['holder']);
    expect(effectSummary((await put(shop, 'h-5', cart([40], { profileId: 'holder', couponCodes: [hard.value] }))).effects)).toEqual(['rejectCoupon:CouponReservationRequired']);
    unwrap(await reserve(shop, hard.value, ['stranger']));
    expect(effectSummary((await put(shop, 'h-6', cart([40], { profileId: 'stranger', couponCodes: [hard.value] }))).effects)).toEqual(['acceptCoupon', 'setDiscount']);
  });

  it('treats the v1 `reservation` = false of a coupon as a hard reservation', async () => {
    const c = await coupon(shop);
    await t.node.db.query(`UPDATE coupons SET reservation = false WHERE id = $1`, [c.id]);
    expect(effectSummary((await put(shop, 'v1-1', cart([40], { profileId: 'holder', couponCodes: [c.value] }))).effects)).toEqual(['rejectCoupon:CouponReservationRequired']);
    unwrap(await reserve(shop, c.value, ['holder']));
    expect(effectSummary((await put(shop, 'v1-2', cart([40], { profileId: 'holder', couponCodes: [c.value] }))).effects)).toEqual(['acceptCoupon', 'setDiscount']);
  });

  it('checks the earlier coupon rules first: an expired or other-recipient hard coupon gives their reasons', async () => {
    const expired = await coupon(shop, { mandatory: true, expiryDate: hoursFromNow(-1) });
    const forAnn = await coupon(shop, { mandatory: true, recipientIntegrationId: 'ann' });
    unwrap(await reserve(shop, expired.value, ['holder']));
    unwrap(await reserve(shop, forAnn.value, ['holder']));
    expect(effectSummary((await put(shop, 'o-1', cart([40], { profileId: 'holder', couponCodes: [expired.value] }))).effects)).toEqual(['rejectCoupon:CouponExpired']);
    expect(effectSummary((await put(shop, 'o-2', cart([40], { profileId: 'holder', couponCodes: [forAnn.value] }))).effects)).toEqual(['rejectCoupon:CouponRecipientDoesNotMatch']);
    // The recipient must hold a reservation of a hard coupon made for her too.
    expect(effectSummary((await put(shop, 'o-3', cart([40], { profileId: 'ann', couponCodes: [forAnn.value] }))).effects)).toEqual(['rejectCoupon:CouponReservationRequired']);
  });

  it('keeps the reservationLimit and the counter exact under parallel requests', async () => {
    const c = await coupon(shop, { reservationLimit: 5 });
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => reserve(shop, c.value, [`par-${String(i).padStart(2, '0')}`])));
    const statuses = results.map((r) => r.response.status).sort();
    expect(statuses.filter((s) => s === 201)).toHaveLength(5);
    expect(statuses.filter((s) => s === 409)).toHaveLength(15);
    expect(await holderIds(shop, c.value)).toHaveLength(5);
    const [row] = await t.node.db.query<{ reservation_counter: number }>(`SELECT reservation_counter FROM coupons WHERE id = $1`, [c.id]);
    expect(row!.reservation_counter).toBe(5);

    // Without a limit: overlapping parallel creates and deletes leave the counter equal to the holders.
    const d = await coupon(shop);
    await Promise.all(Array.from({ length: 12 }, (_, i) => reserve(shop, d.value, [`o${i % 6}`, `o${(i + 1) % 6}`, `n${i}`])));
    await Promise.all(Array.from({ length: 6 }, (_, i) => unreserve(shop, d.value, [`n${i}`])));
    const ids = await holderIds(shop, d.value);
    expect(ids.sort()).toEqual(['n10', 'n11', 'n6', 'n7', 'n8', 'n9', 'o0', 'o1', 'o2', 'o3', 'o4', 'o5']);
    const [row2] = await t.node.db.query<{ reservation_counter: number }>(`SELECT reservation_counter FROM coupons WHERE id = $1`, [d.id]);
    expect(row2!.reservation_counter).toBe(12);
  });
});

describe.skipIf(!postgresUp)('coupon reservation settings through the Management API', () => {
  let t: TestNode;
  let shop: ShopSetup;

  beforeAll(async () => {
    t = await startTestNode('postgres');
    shop = await setupShop(t.url, t.admin, { ruleset: couponRuleset() });
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  it('creates hard, limited and visible coupons and changes them by batch', async () => {
    const where = { applicationId: shop.applicationId, campaignId: shop.campaignId };
    const made = unwrap(
      await t.admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons', {
        params: { path: where },
        body: { usageLimit: 0, validCharacters: ['A', 'B', 'C'], couponPattern: 'HRD-####', numberOfCoupons: 1, reservationLimit: 1, isReservationMandatory: true, implicitlyReserved: true },
      }),
    ) as unknown as { data: Array<{ value: string; batchId: string; reservationLimit: number; isReservationMandatory: boolean; implicitlyReserved: boolean }> };
    const c = made.data[0]!;
    expect(c).toMatchObject({ reservationLimit: 1, isReservationMandatory: true, implicitlyReserved: true });

    const session = async (id: string, profileId: string) =>
      effectSummary(unwrap(await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: id } }, body: { customerSession: cart([50], { profileId, couponCodes: [c.value] }) as never } })).effects);
    expect(await session('hard-1', 'holder')).toEqual(['rejectCoupon:CouponReservationRequired']);
    expect((await shop.integration.POST('/v1/coupon_reservations/{couponValue}', { params: { path: { couponValue: c.value } }, body: { integrationIDs: ['holder'] } })).response.status).toBe(201);
    expect(await session('hard-2', 'holder')).toEqual(['acceptCoupon', 'setDiscount']);
    // The limit of one holder.
    const full = await shop.integration.POST('/v1/coupon_reservations/{couponValue}', { params: { path: { couponValue: c.value } }, body: { integrationIDs: ['second'] } });
    expect(full.response.status).toBe(409);

    // By batch: no longer mandatory, so anyone redeems it.
    const updated = await t.admin.PUT('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons', {
      params: { path: where },
      body: { batchID: c.batchId, isReservationMandatory: false, reservationLimit: 2 },
    });
    expect(updated.response.status).toBe(200);
    expect(await session('soft-1', 'someone-else')).toEqual(['acceptCoupon', 'setDiscount']);
    expect((await shop.integration.POST('/v1/coupon_reservations/{couponValue}', { params: { path: { couponValue: c.value } }, body: { integrationIDs: ['second'] } })).response.status).toBe(201);

    const bad = await t.admin.PUT('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons', {
      params: { path: where },
      body: { batchID: c.batchId, reservationLimit: -1 },
    });
    expect(bad.response.status).toBe(400);
    expect(bad.error?.errors?.map((e) => e.source?.pointer)).toContain('/reservationLimit');
  });
});
