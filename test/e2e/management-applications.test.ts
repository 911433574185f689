import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManagementClient } from '../../sdk/index.js';
import { cart, newApplication } from '../helpers/fixtures.js';
import { adminAccountId, anonymousClient, otherAccount, pointers, userWithPolicy } from '../helpers/management-users.js';
import { setupShop, startTestNode, unwrap, type TestNode } from '../helpers/node.js';
import { insertCoupon } from '../helpers/promotions.js';

describe('Management API: Applications', () => {
  let t: TestNode;
  let stranger: ManagementClient;
  let anonymous: ManagementClient;
  let accountId: number;

  const create = async (overrides: Record<string, unknown> = {}) =>
    unwrap(await t.admin.POST('/v1/applications', { body: newApplication(overrides) as never }));
  const at = (applicationId: number) => ({ params: { path: { applicationId } } });

  beforeAll(async () => {
    t = await startTestNode('pglite');
    accountId = await adminAccountId(t.node.db);
    stranger = (await otherAccount(t.node.db, t.url, 'stranger@test.local')).client;
    anonymous = anonymousClient(t.url);
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('creates an Application with every field of the spec, and gets, updates and deletes it', async () => {
    const body = {
      name: 'Full',
      description: 'all fields',
      timezone: 'America/New_York',
      currency: 'USD',
      caseSensitivity: 'insensitive-uppercase',
      attributes: { region: 'us', stores: 3 },
      limits: [{ action: 'redeemCoupon', limit: 5, entities: ['Coupon'] }],
      campaignPriority: 'stackable',
      exclusiveCampaignsStrategy: 'highestDiscount',
      attributesSettings: { mandatory: { campaigns: ['region'], coupons: [] } },
      sandbox: true,
    };
    const app = unwrap(await t.admin.POST('/v1/applications', { body: body as never }));
    expect(app).toEqual({
      ...body,
      id: expect.any(Number),
      accountId,
      created: expect.any(String),
      modified: expect.any(String),
      loyaltyPrograms: [],
      signingSecret: expect.any(String),
    });
    expect(unwrap(await t.admin.GET('/v1/applications/{applicationId}', at(app.id)))).toEqual(app);

    // Defaults: the spec's, and the full attributesSettings shape.
    const plain = await create({ name: 'Plain' });
    expect(plain).toMatchObject({
      description: '',
      caseSensitivity: 'sensitive',
      campaignPriority: 'universal',
      exclusiveCampaignsStrategy: 'listOrder',
      attributes: {},
      limits: [],
      sandbox: false,
      attributesSettings: { mandatory: { campaigns: [], coupons: [] } },
      loyaltyPrograms: [],
    });

    const updated = unwrap(
      await t.admin.PUT('/v1/applications/{applicationId}', {
        ...at(app.id),
        body: { name: 'Full 2', timezone: 'Asia/Tokyo', currency: 'JPY', sandbox: false, attributesSettings: { mandatory: { coupons: ['batch'] } } },
      }),
    );
    // Fields left out keep their values; the settings come back in their full shape.
    expect(updated).toMatchObject({
      name: 'Full 2',
      timezone: 'Asia/Tokyo',
      currency: 'JPY',
      sandbox: false,
      caseSensitivity: 'insensitive-uppercase',
      attributes: { region: 'us', stores: 3 },
      attributesSettings: { mandatory: { campaigns: [], coupons: ['batch'] } },
    });
    expect(new Date(updated.modified).getTime()).toBeGreaterThanOrEqual(new Date(app.modified).getTime());
    expect(unwrap(await t.admin.GET('/v1/applications/{applicationId}', at(app.id)))).toEqual(updated);

    expect((await t.admin.DELETE('/v1/applications/{applicationId}', at(app.id))).response.status).toBe(204);
    expect((await t.admin.GET('/v1/applications/{applicationId}', at(app.id))).response.status).toBe(404);
    expect((await t.admin.DELETE('/v1/applications/{applicationId}', at(app.id))).response.status).toBe(404);
  });

  it('refuses bad input with the error body and a pointer', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [newApplication({ name: '' }), '/name'],
      [{ timezone: 'UTC', currency: 'EUR' }, '/name'],
      [newApplication({ timezone: 'Mars/Olympus' }), '/timezone'],
      [newApplication({ currency: 'euro' }), '/currency'],
      [newApplication({ caseSensitivity: 'shouty' }), '/caseSensitivity'],
      [newApplication({ exclusiveCampaignsStrategy: 'random' }), '/exclusiveCampaignsStrategy'],
      [newApplication({ limits: [{ limit: 3 }] }), '/limits/0/action'],
      [newApplication({ attributesSettings: { mandatory: { campaigns: 'region' } } }), '/attributesSettings/mandatory/campaigns'],
      [newApplication({ sandbox: 'yes' }), '/sandbox'],
    ];
    for (const [body, pointer] of cases) {
      const r = await t.admin.POST('/v1/applications', { body: body as never });
      expect(r.response.status, pointer).toBe(400);
      expect(r.error).toMatchObject({ StatusCode: 400, message: expect.any(String) });
      expect(pointers(r.error), JSON.stringify(body)).toContain(pointer);
    }
    const app = await create({ name: 'Bad updates' });
    const badTz = await t.admin.PUT('/v1/applications/{applicationId}', { ...at(app.id), body: { name: 'x', timezone: 'Nowhere', currency: 'EUR' } });
    expect(badTz.response.status).toBe(400);
    expect(pointers(badTz.error)).toContain('/timezone');
    const noCurrency = await t.admin.PUT('/v1/applications/{applicationId}', { ...at(app.id), body: { name: 'x', timezone: 'UTC' } as never });
    expect(pointers(noCurrency.error)).toContain('/currency');
    // Nothing of the refused updates was kept.
    expect(unwrap(await t.admin.GET('/v1/applications/{applicationId}', at(app.id)))).toMatchObject({ name: 'Bad updates', timezone: 'Europe/Berlin' });

    const badSort = await t.admin.GET('/v1/applications', { params: { query: { sort: '-signing_secret' } } });
    expect(badSort.response.status).toBe(400);
    expect(pointers(badSort.error)).toContain('/query/sort');
    const bigPage = await t.admin.GET('/v1/applications', { params: { query: { pageSize: 1001 } } });
    expect(pointers(bigPage.error)).toContain('/query/pageSize');
    const negativeSkip = await t.admin.GET('/v1/applications', { params: { query: { skip: -1 } } });
    expect(pointers(negativeSkip.error)).toContain('/query/skip');
  });

  it('answers 401 without a token on every operation', async () => {
    const app = await create({ name: 'Locked' });
    const answers = [
      await anonymous.POST('/v1/applications', { body: newApplication() as never }),
      await anonymous.GET('/v1/applications'),
      await anonymous.GET('/v1/applications/{applicationId}', at(app.id)),
      await anonymous.PUT('/v1/applications/{applicationId}', { ...at(app.id), body: newApplication() as never }),
      await anonymous.DELETE('/v1/applications/{applicationId}', at(app.id)),
    ];
    for (const r of answers) {
      expect(r.response.status).toBe(401);
      expect(pointers(r.error as never)).toContain('/headers/authorization');
    }
    expect(unwrap(await t.admin.GET('/v1/applications/{applicationId}', at(app.id))).name).toBe('Locked');
  });

  it("never shows or changes another account's Application", async () => {
    const mine = await create({ name: 'Secret shop', attributes: { secret: 'xyz' } });
    for (const r of [
      await stranger.GET('/v1/applications/{applicationId}', at(mine.id)),
      await stranger.PUT('/v1/applications/{applicationId}', { ...at(mine.id), body: newApplication({ name: 'Taken' }) as never }),
      await stranger.DELETE('/v1/applications/{applicationId}', at(mine.id)),
    ]) {
      expect(r.response.status).toBe(404);
      expect(JSON.stringify(r.error)).not.toContain('Secret shop');
      expect(JSON.stringify(r.error)).not.toContain('xyz');
    }
    const theirs = unwrap(await stranger.GET('/v1/applications'));
    expect(theirs.data.map((a) => a.id)).not.toContain(mine.id);
    expect(unwrap(await t.admin.GET('/v1/applications/{applicationId}', at(mine.id)))).toMatchObject({ name: 'Secret shop' });
  });

  it('lets a user act only on the Applications of its policy, writing only where it may write', async () => {
    const readable = await create({ name: 'Readable' });
    const writable = await create({ name: 'Writable' });
    const hidden = await create({ name: 'Hidden' });
    const user = await userWithPolicy(t.node.db, t.url, accountId, 'scoped@test.local', {
      applications: { [readable.id]: 'read', [writable.id]: 'write' },
    });
    const list = unwrap(await user.GET('/v1/applications', { params: { query: { sort: 'id' } } }));
    expect(list).toEqual({ totalResultSize: 2, data: [expect.objectContaining({ id: readable.id }), expect.objectContaining({ id: writable.id })] });

    expect(unwrap(await user.GET('/v1/applications/{applicationId}', at(readable.id))).name).toBe('Readable');
    // The signing secret only to those who may change the Application.
    expect(unwrap(await user.GET('/v1/applications/{applicationId}', at(readable.id)))).not.toHaveProperty('signingSecret');
    expect(list.data[0]).not.toHaveProperty('signingSecret');
    const secret = unwrap(await user.GET('/v1/applications/{applicationId}', at(writable.id))).signingSecret;
    expect(secret).toMatch(/^\S{20,}$/);
    expect(list.data[1]!.signingSecret).toBe(secret);
    expect(unwrap(await t.admin.GET('/v1/applications/{applicationId}', at(writable.id))).signingSecret).toBe(secret);
    const put = await user.PUT('/v1/applications/{applicationId}', { ...at(readable.id), body: newApplication({ name: 'Mine now' }) as never });
    expect(put.response.status).toBe(403);
    expect(put.error?.StatusCode).toBe(403);
    expect((await user.DELETE('/v1/applications/{applicationId}', at(readable.id))).response.status).toBe(403);
    expect(unwrap(await t.admin.GET('/v1/applications/{applicationId}', at(readable.id))).name).toBe('Readable');

    expect(unwrap(await user.PUT('/v1/applications/{applicationId}', { ...at(writable.id), body: newApplication({ name: 'Written' }) as never })).name).toBe('Written');

    for (const r of [
      await user.GET('/v1/applications/{applicationId}', at(hidden.id)),
      await user.PUT('/v1/applications/{applicationId}', { ...at(hidden.id), body: newApplication() as never }),
      await user.DELETE('/v1/applications/{applicationId}', at(hidden.id)),
    ]) {
      expect(r.response.status).toBe(404);
      expect(JSON.stringify(r.error)).not.toContain('Hidden');
    }
    // Only an admin creates Applications.
    const made = await user.POST('/v1/applications', { body: newApplication({ name: 'By user' }) as never });
    expect(made.response.status).toBe(403);
    const names = unwrap(await t.admin.GET('/v1/applications')).data.map((a) => a.name);
    expect(names).not.toContain('By user');
  });

  it('sorts and pages the list, with the total', async () => {
    const { accountId: pagerAccount, client: pager } = await otherAccount(t.node.db, t.url, 'pager@test.local');
    // 40 Applications named so that name order differs from id order.
    for (let i = 0; i < 40; i++) {
      await t.node.db.query(
        `INSERT INTO applications (account_id, name, timezone, currency, signing_secret) VALUES ($1, $2, 'UTC', 'EUR', 'x')`,
        [pagerAccount, `app-${String((i * 7) % 40).padStart(2, '0')}`],
      );
    }
    const all = unwrap(await pager.GET('/v1/applications'));
    expect(all.totalResultSize).toBe(40);
    expect(all.data).toHaveLength(40);
    const byName = unwrap(await pager.GET('/v1/applications', { params: { query: { sort: 'name' } } })).data.map((a) => a.name);
    expect(byName).toEqual(Array.from({ length: 40 }, (_, i) => `app-${String(i).padStart(2, '0')}`));
    const desc = unwrap(await pager.GET('/v1/applications', { params: { query: { sort: '-name', pageSize: 3 } } }));
    expect(desc.data.map((a) => a.name)).toEqual(['app-39', 'app-38', 'app-37']);
    expect(desc.totalResultSize).toBe(40);

    const seen: number[] = [];
    for (let skip = 0; skip < 40; skip += 15) {
      const page = unwrap(await pager.GET('/v1/applications', { params: { query: { sort: '-id', pageSize: 15, skip } } }));
      expect(page.totalResultSize).toBe(40);
      seen.push(...page.data.map((a) => a.id));
    }
    const ids = all.data.map((a) => a.id).sort((a, b) => b - a);
    expect(seen).toEqual(ids);
    expect(unwrap(await pager.GET('/v1/applications', { params: { query: { skip: 40 } } }))).toEqual({ totalResultSize: 40, data: [] });
  });

  it('deletes everything that belongs to the Application, and its API key stops working at once', async () => {
    const shop = await setupShop(t.url, t.admin, { application: { name: 'Doomed' } });
    const keep = await setupShop(t.url, t.admin, { application: { name: 'Kept' } });
    const db = t.node.db;
    // Used (and so cached) before the delete.
    expect((await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'doomed-1' } }, body: { customerSession: cart([150]) as never } })).response.status).toBe(200);
    expect((await keep.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'kept-1' } }, body: { customerSession: cart([150]) as never } })).response.status).toBe(200);
    for (const s of [shop, keep]) {
      await insertCoupon(db, s.applicationId, s.campaignId, { value: `CODE${s.applicationId}` });
      await db.query(`INSERT INTO referrals (application_id, campaign_id, code, advocate_profile_integration_id) VALUES ($1, $2, $3, 'adv')`, [
        s.applicationId,
        s.campaignId,
        `REF${s.applicationId}`,
      ]);
      await db.query(`INSERT INTO events (application_id, profile_id, session_id, type) VALUES ($1, 'customer-1', 's', 'rated')`, [s.applicationId]);
    }
    const [attribute] = await db.query<{ id: number }>(
      `INSERT INTO attributes (account_id, entity, name, type, subscribed_applications_ids) VALUES ($1, 'Campaign', 'doomedOnly', 'string', $2::jsonb) RETURNING id`,
      [accountId, JSON.stringify([shop.applicationId, keep.applicationId])],
    );

    const tables = ['campaigns', 'api_keys', 'coupons', 'referrals', 'customer_sessions', 'events'];
    const counts = async (applicationId: number) => {
      const out: Record<string, number> = {};
      for (const table of tables) {
        const [row] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE application_id = $1`, [applicationId]);
        out[table] = row!.n;
      }
      const [rs] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM rulesets r JOIN campaigns c ON c.id = r.campaign_id WHERE c.application_id = $1`, [applicationId]);
      out.rulesets = rs!.n;
      return out;
    };
    const before = await counts(shop.applicationId);
    for (const n of Object.values(before)) expect(n).toBeGreaterThan(0);
    const [campaignRulesets] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM rulesets WHERE campaign_id = $1`, [shop.campaignId]);
    expect(campaignRulesets!.n).toBe(1);

    // Its access log entries too (they carry no foreign key): wait until some are written.
    const logged = async (applicationId: number) =>
      (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM access_logs WHERE application_id = $1`, [applicationId]))[0]!.n;
    for (let i = 0; i < 100 && (await logged(shop.applicationId)) === 0; i++) await new Promise((r) => setTimeout(r, 50));
    expect(await logged(shop.applicationId)).toBeGreaterThan(0);

    expect((await t.admin.DELETE('/v1/applications/{applicationId}', at(shop.applicationId))).response.status).toBe(204);
    expect(await logged(shop.applicationId)).toBe(0);

    expect(await counts(shop.applicationId)).toEqual(Object.fromEntries([...tables, 'rulesets'].map((k) => [k, 0])));
    const [orphans] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM rulesets WHERE campaign_id = $1`, [shop.campaignId]);
    expect(orphans!.n).toBe(0);
    const [attr] = await db.query<{ subscribed_applications_ids: number[] }>(`SELECT subscribed_applications_ids FROM attributes WHERE id = $1`, [attribute!.id]);
    expect(attr!.subscribed_applications_ids).toEqual([keep.applicationId]);

    const refused = await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'doomed-2' } }, body: { customerSession: cart([150]) as never } });
    expect(refused.response.status).toBe(401);

    // The other Application lost nothing.
    expect(await counts(keep.applicationId)).toEqual(before);
    expect((await keep.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'kept-2' } }, body: { customerSession: cart([150]) as never } })).response.status).toBe(200);
  });
});
