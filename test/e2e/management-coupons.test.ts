import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManagementClient } from '../../sdk/index.js';
import { cart, newApplication, newCampaign } from '../helpers/fixtures.js';
import { anonymousClient, pointers, strangerAdmin, userWithScopes, type Err } from '../helpers/coupon-management.js';
import { setupShop, startTestNode, unwrap, type TestNode } from '../helpers/node.js';
import { effectSummary, hoursFromNow, rule } from '../helpers/promotions.js';
import { postgresUp } from '../helpers/services.js';

const COUPONS = '/v1/applications/{applicationId}/campaigns/{campaignId}/coupons' as const;
const NO_TOTAL = '/v1/applications/{applicationId}/campaigns/{campaignId}/coupons/no_total' as const;
const DIGITS = [...'0123456789'];
const ALNUM = [...'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'];

type Where = { applicationId: number; campaignId: number };
type Body = Record<string, unknown>;

const batch = (overrides: Body = {}): Body => ({ usageLimit: 1, validCharacters: ALNUM, couponPattern: 'CODE-####', numberOfCoupons: 3, ...overrides });

describe.skipIf(!postgresUp)('Management API: coupons', () => {
  let t: TestNode;
  let stranger: ManagementClient;

  beforeAll(async () => {
    t = await startTestNode('postgres');
    stranger = await strangerAdmin(t);
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  const newApp = async (overrides: Body = {}) => unwrap(await t.admin.POST('/v1/applications', { body: newApplication(overrides) as never })).id;
  const newCamp = async (applicationId: number, overrides: Body = {}) =>
    unwrap(await t.admin.POST('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId } }, body: newCampaign(overrides) as never })).id;
  const place = async (appOverrides: Body = {}): Promise<Where> => {
    const applicationId = await newApp(appOverrides);
    return { applicationId, campaignId: await newCamp(applicationId) };
  };
  const create = (where: Where, body: Body, silent?: string, as: ManagementClient = t.admin) =>
    as.POST(COUPONS, { params: { path: where, query: silent === undefined ? {} : { silent } }, body: body as never });
  const list = async (where: Where, query: Record<string, unknown> = {}, as: ManagementClient = t.admin) =>
    unwrap(await as.GET(COUPONS, { params: { path: where, query: query as never } }));
  const values = async (where: Where, query: Record<string, unknown> = {}) => (await list(where, query)).data.map((c) => c.value).sort();

  describe('create', () => {
    it('creates a batch from the pattern, with every field of the body, and lists it', async () => {
      const where = await place();
      const start = hoursFromNow(-1);
      const expiry = hoursFromNow(48);
      const r = await create(
        where,
        batch({
          usageLimit: 3,
          discountLimit: 20,
          startDate: start,
          expiryDate: expiry,
          validCharacters: ['A', 'B', 'C'],
          couponPattern: 'SUMMER-####',
          numberOfCoupons: 5,
          attributes: { channel: 'mail' },
          recipientIntegrationId: 'alice',
        }),
      );
      expect(r.response.status).toBe(200);
      expect(r.data!.totalResultSize).toBe(-1);
      const coupons = r.data!.data;
      expect(coupons).toHaveLength(5);
      expect(new Set(coupons.map((c) => c.value)).size).toBe(5);
      const batchId = coupons[0]!.batchId!;
      expect(batchId).toEqual(expect.any(String));
      for (const c of coupons) {
        expect(c.value).toMatch(/^SUMMER-[ABC]{4}$/);
        expect(c).toMatchObject({
          campaignId: where.campaignId,
          usageLimit: 3,
          usageCounter: 0,
          discountLimit: 20,
          discountCounter: 0,
          discountRemainder: 20,
          startDate: new Date(start).toISOString(),
          expiryDate: new Date(expiry).toISOString(),
          attributes: { channel: 'mail' },
          recipientIntegrationId: 'alice',
          batchId,
          reservation: true,
          limits: [],
        });
      }
      const listed = await list(where, { batchId });
      expect(listed.totalResultSize).toBe(5);
      expect(listed.data).toEqual(coupons);

      // Every request is a new batch; silent=yes answers 204 with an empty body.
      const silent = await create(where, batch({ numberOfCoupons: 4 }), 'yes');
      expect(silent.response.status).toBe(204);
      expect(await silent.response.text()).toBe('');
      const all = await list(where);
      expect(all.totalResultSize).toBe(9);
      const batches = new Set(all.data.map((c) => c.batchId));
      expect(batches.size).toBe(2);
      expect(all.data.filter((c) => c.batchId !== batchId).every((c) => /^CODE-[A-Z0-9]{4}$/.test(c.value) && c.usageLimit === 1)).toBe(true);
    });

    it('stores codes as the Application compares them, and a created coupon is redeemed in a session', async () => {
      const s = await setupShop(t.url, t.admin, {
        application: { caseSensitivity: 'insensitive-uppercase' },
        ruleset: { rules: [rule(['couponValid'], [['setDiscount', 'coupon', 10]], 'with coupon')], bindings: [], activate: true },
      });
      const where = { applicationId: s.applicationId, campaignId: s.campaignId };
      // `a` and `A` are one character here: 2 distinct characters, 2 slots, 4 codes at most.
      const tooMany = await create(where, batch({ validCharacters: ['a', 'A', 'b'], couponPattern: 'x-##', uniquePrefix: 'pre', numberOfCoupons: 5 }));
      expect(tooMany.response.status).toBe(400);
      expect(pointers(tooMany.error as Err)).toEqual(['/couponPattern']);
      const made = unwrap(await create(where, batch({ validCharacters: ['a', 'A', 'b'], couponPattern: 'x-##', uniquePrefix: 'pre', numberOfCoupons: 4 })));
      expect(made.data.map((c) => c.value).sort()).toEqual(['PREX-AA', 'PREX-AB', 'PREX-BA', 'PREX-BB']);

      const code = made.data[0]!.value.toLowerCase();
      const put = async (id: string, customerSession: Body) =>
        unwrap(await s.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: id } }, body: { customerSession: customerSession as never } }));
      expect(effectSummary((await put('redeem-1', cart([40], { couponCodes: [code] }))).effects)).toEqual(['acceptCoupon', 'setDiscount']);
      await put('redeem-1', { state: 'closed' });
      const [used] = (await list(where, { value: code, exactMatch: true })).data;
      expect(used).toMatchObject({ value: code.toUpperCase(), usageLimit: 1, usageCounter: 1 });
      // Used up: refused in the next session.
      expect(effectSummary((await put('redeem-2', cart([40], { couponCodes: [code] }))).effects)).toEqual(['rejectCoupon:CouponLimitReached']);
      expect((await list(where, { usable: false })).data.map((c) => c.value)).toEqual([code.toUpperCase()]);
    });

    it('refuses bad input with the pointer of the offending value', async () => {
      const where = await place();
      const cases: Array<[Body, string]> = [
        [{ ...batch(), usageLimit: undefined }, '/usageLimit'],
        [batch({ usageLimit: -1 }), '/usageLimit'],
        [batch({ usageLimit: 1.5 }), '/usageLimit'],
        [batch({ discountLimit: -5 }), '/discountLimit'],
        [{ ...batch(), validCharacters: undefined }, '/validCharacters'],
        [batch({ validCharacters: [] }), '/validCharacters'],
        [batch({ validCharacters: ['AB'] }), '/validCharacters/0'],
        [{ ...batch(), couponPattern: undefined }, '/couponPattern'],
        [batch({ couponPattern: '##' }), '/couponPattern'],
        [{ ...batch(), numberOfCoupons: undefined }, '/numberOfCoupons'],
        [batch({ numberOfCoupons: 0 }), '/numberOfCoupons'],
        [batch({ numberOfCoupons: 20_001, couponPattern: '########' }), '/numberOfCoupons'],
        [batch({ numberOfCoupons: 200_001, couponPattern: '########', uniquePrefix: 'P-' }), '/numberOfCoupons'],
        [batch({ startDate: 'tomorrow' }), '/startDate'],
        [batch({ startDate: hoursFromNow(2), expiryDate: hoursFromNow(1) }), '/expiryDate'],
        [batch({ attributes: 'x' }), '/attributes'],
        // A code has at least 4 characters.
        [batch({ couponPattern: '###' }), '/couponPattern'],
        // 2 characters in 3 slots: 8 codes, not 9.
        [batch({ validCharacters: ['A', 'B'], couponPattern: 'X###', numberOfCoupons: 9 }), '/couponPattern'],
      ];
      for (const [body, pointer] of cases) {
        const r = await create(where, body);
        expect({ body, status: r.response.status }).toEqual({ body, status: 400 });
        const e = r.error as Err;
        expect(e?.StatusCode).toBe(400);
        expect(e?.message).toEqual(expect.any(String));
        expect(pointers(e)).toContain(pointer);
      }
      expect((await list(where)).totalResultSize).toBe(0);
    });

    it("requires the Application's mandatory coupon attributes on create and batch update", async () => {
      const where = await place({ attributesSettings: { mandatory: { campaigns: [], coupons: ['channel'] } } });
      const without = await create(where, batch({ attributes: { other: 1 } }));
      expect(without.response.status).toBe(400);
      expect(pointers(without.error as Err)).toEqual(['/attributes/channel']);
      const made = unwrap(await create(where, batch({ attributes: { channel: 'mail' } })));
      const batchID = made.data[0]!.batchId!;
      const dropped = await t.admin.PUT(COUPONS, { params: { path: where }, body: { batchID, attributes: { other: 2 } } });
      expect(dropped.response.status).toBe(400);
      expect(pointers(dropped.error as Err)).toEqual(['/attributes/channel']);
      // Other changes leave the attributes as they are.
      unwrap(await t.admin.PUT(COUPONS, { params: { path: where }, body: { batchID, usageLimit: 4 } }));
      expect((await list(where)).data.map((c) => [c.usageLimit, c.attributes])).toEqual(made.data.map(() => [4, { channel: 'mail' }]));
    });

    it('leaves nothing behind when the pattern runs out of free codes halfway', async () => {
      const where = await place();
      const small = { validCharacters: ['A', 'B'], couponPattern: 'X###' };
      unwrap(await create(where, batch({ ...small, numberOfCoupons: 6 })));
      // 8 codes in all, 6 taken: the first 2 of these 3 go in, then the request fails and rolls back.
      const r = await create(where, batch({ ...small, numberOfCoupons: 3 }));
      expect(r.response.status).toBe(400);
      expect(pointers(r.error as Err)).toEqual(['/couponPattern']);
      expect((await list(where)).totalResultSize).toBe(6);
      // The other 2 can still be had.
      expect(unwrap(await create(where, batch({ ...small, numberOfCoupons: 2 }))).data).toHaveLength(2);
      expect(new Set(await values(where)).size).toBe(8);
    });

    it('draws codes from a space too large for exact indexes', async () => {
      const where = await place();
      const r = unwrap(await create(where, batch({ couponPattern: '####-####-####', numberOfCoupons: 300 })));
      expect(r.data).toHaveLength(300);
      expect(new Set(r.data.map((c) => c.value)).size).toBe(300);
      expect(r.data.every((c) => /^[A-Z0-9]{4}-[A-Z0-9]{4}-[A-Z0-9]{4}$/.test(c.value))).toBe(true);
    });
  });

  describe('batch update', () => {
    it('changes the coupons of one batch and leaves the others alone', async () => {
      const where = await place();
      const a = unwrap(await create(where, batch({ couponPattern: 'AAA-####', expiryDate: hoursFromNow(5) })));
      const b = unwrap(await create(where, batch({ couponPattern: 'BBB-####' })));
      const batchID = a.data[0]!.batchId!;
      const start = hoursFromNow(1);
      const expiry = hoursFromNow(10);
      const r = await t.admin.PUT(COUPONS, {
        params: { path: where },
        body: { batchID, usageLimit: 7, discountLimit: 12.5, startDate: start, expiryDate: expiry, attributes: { tier: 'gold' } },
      });
      expect(r.response.status).toBe(200);
      expect(r.data).toEqual({});
      const updated = await list(where, { batchId: batchID });
      expect(updated.totalResultSize).toBe(3);
      for (const c of updated.data) {
        expect(c).toMatchObject({ usageLimit: 7, discountLimit: 12.5, startDate: new Date(start).toISOString(), expiryDate: new Date(expiry).toISOString(), attributes: { tier: 'gold' } });
      }
      expect((await list(where, { batchId: b.data[0]!.batchId })).data).toEqual(b.data);

      // A zero time means "never expires".
      unwrap(await t.admin.PUT(COUPONS, { params: { path: where }, body: { batchID, expiryDate: '0001-01-01T00:00:00Z' } }));
      const cleared = await list(where, { batchId: batchID });
      expect(cleared.data.every((c) => c.expiryDate === undefined && c.usageLimit === 7)).toBe(true);
    });

    it('refuses a missing or unknown batch and dates out of order', async () => {
      const where = await place();
      const a = unwrap(await create(where, batch({ startDate: hoursFromNow(5) })));
      const batchID = a.data[0]!.batchId!;
      const missing = await t.admin.PUT(COUPONS, { params: { path: where }, body: { usageLimit: 2 } as never });
      expect(missing.response.status).toBe(400);
      expect(pointers(missing.error as Err)).toContain('/batchID');
      const negative = await t.admin.PUT(COUPONS, { params: { path: where }, body: { batchID, usageLimit: -2 } });
      expect(pointers(negative.error as Err)).toContain('/usageLimit');
      const unknown = await t.admin.PUT(COUPONS, { params: { path: where }, body: { batchID: 'no-such-batch', usageLimit: 2 } });
      expect(unknown.response.status).toBe(404);
      expect(pointers(unknown.error as Err)).toContain('/batchID');
      // Before the stored start date: the whole update is refused.
      const early = await t.admin.PUT(COUPONS, { params: { path: where }, body: { batchID, usageLimit: 9, expiryDate: hoursFromNow(1) } });
      expect(early.response.status).toBe(400);
      expect(pointers(early.error as Err)).toContain('/expiryDate');
      expect((await list(where)).data.every((c) => c.usageLimit === 1 && c.expiryDate === undefined)).toBe(true);
    });
  });

  describe('list filters and delete', () => {
    let where: Where;
    let other: Where;
    let between: string;
    let batches: Record<'past' | 'now' | 'soon' | 'open', string>;
    let open: string[];
    const groups = async (query: Record<string, unknown>, w: Where = where) => (await values(w, query)).map((v) => v.split('-')[0]);

    beforeAll(async () => {
      where = await place();
      other = { applicationId: where.applicationId, campaignId: await newCamp(where.applicationId) };
      const mk = async (body: Body) => unwrap(await create(where, batch({ validCharacters: DIGITS, ...body }))).data;
      const past = await mk({ couponPattern: 'PAST-####', numberOfCoupons: 2, startDate: hoursFromNow(-2), expiryDate: hoursFromNow(-1) });
      const now = await mk({ couponPattern: 'NOW-####', numberOfCoupons: 3, startDate: hoursFromNow(-1), expiryDate: hoursFromNow(1), recipientIntegrationId: 'alice' });
      await new Promise((r) => setTimeout(r, 20));
      between = new Date().toISOString();
      await new Promise((r) => setTimeout(r, 20));
      const soon = await mk({ couponPattern: 'SOON-####', numberOfCoupons: 2, startDate: hoursFromNow(1) });
      const opened = await mk({ couponPattern: 'OPEN-####', numberOfCoupons: 2 });
      open = opened.map((c) => c.value);
      batches = { past: past[0]!.batchId!, now: now[0]!.batchId!, soon: soon[0]!.batchId!, open: opened[0]!.batchId! };
      // One OPEN coupon used up, the other handed out through a referral.
      await t.node.db.query(`UPDATE coupons SET usage_counter = 1 WHERE id = $1`, [opened[0]!.id]);
      await t.node.db.query(`UPDATE coupons SET referral_id = 77 WHERE id = $1`, [opened[1]!.id]);
      // The same codes' look-alikes in another campaign of the Application never show here.
      unwrap(await create(other, batch({ validCharacters: DIGITS, couponPattern: 'NOW-#####', numberOfCoupons: 2 })));
    });

    it('filters by code: case-insensitive substring with non-alphanumerics ignored, or the exact code', async () => {
      expect(await groups({})).toEqual(['NOW', 'NOW', 'NOW', 'OPEN', 'OPEN', 'PAST', 'PAST', 'SOON', 'SOON']);
      expect(await groups({ value: 'o-P' })).toEqual(['OPEN', 'OPEN']);
      expect(await groups({ value: 'now' })).toEqual(['NOW', 'NOW', 'NOW']);
      expect(await groups({ value: 'nowhere' })).toEqual([]);
      const one = open[1]!;
      expect(await values(where, { value: one.toLowerCase(), exactMatch: true })).toEqual([one]);
      expect(await values(where, { value: one.replace('-', ''), exactMatch: true })).toEqual([]);
      expect(await values(where, { value: one.slice(0, 6), exactMatch: true })).toEqual([]);
      expect(await values(where, { value: one.replace('-', '').toLowerCase() })).toEqual([one]);
    });

    it('filters by creation, start and expiry times and by validity now', async () => {
      const now = new Date().toISOString();
      expect(await groups({ createdBefore: between })).toEqual(['NOW', 'NOW', 'NOW', 'PAST', 'PAST']);
      expect(await groups({ createdAfter: between })).toEqual(['OPEN', 'OPEN', 'SOON', 'SOON']);
      expect(await groups({ startsAfter: now })).toEqual(['SOON', 'SOON']);
      expect(await groups({ startsBefore: now })).toEqual(['NOW', 'NOW', 'NOW', 'PAST', 'PAST']);
      // Coupons without an expiry date never expire: after any time, never before one.
      expect(await groups({ expiresAfter: now })).toEqual(['NOW', 'NOW', 'NOW', 'OPEN', 'OPEN', 'SOON', 'SOON']);
      expect(await groups({ expiresBefore: now })).toEqual(['PAST', 'PAST']);
      expect(await groups({ valid: 'expired' })).toEqual(['PAST', 'PAST']);
      expect(await groups({ valid: 'validNow' })).toEqual(['NOW', 'NOW', 'NOW', 'OPEN', 'OPEN']);
      expect(await groups({ valid: 'validFuture' })).toEqual(['SOON', 'SOON']);
    });

    it('filters by batch, usability, referral and recipient, and combines filters', async () => {
      expect(await groups({ batchId: batches.now })).toEqual(['NOW', 'NOW', 'NOW']);
      expect(await groups({ batchId: 'nope' })).toEqual([]);
      expect(await values(where, { usable: false })).toEqual([open[0]]);
      expect(await groups({ usable: true })).toEqual(['NOW', 'NOW', 'NOW', 'OPEN', 'PAST', 'PAST', 'SOON', 'SOON']);
      expect(await values(where, { referralId: 77 })).toEqual([open[1]]);
      expect(await values(where, { referralId: 78 })).toEqual([]);
      expect(await groups({ recipientIntegrationId: 'alice' })).toEqual(['NOW', 'NOW', 'NOW']);
      expect(await groups({ recipientIntegrationId: 'bob' })).toEqual([]);
      const both = await list(where, { valid: 'validNow', usable: true });
      expect(both.totalResultSize).toBe(4);
      expect(both.data.map((c) => c.value.split('-')[0]).sort()).toEqual(['NOW', 'NOW', 'NOW', 'OPEN']);
    });

    it('filters the no_total list by campaign state too', async () => {
      const noTotal = async (query: Record<string, unknown>) => unwrap(await t.admin.GET(NO_TOTAL, { params: { path: where, query: query as never } }));
      const all = await noTotal({});
      expect(all.hasMore).toBe(false);
      expect(all.data).toHaveLength(9);
      // The campaign is enabled and has no ruleset: a draft, not running.
      expect((await noTotal({ campaignState: 'enabled' })).data).toHaveLength(9);
      expect((await noTotal({ campaignState: 'draft' })).data).toHaveLength(9);
      expect((await noTotal({ campaignState: 'running' })).data).toEqual([]);
      expect((await noTotal({ campaignState: 'disabled' })).data).toEqual([]);
      expect((await noTotal({ campaignState: 'enabled', valid: 'expired' })).data.map((c) => c.value.split('-')[0])).toEqual(['PAST', 'PAST']);
      const bad = await t.admin.GET(NO_TOTAL, { params: { path: where, query: { campaignState: 'sleeping' } as never } });
      expect(bad.response.status).toBe(400);
      expect(pointers(bad.error as Err)).toContain('/query/campaignState');
    });

    it('refuses bad filters with their pointers', async () => {
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ valid: 'sometimes' }, '/query/valid'],
        [{ createdBefore: 'yesterday' }, '/query/createdBefore'],
        [{ expiresAfter: '2026-13-01T00:00:00Z' }, '/query/expiresAfter'],
        [{ usable: 'maybe' }, '/query/usable'],
        [{ referralId: 'x' }, '/query/referralId'],
        [{ sort: 'secret' }, '/query/sort'],
      ];
      for (const [query, pointer] of cases) {
        const r = await t.admin.GET(COUPONS, { params: { path: where, query: query as never } });
        expect({ query, status: r.response.status }).toEqual({ query, status: 400 });
        expect(pointers(r.error as Err)).toContain(pointer);
        // The same refusals on delete; there a parameter that is no filter (sort) is refused too,
        // so that a misspelt filter never deletes the whole campaign's coupons.
        const d = await t.admin.DELETE(COUPONS, { params: { path: where, query: query as never } });
        expect({ query, status: d.response.status }).toEqual({ query, status: 400 });
        expect(pointers(d.error as Err)).toContain(pointer);
      }
      const typo = await t.admin.DELETE(COUPONS, { params: { path: where, query: { batchID: batches.now } as never } });
      expect(pointers(typo.error as Err)).toEqual(['/query/batchID']);
      expect((await list(where)).totalResultSize).toBe(9);
    });

    it('deletes the coupons matching the filters, then all of the campaign without a filter', async () => {
      const w = await place();
      const mk = async (body: Body) => unwrap(await create(w, batch({ validCharacters: DIGITS, ...body }))).data;
      await mk({ couponPattern: 'OLD-####', numberOfCoupons: 2, expiryDate: hoursFromNow(-1) });
      const keep = await mk({ couponPattern: 'NEW-####', numberOfCoupons: 3 });
      const neighbour = { applicationId: w.applicationId, campaignId: await newCamp(w.applicationId) };
      unwrap(await create(neighbour, batch({ numberOfCoupons: 2 })));

      const r = await t.admin.DELETE(COUPONS, { params: { path: w, query: { valid: 'expired' } } });
      expect(r.response.status).toBe(204);
      expect(await values(w)).toEqual(keep.map((c) => c.value).sort());
      expect((await t.admin.DELETE(COUPONS, { params: { path: w, query: { value: keep[0]!.value, exactMatch: true } } })).response.status).toBe(204);
      expect(await values(w)).toEqual(keep.slice(1).map((c) => c.value).sort());
      expect((await t.admin.DELETE(COUPONS, { params: { path: w } })).response.status).toBe(204);
      expect((await list(w)).totalResultSize).toBe(0);
      expect((await list(neighbour)).totalResultSize).toBe(2);
    });
  });

  describe('paging and sorting', () => {
    let where: Where;
    let ids: number[];
    beforeAll(async () => {
      where = await place();
      const r = await create(where, batch({ validCharacters: DIGITS, couponPattern: '######', uniquePrefix: 'P', numberOfCoupons: 2500 }));
      expect(r.response.status).toBe(200);
      // The response lists the batch's first 1000 only.
      expect(r.data!.data).toHaveLength(1000);
      ids = [];
    });

    it('pages through 2,500 coupons made in one request, ascending and descending', async () => {
      const byId: number[] = [];
      for (const skip of [0, 1000, 2000]) {
        const page = await list(where, { skip, pageSize: 1000 });
        expect(page.totalResultSize).toBe(2500);
        expect(page.data).toHaveLength(skip === 2000 ? 500 : 1000);
        byId.push(...page.data.map((c) => c.id));
      }
      expect(new Set(byId).size).toBe(2500);
      expect(byId).toEqual([...byId].sort((a, b) => a - b));
      ids = byId;
      const desc: number[] = [];
      for (let skip = 0; skip < 2500; skip += 700) desc.push(...(await list(where, { skip, pageSize: 700, sort: '-id' })).data.map((c) => c.id));
      expect(desc).toEqual([...ids].reverse());

      const byValue: string[] = [];
      for (let skip = 0; skip < 2500; skip += 1000) byValue.push(...(await list(where, { skip, sort: 'value' })).data.map((c) => c.value));
      expect(byValue).toHaveLength(2500);
      expect(byValue.every((v) => /^P[0-9]{6}$/.test(v))).toBe(true);
      expect(byValue).toEqual([...byValue].sort());
      const lastByValue = await list(where, { sort: '-value', pageSize: 3 });
      expect(lastByValue.data.map((c) => c.value)).toEqual(byValue.slice(-3).reverse());

      expect((await list(where, { skip: 2499, pageSize: 1 })).data.map((c) => c.id)).toEqual([ids[2499]]);
      expect((await list(where, { skip: 2500 })).data).toEqual([]);
      expect((await list(where, { skip: 17, pageSize: 5, sort: 'created' })).data.map((c) => c.id)).toEqual(ids.slice(17, 22));
    });

    it('tells whether more follow in the no_total list', async () => {
      const noTotal = async (query: Record<string, unknown>) => unwrap(await t.admin.GET(NO_TOTAL, { params: { path: where, query: query as never } }));
      const first = await noTotal({});
      expect(first.hasMore).toBe(true);
      expect(first.data).toHaveLength(1000);
      expect((await noTotal({ skip: 1499 })).hasMore).toBe(true);
      const last = await noTotal({ skip: 1500 });
      expect(last.hasMore).toBe(false);
      expect(last.data).toHaveLength(1000);
      expect((await noTotal({ skip: 2400, sort: '-id' })).data.map((c) => c.id)).toEqual(ids.slice(0, 100).reverse());
    });

    it('refuses page sizes outside 1 to 1000 and unknown sort fields', async () => {
      for (const path of [COUPONS, NO_TOTAL] as const) {
        for (const [query, pointer] of [
          [{ pageSize: 0 }, '/query/pageSize'],
          [{ pageSize: 1001 }, '/query/pageSize'],
          [{ skip: -1 }, '/query/skip'],
          [{ sort: 'password' }, '/query/sort'],
          [{ sort: '-attributes' }, '/query/sort'],
        ] as const) {
          const r = await t.admin.GET(path, { params: { path: where, query: query as never } });
          expect({ path, query, status: r.response.status }).toEqual({ path, query, status: 400 });
          expect(pointers(r.error as Err)).toContain(pointer);
        }
      }
    });
  });

  describe('volume and concurrency', () => {
    it('creates 200,000 coupons with a unique prefix in one request, all unique and of the pattern', async () => {
      const where = await place();
      const started = performance.now();
      const r = await create(where, batch({ couponPattern: '########', uniquePrefix: 'BIG-', numberOfCoupons: 200_000 }), 'yes');
      const ms = performance.now() - started;
      console.log(`[management-coupons] 200,000 coupons created in one request in ${(ms / 1000).toFixed(2)} s`);
      expect(r.response.status).toBe(204);
      const [stats] = await t.node.db.query<{ n: number; distinct: number; shaped: number; batches: number }>(
        `SELECT count(*)::int AS n, count(DISTINCT value)::int AS distinct,
                count(*) FILTER (WHERE value ~ '^BIG-[A-Z0-9]{8}$')::int AS shaped, count(DISTINCT batch_id)::int AS batches
           FROM coupons WHERE application_id = $1`,
        [where.applicationId],
      );
      expect(stats).toEqual({ n: 200_000, distinct: 200_000, shaped: 200_000, batches: 1 });
      const page = await list(where, { pageSize: 1, value: 'big' });
      expect(page.totalResultSize).toBe(200_000);
      expect(ms).toBeLessThan(30_000);
    }, 60_000);

    it('never gives two parallel requests the same code, and a request that cannot be served leaves nothing', async () => {
      const where = await place();
      // 10,000 codes in all: two batches of 4,000 compete for the same codes.
      const small = { validCharacters: DIGITS, couponPattern: 'Q####' };
      const [a, b] = await Promise.all([create(where, batch({ ...small, numberOfCoupons: 4000 }), 'yes'), create(where, batch({ ...small, numberOfCoupons: 4000 }), 'yes')]);
      expect([a.response.status, b.response.status]).toEqual([204, 204]);
      const counted = async () =>
        (await t.node.db.query<{ n: number; distinct: number; batches: number }>(
          `SELECT count(*)::int AS n, count(DISTINCT value)::int AS distinct, count(DISTINCT batch_id)::int AS batches FROM coupons WHERE application_id = $1`,
          [where.applicationId],
        ))[0];
      expect(await counted()).toEqual({ n: 8000, distinct: 8000, batches: 2 });
      // 2,000 left: of three parallel requests of 1,500 exactly one gets its codes, the others fail whole.
      const rs = await Promise.all([1, 2, 3].map(() => create(where, batch({ ...small, numberOfCoupons: 1500 }), 'yes')));
      expect(rs.map((r) => r.response.status).sort()).toEqual([204, 400, 400]);
      expect(await counted()).toEqual({ n: 9500, distinct: 9500, batches: 3 });

      // Larger spaces, more requests at once: still no duplicate.
      const w2 = await place();
      const many = await Promise.all([1, 2, 3, 4, 5, 6].map(() => create(w2, batch({ validCharacters: DIGITS, couponPattern: '######', numberOfCoupons: 3000 }), 'yes')));
      expect(many.every((r) => r.response.status === 204)).toBe(true);
      const [s2] = await t.node.db.query<{ n: number; distinct: number }>(
        `SELECT count(*)::int AS n, count(DISTINCT value)::int AS distinct FROM coupons WHERE application_id = $1`,
        [w2.applicationId],
      );
      expect(s2).toEqual({ n: 18_000, distinct: 18_000 });
    }, 60_000);
  });

  describe('access', () => {
    let where: Where;
    let readOnly: ManagementClient;
    let batchID: string;
    beforeAll(async () => {
      where = await place();
      batchID = unwrap(await create(where, batch({ numberOfCoupons: 2 }))).data[0]!.batchId!;
      readOnly = await userWithScopes(t, { [String(where.applicationId)]: 'read' });
    });

    it('refuses calls without a token', async () => {
      const nobody = anonymousClient(t);
      const calls = [
        await create(where, batch(), undefined, nobody),
        await nobody.PUT(COUPONS, { params: { path: where }, body: { batchID, usageLimit: 5 } }),
        await nobody.GET(COUPONS, { params: { path: where } }),
        await nobody.GET(NO_TOTAL, { params: { path: where } }),
        await nobody.DELETE(COUPONS, { params: { path: where } }),
      ];
      for (const r of calls) {
        expect(r.response.status).toBe(401);
        expect((r.error as Err)?.StatusCode).toBe(401);
      }
      expect((await list(where)).data.every((c) => c.usageLimit === 1)).toBe(true);
    });

    it("never shows or changes another account's coupons", async () => {
      const before = await list(where);
      const calls = [
        await create(where, batch(), undefined, stranger),
        await stranger.PUT(COUPONS, { params: { path: where }, body: { batchID, usageLimit: 5 } }),
        await stranger.GET(COUPONS, { params: { path: where } }),
        await stranger.GET(NO_TOTAL, { params: { path: where } }),
        await stranger.DELETE(COUPONS, { params: { path: where } }),
      ];
      for (const r of calls) {
        expect(r.response.status).toBe(404);
        expect(pointers(r.error as Err)).toContain('/applicationId');
        expect(JSON.stringify(r.error)).not.toContain(before.data[0]!.value);
      }
      expect(await list(where)).toEqual(before);
    });

    it('lets a read-only user list but not create, update or delete; another Application is not found', async () => {
      expect((await list(where, {}, readOnly)).totalResultSize).toBe(2);
      const writes = [
        await create(where, batch(), undefined, readOnly),
        await readOnly.PUT(COUPONS, { params: { path: where }, body: { batchID, usageLimit: 5 } }),
        await readOnly.DELETE(COUPONS, { params: { path: where } }),
      ];
      for (const r of writes) expect(r.response.status).toBe(403);
      expect((await list(where)).data.map((c) => c.usageLimit)).toEqual([1, 1]);
      const elsewhere = await place();
      const r = await readOnly.GET(COUPONS, { params: { path: elsewhere } });
      expect(r.response.status).toBe(404);
    });

    it("is not found through a campaign of another Application", async () => {
      const mine = await place();
      const crossed = { applicationId: mine.applicationId, campaignId: where.campaignId };
      for (const r of [
        await create(crossed, batch()),
        await t.admin.GET(COUPONS, { params: { path: crossed } }),
        await t.admin.PUT(COUPONS, { params: { path: crossed }, body: { batchID, usageLimit: 5 } }),
        await t.admin.DELETE(COUPONS, { params: { path: crossed } }),
      ]) {
        expect(r.response.status).toBe(404);
        expect(pointers(r.error as Err)).toContain('/campaignId');
      }
      expect((await list(where)).totalResultSize).toBe(2);
    });
  });
});
