import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManagementClient } from '../../sdk/index.js';
import { cart, newApplication, newCampaign, tenPercentOver100 } from '../helpers/fixtures.js';
import { adminAccountId, anonymousClient, otherAccount, pointers, userWithPolicy } from '../helpers/management-users.js';
import { setupShop, startTestNode, unwrap, type TestNode } from '../helpers/node.js';
import { effectSummary, rule } from '../helpers/promotions.js';
import { postgresUp } from '../helpers/services.js';

const C = '/v1/applications/{applicationId}/campaigns' as const;
const ONE = '/v1/applications/{applicationId}/campaigns/{campaignId}' as const;
const RS = '/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets' as const;
const RS1 = '/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets/{rulesetId}' as const;
const SEARCH = '/v1/applications/{applicationId}/campaigns_search' as const;
const COPY = '/v1/applications/{applicationId}/campaigns/{campaignId}/campaign_duplicate' as const;

const hours = (h: number) => new Date(Date.now() + h * 3600_000).toISOString();
const twentyPercent = () => ({
  rules: [rule(['>', ['.', 'Session', 'Total'], 100], [['setDiscount', '20% off', ['*', ['.', 'Session', 'Total'], 0.2]]], '20% off')],
  bindings: [],
});

// Postgres: the ruleset activation race below needs real concurrent transactions.
describe.skipIf(!postgresUp)('Management API: campaigns and rulesets', () => {
  let t: TestNode;
  let stranger: ManagementClient;
  let anonymous: ManagementClient;
  let accountId: number;

  const newApp = async (name: string) => unwrap(await t.admin.POST('/v1/applications', { body: newApplication({ name }) as never })).id;
  const createCampaign = async (applicationId: number, overrides: Record<string, unknown> = {}) =>
    unwrap(await t.admin.POST(C, { params: { path: { applicationId } }, body: newCampaign(overrides) as never }));
  const createRuleset = async (applicationId: number, campaignId: number, body: Record<string, unknown> = tenPercentOver100()) =>
    unwrap(await t.admin.POST(RS, { params: { path: { applicationId, campaignId } }, body: body as never }));
  const getCampaign = async (applicationId: number, campaignId: number) => unwrap(await t.admin.GET(ONE, { params: { path: { applicationId, campaignId } } }));
  const listIds = async (applicationId: number, query: Record<string, unknown>) =>
    unwrap(await t.admin.GET(C, { params: { path: { applicationId }, query: { sort: 'id', ...query } as never } })).data.map((c) => c.id);

  beforeAll(async () => {
    t = await startTestNode('postgres');
    accountId = await adminAccountId(t.node.db);
    stranger = (await otherAccount(t.node.db, t.url, 'stranger@test.local')).client;
    anonymous = anonymousClient(t.url);
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  describe('campaigns', () => {
    it('creates, gets, updates and deletes a campaign with every field', async () => {
      const applicationId = await newApp('Campaign CRUD');
      const window = { startTime: '2026-03-01T00:00:00.000Z', endTime: '2026-06-01T00:00:00.000Z' };
      const body = newCampaign({
        name: 'Spring',
        description: 'blossoms',
        ...window,
        attributes: { region: 'eu' },
        tags: ['spring', 'vip'],
        features: ['coupons', 'referrals'],
        couponSettings: { validCharacters: ['A', 'B'], couponPattern: '###-##' },
        referralSettings: { validCharacters: ['X'], couponPattern: 'R-###' },
        limits: [{ action: 'redeemCoupon', limit: 100, entities: ['Coupon'] }],
        campaignGroups: [4, 5],
      });
      const c = await createCampaign(applicationId, body);
      expect(c).toEqual({
        ...body,
        id: expect.any(Number),
        applicationId,
        userId: expect.any(Number),
        created: expect.any(String),
        updated: expect.any(String),
        reevaluateOnReturn: false,
        couponRedemptionCount: 0,
        referralRedemptionCount: 0,
        discountCount: 0,
        discountEffectCount: 0,
        couponCreationCount: 0,
        createdBy: 'Admin',
        updatedBy: 'Admin',
      });
      expect(await getCampaign(applicationId, c.id)).toEqual(c);

      const r = await createRuleset(applicationId, c.id, { ...tenPercentOver100(), activate: false });
      const path = { params: { path: { applicationId, campaignId: c.id } } };
      const u = unwrap(await t.admin.PUT(ONE, { ...path, body: { name: 'Spring 2', state: 'disabled', activeRulesetId: r.id, tags: ['later'] } }));
      // What the update leaves out is kept, the window and the groups included.
      expect(u).toMatchObject({
        name: 'Spring 2',
        state: 'disabled',
        activeRulesetId: r.id,
        tags: ['later'],
        attributes: { region: 'eu' },
        features: ['coupons', 'referrals'],
        startTime: window.startTime,
        endTime: window.endTime,
        campaignGroups: [4, 5],
      });
      expect(await getCampaign(applicationId, c.id)).toEqual(u);
      // null removes a window bound or the groups; the window checked is the one to be stored.
      const cleared = unwrap(await t.admin.PUT(ONE, { ...path, body: { name: 'Spring 2', startTime: null, campaignGroups: null } }));
      expect(cleared.startTime).toBeUndefined();
      expect(cleared).toMatchObject({ endTime: window.endTime, campaignGroups: null });
      const regrouped = unwrap(await t.admin.PUT(ONE, { ...path, body: { name: 'Spring 2', startTime: '2026-04-01T00:00:00.000Z', campaignGroups: [6] } }));
      expect(regrouped).toMatchObject({ startTime: '2026-04-01T00:00:00.000Z', endTime: window.endTime, campaignGroups: [6] });
      const inverted = await t.admin.PUT(ONE, { ...path, body: { name: 'Spring 2', startTime: '2026-07-01T00:00:00.000Z' } });
      expect(inverted.response.status).toBe(400);
      expect(pointers(inverted.error)).toContain('/endTime');
      expect(await getCampaign(applicationId, c.id)).toEqual(regrouped);

      expect((await t.admin.DELETE(ONE, path)).response.status).toBe(204);
      expect((await t.admin.GET(ONE, path)).response.status).toBe(404);
      expect((await t.admin.DELETE(ONE, path)).response.status).toBe(404);
      expect((await t.admin.GET(RS1, { params: { path: { applicationId, campaignId: c.id, rulesetId: r.id } } })).response.status).toBe(404);
    });

    it('refuses bad campaigns and bad list queries with pointers', async () => {
      const applicationId = await newApp('Bad campaigns');
      const other = await createCampaign(applicationId, { name: 'Other' });
      const otherRuleset = await createRuleset(applicationId, other.id);
      const app = { params: { path: { applicationId } } };
      const creates: Array<[Record<string, unknown>, string]> = [
        [{ name: 'x', state: 'enabled', features: [], limits: [] }, '/tags'],
        [newCampaign({ name: '' }), '/name'],
        [newCampaign({ tags: [''] }), '/tags/0'],
        [newCampaign({ features: ['teleport'] }), '/features/0'],
        [newCampaign({ state: 'paused' }), '/state'],
        [newCampaign({ startTime: 'tomorrow' }), '/startTime'],
        [newCampaign({ startTime: '2026-05-01T00:00:00Z', endTime: '2026-04-01T00:00:00Z' }), '/endTime'],
        [newCampaign({ activeRulesetId: otherRuleset.id }), '/activeRulesetId'],
        [newCampaign({ limits: [{ action: 'redeemCoupon', limit: -1 }] }), '/limits/0/limit'],
      ];
      for (const [body, pointer] of creates) {
        const r = await t.admin.POST(C, { ...app, body: body as never });
        expect(r.response.status, pointer).toBe(400);
        expect(r.error).toMatchObject({ StatusCode: 400 });
        expect(pointers(r.error), pointer).toContain(pointer);
      }
      const c = await createCampaign(applicationId, { name: 'Target' });
      const path = { params: { path: { applicationId, campaignId: c.id } } };
      // A ruleset of another campaign cannot be activated here.
      const foreign = await t.admin.PUT(ONE, { ...path, body: { name: 'Target', activeRulesetId: otherRuleset.id } });
      expect(foreign.response.status).toBe(400);
      expect(pointers(foreign.error)).toContain('/activeRulesetId');
      const noName = await t.admin.PUT(ONE, { ...path, body: { state: 'disabled' } as never });
      expect(pointers(noName.error)).toContain('/name');
      expect(await getCampaign(applicationId, c.id)).toMatchObject({ name: 'Target', state: 'enabled' });
      expect(unwrap(await t.admin.GET(C, app)).totalResultSize).toBe(2);

      const queries: Array<[Record<string, unknown>, string]> = [
        [{ campaignState: 'paused' }, '/query/campaignState'],
        [{ createdBefore: 'yesterday' }, '/query/createdBefore'],
        [{ createdAfter: '2026-13-45' }, '/query/createdAfter'],
        [{ campaignGroupId: 'seven' }, '/query/campaignGroupId'],
        [{ sort: 'attributes' }, '/query/sort'],
        [{ pageSize: 0 }, '/query/pageSize'],
        [{ name: '' }, '/query/name'],
      ];
      for (const [query, pointer] of queries) {
        const r = await t.admin.GET(C, { params: { path: { applicationId }, query: query as never } });
        expect(r.response.status, pointer).toBe(400);
        expect(pointers(r.error), pointer).toContain(pointer);
      }
      const missing = await t.admin.GET(ONE, { params: { path: { applicationId, campaignId: 999_999 } } });
      expect(missing.response.status).toBe(404);
      expect(pointers(missing.error)).toContain('/campaignId');
    });

    it('lists campaigns by their list state, archived and disabled before draft, draft before the window', async () => {
      const applicationId = await newApp('States');
      const withRuleset = async (name: string, overrides: Record<string, unknown> = {}) => {
        const c = await createCampaign(applicationId, { name, ...overrides });
        await createRuleset(applicationId, c.id);
        return c.id;
      };
      const running = await withRuleset('running');
      const runningInWindow = await withRuleset('running in window', { startTime: hours(-1), endTime: hours(1) });
      const scheduled = await withRuleset('scheduled', { startTime: hours(2) });
      const expired = await withRuleset('expired', { startTime: hours(-5), endTime: hours(-1) });
      const disabled = await withRuleset('disabled', { state: 'disabled' });
      const disabledDraft = (await createCampaign(applicationId, { name: 'disabled without ruleset', state: 'disabled' })).id;
      const archived = await withRuleset('archived', { state: 'archived', endTime: hours(-1), startTime: hours(-2) });
      const draft = (await createCampaign(applicationId, { name: 'draft' })).id;
      const expiredDraft = (await createCampaign(applicationId, { name: 'old draft', startTime: hours(-5), endTime: hours(-1) })).id;

      expect(await listIds(applicationId, { campaignState: 'running' })).toEqual([running, runningInWindow]);
      expect(await listIds(applicationId, { campaignState: 'scheduled' })).toEqual([scheduled]);
      expect(await listIds(applicationId, { campaignState: 'expired' })).toEqual([expired]);
      expect(await listIds(applicationId, { campaignState: 'disabled' })).toEqual([disabled, disabledDraft]);
      expect(await listIds(applicationId, { campaignState: 'archived' })).toEqual([archived]);
      expect(await listIds(applicationId, { campaignState: 'draft' })).toEqual([draft, expiredDraft]);
      const all = unwrap(await t.admin.GET(C, { params: { path: { applicationId } } }));
      expect(all.totalResultSize).toBe(9);
      // The stored state is what `state` shows.
      expect(all.data.find((c) => c.id === draft)?.state).toBe('enabled');
      const filtered = unwrap(await t.admin.GET(C, { params: { path: { applicationId }, query: { campaignState: 'draft', pageSize: 1 } } }));
      expect(filtered).toMatchObject({ totalResultSize: 2, data: [{ id: draft }] });

      // A running campaign that loses its ruleset becomes a draft; disabling it makes it disabled.
      const [rs] = unwrap(await t.admin.GET(RS, { params: { path: { applicationId, campaignId: running } } })).data;
      expect((await t.admin.DELETE(RS1, { params: { path: { applicationId, campaignId: running, rulesetId: rs!.id } } })).response.status).toBe(204);
      expect(await listIds(applicationId, { campaignState: 'draft' })).toEqual([running, draft, expiredDraft]);
      unwrap(await t.admin.PUT(ONE, { params: { path: { applicationId, campaignId: scheduled } }, body: { name: 'scheduled', state: 'disabled', startTime: hours(2) } }));
      expect(await listIds(applicationId, { campaignState: 'scheduled' })).toEqual([]);
      expect(await listIds(applicationId, { campaignState: 'disabled' })).toEqual([scheduled, disabled, disabledDraft]);
    });

    it('filters by name OR tag (case-insensitive), creation time and campaign group', async () => {
      const applicationId = await newApp('Filters');
      const summer = (await createCampaign(applicationId, { name: 'Big Summer Sale', tags: ['seasonal'], campaignGroups: [7] })).id;
      const winter = (await createCampaign(applicationId, { name: 'Winter', tags: ['VIP', 'seasonal'], campaignGroups: [7, 8] })).id;
      const plain = (await createCampaign(applicationId, { name: 'Plain 100%_off', tags: ['basic'] })).id;
      await t.node.db.query(`UPDATE campaigns SET created = $2 WHERE id = $1`, [summer, '2026-01-10T00:00:00Z']);
      await t.node.db.query(`UPDATE campaigns SET created = $2 WHERE id = $1`, [winter, '2026-02-10T00:00:00Z']);
      await t.node.db.query(`UPDATE campaigns SET created = $2 WHERE id = $1`, [plain, '2026-03-10T00:00:00Z']);

      expect(await listIds(applicationId, { name: 'SUMMER' })).toEqual([summer]);
      expect(await listIds(applicationId, { name: 'sale' })).toEqual([summer]);
      expect(await listIds(applicationId, { name: 'autumn' })).toEqual([]);
      // Wildcards of LIKE are plain characters here.
      expect(await listIds(applicationId, { name: '%_' })).toEqual([plain]);
      expect(await listIds(applicationId, { name: '_' })).toEqual([plain]);
      expect(await listIds(applicationId, { tags: 'vip' })).toEqual([winter]);
      expect(await listIds(applicationId, { tags: 'seasonal' })).toEqual([summer, winter]);
      expect(await listIds(applicationId, { tags: 'seas' })).toEqual([]);
      expect(await listIds(applicationId, { name: 'summer', tags: 'vip' })).toEqual([summer, winter]);
      expect(await listIds(applicationId, { name: 'plain', tags: 'vip' })).toEqual([winter, plain]);
      expect(await listIds(applicationId, { name: 'nothing', tags: 'nothing' })).toEqual([]);

      expect(await listIds(applicationId, { createdBefore: '2026-02-10T00:00:00Z' })).toEqual([summer]);
      expect(await listIds(applicationId, { createdAfter: '2026-02-10T00:00:00Z' })).toEqual([plain]);
      expect(await listIds(applicationId, { createdAfter: '2026-01-01T00:00:00Z', createdBefore: '2026-03-01T00:00:00Z' })).toEqual([summer, winter]);
      expect(await listIds(applicationId, { createdAfter: '2026-03-01T00:00:00+02:00' })).toEqual([plain]);

      expect(await listIds(applicationId, { campaignGroupId: 7 })).toEqual([summer, winter]);
      expect(await listIds(applicationId, { campaignGroupId: 8 })).toEqual([winter]);
      expect(await listIds(applicationId, { campaignGroupId: 9 })).toEqual([]);
      // Filters combine with AND.
      expect(await listIds(applicationId, { tags: 'seasonal', campaignGroupId: 8, createdAfter: '2026-01-01T00:00:00Z' })).toEqual([winter]);
    });

    it('sorts and pages hundreds of campaigns', async () => {
      const applicationId = await newApp('Many');
      await t.node.db.query(
        `INSERT INTO campaigns (application_id, name, created, start_time)
         SELECT $1, 'c-' || lpad(((i * 37) % 300)::text, 3, '0'), timestamptz '2026-01-01' + i * interval '1 minute',
                timestamptz '2026-06-01' - i * interval '1 hour'
           FROM generate_series(0, 299) AS i`,
        [applicationId],
      );
      const app = { applicationId };
      const all = unwrap(await t.admin.GET(C, { params: { path: app } }));
      expect(all.totalResultSize).toBe(300);
      expect(all.data).toHaveLength(300);
      const names = unwrap(await t.admin.GET(C, { params: { path: app, query: { sort: 'name' } } })).data.map((c) => c.name);
      expect(names).toEqual(Array.from({ length: 300 }, (_, i) => `c-${String(i).padStart(3, '0')}`));
      const lastFirst = unwrap(await t.admin.GET(C, { params: { path: app, query: { sort: '-name', pageSize: 2, skip: 1 } } }));
      expect(lastFirst).toMatchObject({ totalResultSize: 300, data: [{ name: 'c-298' }, { name: 'c-297' }] });
      const byStart = unwrap(await t.admin.GET(C, { params: { path: app, query: { sort: 'startTime', pageSize: 300 } } })).data.map((c) => c.startTime!);
      expect(byStart).toEqual([...byStart].sort());
      expect(new Set(byStart).size).toBe(300);
      const byCreatedDesc = unwrap(await t.admin.GET(C, { params: { path: app, query: { sort: '-created' } } })).data.map((c) => c.created);
      expect(byCreatedDesc).toEqual([...byCreatedDesc].sort().reverse());

      const pages: number[] = [];
      for (let skip = 0; skip < 300; skip += 64) {
        const page = unwrap(await t.admin.GET(C, { params: { path: app, query: { sort: 'id', pageSize: 64, skip } } }));
        expect(page.totalResultSize).toBe(300);
        expect(page.data.length).toBe(Math.min(64, 300 - skip));
        pages.push(...page.data.map((c) => c.id));
      }
      expect(pages).toEqual(all.data.map((c) => c.id).sort((a, b) => a - b));
      expect(new Set(pages).size).toBe(300);
      // Paging composes with a filter: its total is the filtered count.
      const named = unwrap(await t.admin.GET(C, { params: { path: app, query: { name: 'c-29', sort: 'name', pageSize: 4 } } }));
      expect(named).toMatchObject({ totalResultSize: 10, data: [{ name: 'c-290' }, { name: 'c-291' }, { name: 'c-292' }, { name: 'c-293' }] });
    });
  });

  describe('campaigns_search', () => {
    it('finds campaigns whose attributes hold exactly the given values, with the list parameters', async () => {
      const applicationId = await newApp('Search');
      const eu2 = (await createCampaign(applicationId, { name: 'eu2', attributes: { region: 'eu', tier: 2, extra: true } })).id;
      const eu3 = (await createCampaign(applicationId, { name: 'eu3', attributes: { region: 'eu', tier: 3 } })).id;
      const us2 = (await createCampaign(applicationId, { name: 'us2', attributes: { region: 'us', tier: 2 } })).id;
      const nested = (await createCampaign(applicationId, { name: 'nested', attributes: { meta: { a: 1, b: 2 }, list: [1, 2] } })).id;
      await createCampaign(applicationId, { name: 'bare' });
      const search = async (attributes: Record<string, unknown>, query: Record<string, unknown> = {}) =>
        unwrap(await t.admin.POST(SEARCH, { params: { path: { applicationId }, query: { sort: 'id', ...query } as never }, body: { attributes } }));

      expect((await search({ region: 'eu' })).data.map((c) => c.id)).toEqual([eu2, eu3]);
      expect((await search({ region: 'eu', tier: 2 })).data.map((c) => c.id)).toEqual([eu2]);
      expect((await search({ tier: 2 })).data.map((c) => c.id)).toEqual([eu2, us2]);
      // Exact values: a string is not the number, a part of an object or list is not the whole.
      expect((await search({ tier: '2' })).data).toEqual([]);
      expect((await search({ meta: { a: 1 } })).data).toEqual([]);
      expect((await search({ list: [1] })).data).toEqual([]);
      expect((await search({ meta: { b: 2, a: 1 }, list: [1, 2] })).data.map((c) => c.id)).toEqual([nested]);
      expect((await search({ region: 'eu', missing: null })).data).toEqual([]);
      expect((await search({})).totalResultSize).toBe(5);

      const paged = await search({ tier: 2 }, { sort: '-name', pageSize: 1 });
      expect(paged).toMatchObject({ totalResultSize: 2, data: [{ id: us2, attributes: { region: 'us', tier: 2 } }] });
      expect((await search({ region: 'eu' }, { name: 'EU3' })).data.map((c) => c.id)).toEqual([eu3]);
      expect((await search({ region: 'eu' }, { campaignState: 'draft' })).totalResultSize).toBe(2);
      expect((await search({ region: 'eu' }, { campaignState: 'running' })).totalResultSize).toBe(0);

      const noAttributes = await t.admin.POST(SEARCH, { params: { path: { applicationId } }, body: {} as never });
      expect(noAttributes.response.status).toBe(400);
      expect(pointers(noAttributes.error)).toContain('/attributes');
      const notObject = await t.admin.POST(SEARCH, { params: { path: { applicationId } }, body: { attributes: ['region'] } as never });
      expect(pointers(notObject.error)).toContain('/attributes');
      const badSort = await t.admin.POST(SEARCH, { params: { path: { applicationId }, query: { sort: 'secret' } }, body: { attributes: {} } });
      expect(pointers(badSort.error)).toContain('/query/sort');
      const badState = await t.admin.POST(SEARCH, { params: { path: { applicationId }, query: { campaignState: 'on' as never } }, body: { attributes: {} } });
      expect(pointers(badState.error)).toContain('/query/campaignState');
    });
  });

  describe('campaign_duplicate', () => {
    it('copies a campaign with its active ruleset, activated, into each listed Application', async () => {
      const source = await setupShop(t.url, t.admin, { application: { name: 'Copy source' } });
      const target = await setupShop(t.url, t.admin, { application: { name: 'Copy target' }, ruleset: { rules: [], bindings: [], activate: true } });
      const path = { applicationId: source.applicationId, campaignId: source.campaignId };
      unwrap(await t.admin.PUT(ONE, { params: { path }, body: { name: 'Tenner', attributes: { k: 'v' }, tags: ['copyme'], campaignGroups: [3], startTime: hours(-1) } }));
      // Statistics of the source are not copied.
      await t.node.db.query(`UPDATE campaigns SET coupon_redemption_count = 5 WHERE id = $1`, [source.campaignId]);

      const r = await t.admin.POST(COPY, { params: { path }, body: { applicationIds: [target.applicationId, source.applicationId] } });
      expect(r.response.status).toBe(201);
      const copies = unwrap(r);
      expect(copies.totalResultSize).toBe(2);
      expect(copies.data.map((c) => c.applicationId)).toEqual([target.applicationId, source.applicationId]);
      for (const copy of copies.data) {
        expect(copy).toMatchObject({ name: 'Tenner', attributes: { k: 'v' }, tags: ['copyme'], state: 'enabled', couponRedemptionCount: 0, campaignGroups: null });
        expect(copy.id).not.toBe(source.campaignId);
        expect(copy.activeRulesetId).toEqual(expect.any(Number));
        const rs = unwrap(await t.admin.GET(RS1, { params: { path: { applicationId: copy.applicationId, campaignId: copy.id, rulesetId: copy.activeRulesetId! } } }));
        expect(rs).toMatchObject({ campaignId: copy.id, activate: true, rules: tenPercentOver100().rules });
        expect(await getCampaign(copy.applicationId, copy.id)).toEqual(copy);
      }
      // The copy runs in the target at once (its snapshot was dropped).
      const session = unwrap(
        await target.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'copy-1' } }, body: { customerSession: cart([200]) as never } }),
      );
      expect(session.effects.map((e) => [e.campaignId, e.effectType])).toEqual([[copies.data[0]!.id, 'setDiscount']]);

      // A draft is copied as a draft, with a new name when asked.
      const draft = await createCampaign(source.applicationId, { name: 'Draft' });
      const draftCopy = unwrap(await t.admin.POST(COPY, { params: { path: { applicationId: source.applicationId, campaignId: draft.id } }, body: { applicationIds: [target.applicationId], name: 'Draft copy' } }));
      expect(draftCopy.data).toEqual([expect.objectContaining({ name: 'Draft copy', applicationId: target.applicationId })]);
      expect(draftCopy.data[0]!.activeRulesetId).toBeUndefined();
    });

    it('refuses bad input, and copies nothing when one target may not be written', async () => {
      const applicationId = await newApp('Copy checks');
      const c = await createCampaign(applicationId, { name: 'Original' });
      await createRuleset(applicationId, c.id);
      const readOnlyTarget = await newApp('Read-only target');
      const writableTarget = await newApp('Writable target');
      const theirs = unwrap(await stranger.POST('/v1/applications', { body: newApplication({ name: 'Theirs' }) as never })).id;
      const path = { params: { path: { applicationId, campaignId: c.id } } };
      const count = async (id: number) => unwrap(await t.admin.GET(C, { params: { path: { applicationId: id } } })).totalResultSize;

      const bodies: Array<[unknown, string]> = [
        [{}, '/applicationIds'],
        [{ applicationIds: [] }, '/applicationIds'],
        [{ applicationIds: ['one'] }, '/applicationIds/0'],
        [{ applicationIds: [writableTarget, writableTarget] }, '/applicationIds'],
        [{ applicationIds: [writableTarget], name: '' }, '/name'],
      ];
      for (const [body, pointer] of bodies) {
        const r = await t.admin.POST(COPY, { ...path, body: body as never });
        expect(r.response.status, pointer).toBe(400);
        expect(pointers(r.error), pointer).toContain(pointer);
      }
      const foreign = await t.admin.POST(COPY, { ...path, body: { applicationIds: [writableTarget, theirs] } });
      expect(foreign.response.status).toBe(404);
      expect(pointers(foreign.error)).toContain('/applicationIds/1');
      expect(JSON.stringify(foreign.error)).not.toContain('Theirs');
      expect(await count(writableTarget)).toBe(0);
      expect(unwrap(await stranger.GET(C, { params: { path: { applicationId: theirs } } })).totalResultSize).toBe(0);

      const user = await userWithPolicy(t.node.db, t.url, accountId, 'copier@test.local', {
        applications: { [applicationId]: 'read', [readOnlyTarget]: 'read', [writableTarget]: 'write' },
      });
      const readOnly = await user.POST(COPY, { ...path, body: { applicationIds: [writableTarget, readOnlyTarget] } });
      expect(readOnly.response.status).toBe(403);
      expect(pointers(readOnly.error)).toContain('/applicationIds/1');
      expect(await count(writableTarget)).toBe(0);
      expect(await count(readOnlyTarget)).toBe(0);
      // Reading the source is enough to copy it where one may write.
      const ok = unwrap(await user.POST(COPY, { ...path, body: { applicationIds: [writableTarget] } }));
      expect(ok.data).toEqual([expect.objectContaining({ name: 'Original', applicationId: writableTarget })]);
      expect(await count(writableTarget)).toBe(1);

      const missing = await t.admin.POST(COPY, { params: { path: { applicationId, campaignId: 999_999 } }, body: { applicationIds: [writableTarget] } });
      expect(missing.response.status).toBe(404);
      expect(pointers(missing.error)).toContain('/campaignId');
    });
  });

  describe('rulesets', () => {
    it('updates a ruleset (compile-checked), activates and deactivates it, and the running shop follows at once', async () => {
      const shop = await setupShop(t.url, t.admin, { application: { name: 'Ruleset shop' } });
      const base = { applicationId: shop.applicationId, campaignId: shop.campaignId };
      const discount = async (id: string) => {
        const s = unwrap(await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: id } }, body: { customerSession: cart([200]) as never } }));
        return effectSummary(s.effects).length === 0 ? undefined : (s.effects[0]!.props as { value: number }).value;
      };
      expect(await discount('rs-1')).toBe(20);

      const updated = unwrap(await t.admin.PUT(RS1, { params: { path: { ...base, rulesetId: shop.rulesetId } }, body: { ...twentyPercent(), rbVersion: 'v2' } }));
      expect(updated).toMatchObject({ id: shop.rulesetId, campaignId: shop.campaignId, activate: true, rules: twentyPercent().rules, rbVersion: 'v2' });
      expect(unwrap(await t.admin.GET(RS1, { params: { path: { ...base, rulesetId: shop.rulesetId } } }))).toEqual(updated);
      expect(await discount('rs-2')).toBe(40);

      // A second ruleset, not activated, then activated by update; the first stays stored.
      const second = await createRuleset(shop.applicationId, shop.campaignId, { ...tenPercentOver100(), activate: false });
      expect(second.activate).toBe(false);
      expect(await discount('rs-3')).toBe(40);
      const activated = unwrap(await t.admin.PUT(RS1, { params: { path: { ...base, rulesetId: second.id } }, body: { ...tenPercentOver100(), activate: true } }));
      expect(activated).toMatchObject({ activate: true, activatedAt: expect.any(String) });
      expect((await getCampaign(shop.applicationId, shop.campaignId)).activeRulesetId).toBe(second.id);
      expect(await discount('rs-4')).toBe(20);
      const list = unwrap(await t.admin.GET(RS, { params: { path: base, query: { sort: '-id' } } }));
      expect(list.totalResultSize).toBe(2);
      expect(list.data.map((r) => [r.id, r.activate])).toEqual([[second.id, true], [shop.rulesetId, false]]);

      // activate: false on the active ruleset leaves the campaign a draft that does not run.
      unwrap(await t.admin.PUT(RS1, { params: { path: { ...base, rulesetId: second.id } }, body: { ...tenPercentOver100(), activate: false } }));
      expect((await getCampaign(shop.applicationId, shop.campaignId)).activeRulesetId).toBeUndefined();
      expect(await listIds(shop.applicationId, { campaignState: 'draft' })).toEqual([shop.campaignId]);
      expect(await discount('rs-5')).toBeUndefined();
      // activate: false on a ruleset that is not active changes no activation.
      unwrap(await t.admin.PUT(RS1, { params: { path: { ...base, rulesetId: shop.rulesetId } }, body: { ...twentyPercent(), activate: true } }));
      unwrap(await t.admin.PUT(RS1, { params: { path: { ...base, rulesetId: second.id } }, body: { ...tenPercentOver100(), activate: false } }));
      expect((await getCampaign(shop.applicationId, shop.campaignId)).activeRulesetId).toBe(shop.rulesetId);
      expect(await discount('rs-6')).toBe(40);
    });

    it('deletes a ruleset; deleting the active one leaves the campaign a draft', async () => {
      const shop = await setupShop(t.url, t.admin, { application: { name: 'Delete rulesets' } });
      const base = { applicationId: shop.applicationId, campaignId: shop.campaignId };
      const spare = await createRuleset(shop.applicationId, shop.campaignId, { ...twentyPercent(), activate: false });
      expect((await t.admin.DELETE(RS1, { params: { path: { ...base, rulesetId: spare.id } } })).response.status).toBe(204);
      expect((await getCampaign(shop.applicationId, shop.campaignId)).activeRulesetId).toBe(shop.rulesetId);
      expect((await t.admin.GET(RS1, { params: { path: { ...base, rulesetId: spare.id } } })).response.status).toBe(404);

      expect((await t.admin.DELETE(RS1, { params: { path: { ...base, rulesetId: shop.rulesetId } } })).response.status).toBe(204);
      expect((await getCampaign(shop.applicationId, shop.campaignId)).activeRulesetId).toBeUndefined();
      expect(unwrap(await t.admin.GET(RS, { params: { path: base } }))).toEqual({ totalResultSize: 0, data: [] });
      const s = unwrap(await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'gone' } }, body: { customerSession: cart([200]) as never } }));
      expect(s.effects).toEqual([]);
      expect((await t.admin.DELETE(RS1, { params: { path: { ...base, rulesetId: shop.rulesetId } } })).response.status).toBe(404);
    });

    it('refuses bad rulesets and rulesets of other campaigns', async () => {
      const applicationId = await newApp('Bad rulesets');
      const a = await createCampaign(applicationId, { name: 'A' });
      const b = await createCampaign(applicationId, { name: 'B' });
      const ra = await createRuleset(applicationId, a.id);
      const path = { params: { path: { applicationId, campaignId: a.id, rulesetId: ra.id } } };
      const compile = await t.admin.PUT(RS1, { ...path, body: { rules: [rule(['frobnicate', 1], [])], bindings: [] } });
      expect(compile.response.status).toBe(400);
      expect(compile.error?.errors[0]?.title).toBe('RulesetCompileError');
      expect(pointers(compile.error).some((p) => p?.startsWith('/rules/0/condition'))).toBe(true);
      const noBindings = await t.admin.PUT(RS1, { ...path, body: { rules: [] } as never });
      expect(pointers(noBindings.error)).toContain('/bindings');
      const badActivate = await t.admin.PUT(RS1, { ...path, body: { rules: [], bindings: [], activate: 'yes' } as never });
      expect(pointers(badActivate.error)).toContain('/activate');
      const noTitle = await t.admin.PUT(RS1, { ...path, body: { rules: [{ condition: true, effects: [] }], bindings: [] } as never });
      expect(pointers(noTitle.error)).toContain('/rules/0/title');
      // Nothing of the refused updates was kept.
      expect(unwrap(await t.admin.GET(RS1, path))).toEqual(ra);

      const crossed = { params: { path: { applicationId, campaignId: b.id, rulesetId: ra.id } } };
      expect((await t.admin.GET(RS1, crossed)).response.status).toBe(404);
      const crossPut = await t.admin.PUT(RS1, { ...crossed, body: twentyPercent() });
      expect(crossPut.response.status).toBe(404);
      expect(pointers(crossPut.error)).toContain('/rulesetId');
      expect((await t.admin.DELETE(RS1, crossed)).response.status).toBe(404);
      expect(unwrap(await t.admin.GET(RS1, path))).toEqual(ra);
      const badId = await fetch(`${t.url}/v1/applications/${applicationId}/campaigns/${a.id}/rulesets/first`, { headers: { Authorization: `Bearer ${t.adminToken}` } });
      expect(badId.status).toBe(400);
      expect(pointers((await badId.json()) as never)).toContain('/path/rulesetId');
      const badSort = await t.admin.GET(RS, { params: { path: { applicationId, campaignId: a.id }, query: { sort: 'rules' } } });
      expect(pointers(badSort.error)).toContain('/query/sort');
    });

    it('keeps a racing activation: deactivating the old ruleset never undoes activating the new one', async () => {
      const applicationId = await newApp('Race');
      const c = await createCampaign(applicationId, { name: 'Raced' });
      const path = (rulesetId: number) => ({ params: { path: { applicationId, campaignId: c.id, rulesetId } } });
      for (let round = 0; round < 15; round++) {
        const old = await createRuleset(applicationId, c.id, { ...tenPercentOver100(), activate: true });
        const next = await createRuleset(applicationId, c.id, { ...twentyPercent(), activate: false });
        const [off, on] = await Promise.all([
          t.admin.PUT(RS1, { ...path(old.id), body: { ...tenPercentOver100(), activate: false } }),
          t.admin.PUT(RS1, { ...path(next.id), body: { ...twentyPercent(), activate: true } }),
        ]);
        expect(off.response.status).toBe(200);
        expect(on.response.status).toBe(200);
        expect((await getCampaign(applicationId, c.id)).activeRulesetId).toBe(next.id);
      }
    });
  });

  describe('access', () => {
    let applicationId: number;
    let campaignId: number;
    let rulesetId: number;
    let otherApp: number;
    beforeAll(async () => {
      applicationId = await newApp('Guarded');
      otherApp = await newApp('Guarded target');
      const c = await createCampaign(applicationId, { name: 'Guarded campaign', attributes: { secret: 'xyz' } });
      campaignId = c.id;
      rulesetId = (await createRuleset(applicationId, campaignId)).id;
    });

    /** Every campaign and ruleset operation of the Application, as `client` calls it. */
    const everyOperation = (client: ManagementClient) => {
      const app = { params: { path: { applicationId } } };
      const one = { params: { path: { applicationId, campaignId } } };
      const rs = { params: { path: { applicationId, campaignId, rulesetId } } };
      return {
        reads: [
          () => client.GET(C, app),
          () => client.GET(ONE, one),
          () => client.POST(SEARCH, { ...app, body: { attributes: {} } }),
          () => client.GET(RS, one),
          () => client.GET(RS1, rs),
        ],
        writes: [
          () => client.POST(C, { ...app, body: newCampaign({ name: 'Intruder' }) as never }),
          () => client.PUT(ONE, { ...one, body: { name: 'Intruder' } }),
          () => client.POST(RS, { ...one, body: twentyPercent() }),
          () => client.PUT(RS1, { ...rs, body: twentyPercent() }),
          () => client.DELETE(RS1, rs),
          () => client.DELETE(ONE, one),
        ],
        // Copying needs read on the source; a readable source copied into an unnamed target is 404.
        copy: () => client.POST(COPY, { ...one, body: { applicationIds: [otherApp] } }),
      };
    };

    const unchanged = async () => {
      const c = await getCampaign(applicationId, campaignId);
      expect(c).toMatchObject({ name: 'Guarded campaign', activeRulesetId: rulesetId });
      expect(unwrap(await t.admin.GET(C, { params: { path: { applicationId } } })).totalResultSize).toBe(1);
      expect(unwrap(await t.admin.GET(RS, { params: { path: { applicationId, campaignId } } })).totalResultSize).toBe(1);
      expect(unwrap(await t.admin.GET(C, { params: { path: { applicationId: otherApp } } })).totalResultSize).toBe(0);
    };

    it('answers 401 without a token', async () => {
      const ops = everyOperation(anonymous);
      for (const call of [...ops.reads, ...ops.writes, ops.copy]) {
        const r = await call();
        expect(r.response.status).toBe(401);
        expect(pointers(r.error as never)).toContain('/headers/authorization');
      }
      await unchanged();
    });

    it("answers 404 to another account, never showing the campaign", async () => {
      const ops = everyOperation(stranger);
      for (const call of [...ops.reads, ...ops.writes, ops.copy]) {
        const r = await call();
        expect(r.response.status).toBe(404);
        expect(JSON.stringify(r.error)).not.toContain('Guarded');
        expect(JSON.stringify(r.error)).not.toContain('xyz');
      }
      await unchanged();
    });

    it('lets a read-only user read but answers 403 to its writes; an unnamed Application is 404', async () => {
      const reader = await userWithPolicy(t.node.db, t.url, accountId, 'reader@test.local', { applications: { [applicationId]: 'read' } });
      const ops = everyOperation(reader);
      for (const call of ops.reads) expect((await call()).response.status).toBe(200);
      for (const call of ops.writes) {
        const r = await call();
        expect(r.response.status).toBe(403);
        expect(r.error?.StatusCode).toBe(403);
      }
      const copy = await ops.copy();
      expect(copy.response.status).toBe(404);
      expect(pointers(copy.error)).toContain('/applicationIds/0');
      await unchanged();

      const outsider = await userWithPolicy(t.node.db, t.url, accountId, 'outsider@test.local', { applications: { [otherApp]: 'write' } });
      const outside = everyOperation(outsider);
      for (const call of [...outside.reads, ...outside.writes, outside.copy]) {
        const r = await call();
        expect(r.response.status).toBe(404);
        expect(JSON.stringify(r.error)).not.toContain('xyz');
      }
      await unchanged();
    });
  });
});
