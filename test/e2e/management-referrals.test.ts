import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManagementClient } from '../../sdk/index.js';
import { anonymousClient, pointers, strangerAdmin, userWithScopes, type Err } from '../helpers/coupon-management.js';
import { setupShop, startTestNode, unwrap, type ShopSetup, type TestNode } from '../helpers/node.js';
import { hoursFromNow } from '../helpers/promotions.js';

const REFERRALS = '/v1/applications/{applicationId}/campaigns/{campaignId}/referrals' as const;
const NO_TOTAL = '/v1/applications/{applicationId}/campaigns/{campaignId}/referrals/no_total' as const;
const ONE = '/v1/applications/{applicationId}/campaigns/{campaignId}/referrals/{referralId}' as const;

type Where = { applicationId: number; campaignId: number };

// On PGlite, the embedded default: the coupon tests run on Postgres, so this file also checks that
// coupon creation (advisory lock, set-based inserts, rollback) works on the embedded database.
describe('Management API: referrals', () => {
  let t: TestNode;
  let stranger: ManagementClient;
  let shop: ShopSetup;
  let where: Where;
  let between: string;
  // Referral codes by what they are: made before `between` (old*) or after, and their state.
  const made: Record<string, { id: number; code: string }> = {};

  const refer = async (s: ShopSetup, body: Record<string, unknown>) => unwrap(await s.integration.POST('/v1/referrals', { body: body as never }));
  const list = async (query: Record<string, unknown> = {}, w: Where = where, as: ManagementClient = t.admin) =>
    unwrap(await as.GET(REFERRALS, { params: { path: w, query: query as never } }));
  const names = async (query: Record<string, unknown>) => {
    const byCode = new Map(Object.entries(made).map(([name, r]) => [r.code, name]));
    return (await list(query)).data.map((r) => byCode.get(r.code)).sort();
  };

  beforeAll(async () => {
    t = await startTestNode('pglite');
    stranger = await strangerAdmin(t);
    shop = await setupShop(t.url, t.admin);
    where = { applicationId: shop.applicationId, campaignId: shop.campaignId };
    const add = async (name: string, body: Record<string, unknown>) => {
      const r = await refer(shop, { campaignId: shop.campaignId, ...body });
      made[name] = { id: r.id, code: r.code };
    };
    await add('oldAda', { advocateProfileIntegrationId: 'ada', expiryDate: hoursFromNow(-1), startDate: hoursFromNow(-2) });
    await add('oldBob', { advocateProfileIntegrationId: 'bob', usageLimit: 1 });
    await new Promise((r) => setTimeout(r, 20));
    between = new Date().toISOString();
    await new Promise((r) => setTimeout(r, 20));
    await add('newAda', { advocateProfileIntegrationId: 'ada', startDate: hoursFromNow(1) });
    await add('newCy', { advocateProfileIntegrationId: 'cy', usageLimit: 2, expiryDate: hoursFromNow(3) });
    // oldBob has been used once, up to its limit.
    await t.node.db.query(`UPDATE referrals SET usage_counter = 1 WHERE id = $1`, [made.oldBob!.id]);
    // Another campaign of the Application has its own referrals, never listed here.
    const otherCampaign = unwrap(
      await t.admin.POST('/v1/applications/{applicationId}/campaigns', {
        params: { path: { applicationId: shop.applicationId } },
        body: { name: 'Other', state: 'enabled', tags: [], features: ['referrals'], limits: [] },
      }),
    );
    await refer(shop, { campaignId: otherCampaign.id, advocateProfileIntegrationId: 'ada' });
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  it('lists the campaign referrals with their fields', async () => {
    const all = await list({ sort: 'id' });
    expect(all.totalResultSize).toBe(4);
    expect(all.data.map((r) => r.id)).toEqual([made.oldAda!.id, made.oldBob!.id, made.newAda!.id, made.newCy!.id]);
    expect(all.data[3]).toMatchObject({ campaignId: shop.campaignId, advocateProfileIntegrationId: 'cy', code: made.newCy!.code, usageLimit: 2, usageCounter: 0, created: expect.any(String), expiryDate: expect.any(String) });
    expect(all.data[3]!.code).toMatch(/^[A-Z0-9]{4}-[A-Z0-9]{4}$/);
    const desc = await list({ sort: '-id', pageSize: 2, skip: 1 });
    expect(desc.data.map((r) => r.id)).toEqual([made.newAda!.id, made.oldBob!.id]);
    expect(desc.totalResultSize).toBe(4);
  });

  it('filters by code, creation time, validity, usability and advocate', async () => {
    const code = made.newCy!.code;
    // Case-insensitive substring, with non-alphanumerics ignored.
    expect(await names({ code: code.toLowerCase().replace('-', '') })).toEqual(['newCy']);
    expect(await names({ code: `${code.slice(2, 4)}--${code.slice(5, 7)}`.toLowerCase() })).toContain('newCy');
    expect(await names({ code: 'zzzzzzzzzz' })).toEqual([]);
    expect(await names({ createdBefore: between })).toEqual(['oldAda', 'oldBob']);
    expect(await names({ createdAfter: between })).toEqual(['newAda', 'newCy']);
    expect(await names({ valid: 'expired' })).toEqual(['oldAda']);
    expect(await names({ valid: 'validNow' })).toEqual(['newCy', 'oldBob']);
    expect(await names({ valid: 'validFuture' })).toEqual(['newAda']);
    expect(await names({ usable: false })).toEqual(['oldBob']);
    expect(await names({ usable: true })).toEqual(['newAda', 'newCy', 'oldAda']);
    expect(await names({ advocate: 'ada' })).toEqual(['newAda', 'oldAda']);
    expect(await names({ advocate: 'ad' })).toEqual([]);
    expect(await names({ advocate: 'ada', createdAfter: between })).toEqual(['newAda']);
  });

  it('pages the no_total list with hasMore', async () => {
    const page = async (query: Record<string, unknown>) => unwrap(await t.admin.GET(NO_TOTAL, { params: { path: where, query: query as never } }));
    const first = await page({ pageSize: 3 });
    expect(first.hasMore).toBe(true);
    expect(first.data.map((r) => r.id)).toEqual([made.oldAda!.id, made.oldBob!.id, made.newAda!.id]);
    const rest = await page({ pageSize: 3, skip: 3 });
    expect(rest).toMatchObject({ hasMore: false });
    expect(rest.data.map((r) => r.id)).toEqual([made.newCy!.id]);
    expect((await page({ advocate: 'ada', pageSize: 1 })).hasMore).toBe(true);
    expect((await page({ advocate: 'cy', pageSize: 1 })).hasMore).toBe(false);
  });

  it('refuses bad queries with their pointers', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ valid: 'always' }, '/query/valid'],
      [{ createdAfter: 'last week' }, '/query/createdAfter'],
      [{ usable: 'perhaps' }, '/query/usable'],
      [{ pageSize: 0 }, '/query/pageSize'],
      [{ pageSize: 1001 }, '/query/pageSize'],
      [{ sort: 'friendSecret' }, '/query/sort'],
    ];
    for (const path of [REFERRALS, NO_TOTAL] as const) {
      for (const [query, pointer] of cases) {
        const r = await t.admin.GET(path, { params: { path: where, query: query as never } });
        expect({ path, query, status: r.response.status }).toEqual({ path, query, status: 400 });
        expect((r.error as Err)?.StatusCode).toBe(400);
        expect(pointers(r.error as Err)).toContain(pointer);
      }
    }
  });

  it('deletes one referral; unknown, malformed or foreign IDs are not found', async () => {
    const victim = await refer(shop, { campaignId: shop.campaignId, advocateProfileIntegrationId: 'dee' });
    expect((await list()).totalResultSize).toBe(5);
    // A coupon that names the referral forgets it; one naming another referral keeps its own.
    const kept = made[Object.keys(made)[0]!]!.id;
    await t.node.db.query(`INSERT INTO coupons (application_id, campaign_id, value, referral_id) VALUES ($1, $2, 'FROMREF1', $3)`, [
      where.applicationId,
      where.campaignId,
      victim.id,
    ]);
    await t.node.db.query(`INSERT INTO coupons (application_id, campaign_id, value, referral_id) VALUES ($1, $2, 'FROMREF2', $3)`, [where.applicationId, where.campaignId, kept]);
    const r = await t.admin.DELETE(ONE, { params: { path: { ...where, referralId: String(victim.id) } } });
    expect(r.response.status).toBe(204);
    const refs = await t.node.db.query<{ value: string; referral_id: string | null }>(`SELECT value, referral_id FROM coupons WHERE value IN ('FROMREF1', 'FROMREF2') ORDER BY value`);
    expect(refs.map((c) => [c.value, c.referral_id === null ? null : Number(c.referral_id)])).toEqual([
      ['FROMREF1', null],
      ['FROMREF2', kept],
    ]);
    // Later tests count this campaign's coupons.
    await t.node.db.query(`DELETE FROM coupons WHERE value IN ('FROMREF1', 'FROMREF2')`);
    expect((await list()).data.map((x) => x.id)).not.toContain(victim.id);
    expect((await list()).totalResultSize).toBe(4);
    for (const referralId of [String(victim.id), 'abc', '99999999999999999999999', '-1', '0']) {
      const again = await t.admin.DELETE(ONE, { params: { path: { ...where, referralId } } });
      expect({ referralId, status: again.response.status }).toEqual({ referralId, status: 404 });
      expect(pointers(again.error as Err)).toContain('/referralId');
    }
    // A referral of another campaign is not found through this one.
    const elsewhere = await t.node.db.query<{ id: number }>(`SELECT id FROM referrals WHERE application_id = $1 AND campaign_id <> $2`, [
      where.applicationId,
      where.campaignId,
    ]);
    const foreign = await t.admin.DELETE(ONE, { params: { path: { ...where, referralId: String(elsewhere[0]!.id) } } });
    expect(foreign.response.status).toBe(404);
    expect(await t.node.db.query(`SELECT 1 FROM referrals WHERE id = $1`, [elsewhere[0]!.id])).toHaveLength(1);
  });

  it('refuses calls without a token', async () => {
    const nobody = anonymousClient(t);
    for (const r of [
      await nobody.GET(REFERRALS, { params: { path: where } }),
      await nobody.GET(NO_TOTAL, { params: { path: where } }),
      await nobody.DELETE(ONE, { params: { path: { ...where, referralId: String(made.newCy!.id) } } }),
    ]) {
      expect(r.response.status).toBe(401);
      expect((r.error as Err)?.StatusCode).toBe(401);
    }
    expect((await list()).totalResultSize).toBe(4);
  });

  it("never shows or deletes another account's referrals", async () => {
    for (const r of [
      await stranger.GET(REFERRALS, { params: { path: where } }),
      await stranger.GET(NO_TOTAL, { params: { path: where } }),
      await stranger.DELETE(ONE, { params: { path: { ...where, referralId: String(made.newCy!.id) } } }),
    ]) {
      expect(r.response.status).toBe(404);
      expect(pointers(r.error as Err)).toContain('/applicationId');
      expect(JSON.stringify(r.error)).not.toContain(made.newCy!.code);
    }
    expect((await list()).totalResultSize).toBe(4);
  });

  it('lets a read-only user list but not delete; an Application not named in the policy is not found', async () => {
    const readOnly = await userWithScopes(t, { [String(where.applicationId)]: 'read' });
    expect((await list({}, where, readOnly)).totalResultSize).toBe(4);
    const denied = await readOnly.DELETE(ONE, { params: { path: { ...where, referralId: String(made.newCy!.id) } } });
    expect(denied.response.status).toBe(403);
    expect((await list()).totalResultSize).toBe(4);
    const otherShop = await setupShop(t.url, t.admin);
    const hidden = await readOnly.GET(REFERRALS, { params: { path: { applicationId: otherShop.applicationId, campaignId: otherShop.campaignId } } });
    expect(hidden.response.status).toBe(404);
    // A campaign of another Application is not found through this one.
    const crossed = await t.admin.GET(REFERRALS, { params: { path: { applicationId: otherShop.applicationId, campaignId: where.campaignId } } });
    expect(crossed.response.status).toBe(404);
    expect(pointers(crossed.error as Err)).toContain('/campaignId');
  });

  it('creates, lists and deletes coupons on the embedded database too, all or nothing', async () => {
    const COUPONS = '/v1/applications/{applicationId}/campaigns/{campaignId}/coupons' as const;
    const body = { usageLimit: 1, validCharacters: ['A', 'B'], couponPattern: 'E###', numberOfCoupons: 6 };
    const made = await t.admin.POST(COUPONS, { params: { path: where }, body });
    expect(made.response.status).toBe(200);
    expect(made.data!.data.map((c) => c.value).every((v) => /^E[AB]{3}$/.test(v))).toBe(true);
    // 2 codes left: a request for 3 fails whole.
    const over = await t.admin.POST(COUPONS, { params: { path: where }, body: { ...body, numberOfCoupons: 3 } });
    expect(over.response.status).toBe(400);
    expect(pointers(over.error as Err)).toEqual(['/couponPattern']);
    const listed = unwrap(await t.admin.GET(COUPONS, { params: { path: where, query: { value: 'e', sort: 'value' } } }));
    expect(listed.totalResultSize).toBe(6);
    expect(listed.data.map((c) => c.value)).toEqual(made.data!.data.map((c) => c.value).sort());
    expect((await t.admin.DELETE(COUPONS, { params: { path: where } })).response.status).toBe(204);
    expect(unwrap(await t.admin.GET(COUPONS, { params: { path: where } })).totalResultSize).toBe(0);
  });
});
