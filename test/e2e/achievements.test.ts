import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIntegrationClient, unwrap, type ManagementClient } from '../../sdk/index.js';
import { cart, newCampaign } from '../helpers/fixtures.js';
import { otherAccount } from '../helpers/management-users.js';
import { setupShop, startTestNode, TestClock, type ShopSetup, type TestNode } from '../helpers/node.js';
import { rule } from '../helpers/promotions.js';
import { postgresUp } from '../helpers/services.js';

const DAY = 86_400_000;
type Body = Record<string, unknown>;
type Res = { response: Response; error?: unknown; data?: unknown };
const pointers = (r: Res) => ((r.error as { errors: Array<{ source?: { pointer?: string } }> }).errors ?? []).map((e) => e.source?.pointer);

/** Management calls on achievements (the extension paths). */
const mgmt = (admin: ManagementClient) => ({
  create: (applicationId: number, campaignId: number, body: Body) =>
    admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/achievements', { params: { path: { applicationId, campaignId } }, body: body as never }),
  list: (applicationId: number, campaignId: number, query: Body = {}) =>
    admin.GET('/v1/applications/{applicationId}/campaigns/{campaignId}/achievements', { params: { path: { applicationId, campaignId }, query: query as never } }),
  get: (applicationId: number, campaignId: number, achievementId: number) =>
    admin.GET('/v1/applications/{applicationId}/campaigns/{campaignId}/achievements/{achievementId}', {
      params: { path: { applicationId, campaignId, achievementId } },
    }),
  update: (applicationId: number, campaignId: number, achievementId: number, body: Body) =>
    admin.PUT('/v1/applications/{applicationId}/campaigns/{campaignId}/achievements/{achievementId}', {
      params: { path: { applicationId, campaignId, achievementId } },
      body: body as never,
    }),
  remove: (applicationId: number, campaignId: number, achievementId: number) =>
    admin.DELETE('/v1/applications/{applicationId}/campaigns/{campaignId}/achievements/{achievementId}', {
      params: { path: { applicationId, campaignId, achievementId } },
    }),
});

/** A campaign whose every session / event adds `delta` to a new achievement; returns both ids. */
async function achievementCampaign(admin: ManagementClient, applicationId: number, achievement: Body, delta = 1): Promise<{ campaignId: number; achievementId: number }> {
  const campaign = unwrap(await admin.POST('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId } }, body: newCampaign() as never }));
  const a = unwrap(await mgmt(admin).create(applicationId, campaign.id, achievement));
  unwrap(
    await admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets', {
      params: { path: { applicationId, campaignId: campaign.id } },
      body: { rules: [rule(true, [['increaseAchievementProgress', a.id, delta]], 'progress')], bindings: [], activate: true } as never,
    }),
  );
  return { campaignId: campaign.id, achievementId: a.id };
}

const session = (s: ShopSetup, id: string, body: Body) =>
  s.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: id } }, body: { customerSession: body as never } });
const close = async (s: ShopSetup, id: string, profileId: string) => {
  unwrap(await session(s, id, cart([10], { profileId })));
  return unwrap(await session(s, id, { ...cart([10], { profileId }), state: 'closed' }));
};
const listFor = (s: ShopSetup, integrationId: string, query: Body = {}) =>
  s.integration.GET('/v1/customer_profiles/{integrationId}/achievements', { params: { path: { integrationId }, query: query as never } });
const historyOf = (s: ShopSetup, integrationId: string, achievementId: number, query: Body = {}) =>
  s.integration.GET('/v1/customer_profiles/{integrationId}/achievements/{achievementId}', {
    params: { path: { integrationId, achievementId }, query: query as never },
  });
/** The profile's current progress on the achievement, whatever the achievement's status. */
const progressOf = async (s: ShopSetup, profileId: string, achievementId: number) => {
  const list = unwrap(await listFor(s, profileId, { achievementIds: String(achievementId), achievementStatus: 'active,scheduled,expired,inactive' }));
  return list.data[0]!.currentProgress;
};

const YEARS = 10 * 365 * DAY;

describe('achievements', () => {
  let t: TestNode;
  let shop: ShopSetup;
  let stranger: ShopSetup;
  let strangerAdmin: ManagementClient;
  const clock = new TestClock();
  const pool: ShopSetup[] = [];

  beforeAll(async () => {
    // The clock moves by months: tokens and API keys must outlive that.
    t = await startTestNode('pglite', { clock, tokenTtlMs: YEARS });
    shop = await setupShop(t.url, t.admin);
    const other = await otherAccount(t.node.db, t.url, 'achievement-stranger@test.local');
    strangerAdmin = other.client;
    stranger = await setupShop(t.url, other.client);
    for (let i = 0; i < 7; i++) pool.push(await setupShop(t.url, t.admin));
    await t.node.db.query(`UPDATE api_keys SET expires = '2099-01-01T00:00:00Z'`);
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });
  /** A fresh shop, made before the clock moved (a key cannot be made in the moved future). */
  const newShop = async () => pool.shift()!;

  it('manages achievements of a campaign: create, list, get, update, delete', async () => {
    const m = mgmt(t.admin);
    const r = await m.create(shop.applicationId, shop.campaignId, {
      name: 'tenOrders',
      title: 'Ten orders',
      description: 'Order ten times in a year',
      target: 10,
      period: '1Y',
      periodEndOverride: { month: 12, dayOfMonth: 31, hour: 23, minute: 59, second: 59 },
      recurrencePolicy: 'on_expiration',
      activationPolicy: 'user_action',
      allowRollbackAfterCompletion: true,
    });
    expect(r.response.status).toBe(201);
    const a = unwrap(r);
    expect(a).toMatchObject({
      name: 'tenOrders',
      title: 'Ten orders',
      description: 'Order ten times in a year',
      target: 10,
      period: '1Y',
      periodEndOverride: { month: 12, dayOfMonth: 31, hour: 23, minute: 59, second: 59 },
      recurrencePolicy: 'on_expiration',
      activationPolicy: 'user_action',
      allowRollbackAfterCompletion: true,
      campaignId: shop.campaignId,
      status: 'active',
    });
    expect(Date.parse(a.created)).not.toBeNaN();

    // Defaults; a fixed schedule in the future is `scheduled`.
    const future = new Date(clock.now().getTime() + 10 * DAY).toISOString();
    const b = unwrap(await m.create(shop.applicationId, shop.campaignId, { name: 'later', target: 2, period: '30D', activationPolicy: 'fixed_schedule', fixedStartDate: future }));
    expect(b).toMatchObject({ title: 'later', description: '', recurrencePolicy: 'no_recurrence', activationPolicy: 'fixed_schedule', status: 'scheduled', allowRollbackAfterCompletion: false });
    expect(b.fixedStartDate).toBe(future);

    const list = unwrap(await m.list(shop.applicationId, shop.campaignId));
    expect(list.totalResultSize).toBe(2);
    expect(list.data.map((x) => x.name)).toEqual(['tenOrders', 'later']);
    expect(unwrap(await m.list(shop.applicationId, shop.campaignId, { name: 'LAT' })).data.map((x) => x.id)).toEqual([b.id]);
    expect(unwrap(await m.list(shop.applicationId, shop.campaignId, { sort: '-id', pageSize: 1 })).data.map((x) => x.id)).toEqual([b.id]);
    expect(unwrap(await m.get(shop.applicationId, shop.campaignId, a.id)).name).toBe('tenOrders');

    const updated = unwrap(await m.update(shop.applicationId, shop.campaignId, a.id, { target: 12, title: 'Twelve orders', endDate: '2099-01-01T00:00:00.000Z' }));
    expect(updated).toMatchObject({ name: 'tenOrders', target: 12, title: 'Twelve orders', endDate: '2099-01-01T00:00:00.000Z', period: '1Y' });
    expect(unwrap(await m.get(shop.applicationId, shop.campaignId, a.id)).target).toBe(12);

    // A name is used once per campaign.
    const dup = await m.create(shop.applicationId, shop.campaignId, { name: 'later', target: 1, period: '1D' });
    expect(dup.response.status).toBe(409);
    expect((await m.update(shop.applicationId, shop.campaignId, a.id, { name: 'later' })).response.status).toBe(409);

    expect((await m.remove(shop.applicationId, shop.campaignId, b.id)).response.status).toBe(204);
    expect((await m.get(shop.applicationId, shop.campaignId, b.id)).response.status).toBe(404);
    expect((await m.remove(shop.applicationId, shop.campaignId, b.id)).response.status).toBe(404);
    expect(unwrap(await m.list(shop.applicationId, shop.campaignId)).totalResultSize).toBe(1);
  });

  it('rejects bad management input with pointers, absent tokens with 401, and hides other accounts (404)', async () => {
    const m = mgmt(t.admin);
    const bad = async (body: Body, pointer: string) => {
      const r = await m.create(shop.applicationId, shop.campaignId, body);
      expect(r.response.status, JSON.stringify(body)).toBe(400);
      expect(pointers(r), JSON.stringify(r.error)).toContain(pointer);
    };
    await bad({ name: 'p', target: 1, period: '1X' }, '/period');
    await bad({ name: 'p', target: 0, period: '1D' }, '/target');
    await bad({ target: 1, period: '1D' }, '/name');
    await bad({ name: 'p', target: 1, period: '1D', recurrencePolicy: 'sometimes' }, '/recurrencePolicy');
    await bad({ name: 'p', target: 1, period: '1D', activationPolicy: 'fixed_schedule' }, '/fixedStartDate');
    await bad({ name: 'p', target: 1, period: '1D', periodEndOverride: { month: 13 } }, '/periodEndOverride/month');
    await bad({ name: 'p', target: 1, period: '1D', fixedStartDate: '2030-01-02T00:00:00Z', endDate: '2030-01-01T00:00:00Z' }, '/endDate');

    const res = await fetch(`${t.url}/v1/applications/${shop.applicationId}/campaigns/${shop.campaignId}/achievements`);
    expect(res.status).toBe(401);

    const mine = unwrap(await m.create(shop.applicationId, shop.campaignId, { name: 'private', target: 1, period: '1D' }));
    const theirs = mgmt(strangerAdmin);
    expect((await theirs.get(shop.applicationId, shop.campaignId, mine.id)).response.status).toBe(404);
    expect((await theirs.list(shop.applicationId, shop.campaignId)).response.status).toBe(404);
    expect((await theirs.update(shop.applicationId, shop.campaignId, mine.id, { target: 5 })).response.status).toBe(404);
    expect((await theirs.remove(shop.applicationId, shop.campaignId, mine.id)).response.status).toBe(404);
    // Through their own Application and campaign the id is unknown too.
    expect((await theirs.get(stranger.applicationId, stranger.campaignId, mine.id)).response.status).toBe(404);
    expect(unwrap(await m.get(shop.applicationId, shop.campaignId, mine.id)).target).toBe(1);
  });

  it('scenario: progress across sessions, cancel, completion, recurrence after the period, history filters', async () => {
    const s = await newShop();
    const { campaignId, achievementId } = await achievementCampaign(t.admin, s.applicationId, {
      name: 'threeOrders',
      target: 3,
      period: '30D',
      recurrencePolicy: 'on_expiration',
      activationPolicy: 'user_action',
    });
    const who = 'ach-alice';
    // An open session shows the effect but changes nothing yet.
    const open = unwrap(await session(s, 's1', cart([10], { profileId: who })));
    expect(open.effects.find((e) => e.effectType === 'increaseAchievementProgress')!.props).toMatchObject({ achievementId, delta: 1, value: 1, target: 3, isJustCompleted: false });
    expect(await progressOf(s, who, achievementId)).toEqual({ status: 'not_started', progress: 0 });

    const t0 = clock.now().getTime();
    unwrap(await session(s, 's1', { ...cart([10], { profileId: who }), state: 'closed' }));
    const first = await progressOf(s, who, achievementId);
    expect(first).toMatchObject({ status: 'inprogress', progress: 1 });
    expect(Math.abs(Date.parse(first.startDate!) - t0)).toBeLessThan(5_000);
    expect(Date.parse(first.endDate!) - Date.parse(first.startDate!)).toBe(30 * DAY);

    await close(s, 's2', who);
    expect(await progressOf(s, who, achievementId)).toMatchObject({ status: 'inprogress', progress: 2 });
    // A cancel gives the progress back.
    unwrap(await session(s, 's2', { ...cart([10], { profileId: who }), state: 'cancelled' }));
    expect(await progressOf(s, who, achievementId)).toMatchObject({ status: 'inprogress', progress: 1 });

    await close(s, 's3', who);
    const done = await close(s, 's4', who);
    expect(done.effects.find((e) => e.effectType === 'increaseAchievementProgress')!.props).toMatchObject({ value: 3, isJustCompleted: true });
    const completed = await progressOf(s, who, achievementId);
    expect(completed).toMatchObject({ status: 'completed', progress: 3, startDate: first.startDate, endDate: first.endDate });
    expect(Date.parse(completed.completionDate!)).toBeGreaterThanOrEqual(Date.parse(first.startDate!));
    // A completed run takes no more progress.
    await close(s, 's5', who);
    expect(await progressOf(s, who, achievementId)).toMatchObject({ status: 'completed', progress: 3 });

    // Filters of the list.
    expect(unwrap(await listFor(s, who, { currentProgressStatus: 'completed' })).data.map((a) => a.id)).toEqual([achievementId]);
    expect(unwrap(await listFor(s, who, { currentProgressStatus: 'inprogress' })).totalResultSize).toBe(0);
    expect(unwrap(await listFor(s, who, { campaignIds: `${campaignId},999999` })).data.map((a) => a.id)).toEqual([achievementId]);
    expect(unwrap(await listFor(s, who, { campaignIds: String(s.campaignId) })).totalResultSize).toBe(0);
    const listed = unwrap(await listFor(s, who)).data[0]!;
    expect(listed).toMatchObject({ id: achievementId, name: 'threeOrders', target: 3, period: '30D', campaignId, status: 'active', recurrencePolicy: 'on_expiration' });

    // After the period the run is over: with on_expiration the next progress starts a new run.
    clock.advance(31 * DAY);
    const between = clock.now().toISOString();
    expect(await progressOf(s, who, achievementId)).toEqual({ status: 'not_started', progress: 0 });
    expect(unwrap(await listFor(s, who, { currentProgressStatus: 'not_started' })).data.map((a) => a.id)).toEqual([achievementId]);
    await close(s, 's6', who);
    const second = await progressOf(s, who, achievementId);
    expect(second).toMatchObject({ status: 'inprogress', progress: 1 });
    expect(Date.parse(second.startDate!)).toBeGreaterThan(Date.parse(first.endDate!));

    // History: newest first, filtered by status and creation time.
    const all = unwrap(await historyOf(s, who, achievementId));
    expect(all.totalResultSize).toBe(2);
    expect(all.data.map((h) => [h.status, h.progress])).toEqual([
      ['inprogress', 1],
      ['completed', 3],
    ]);
    expect(unwrap(await historyOf(s, who, achievementId, { progressStatus: 'completed' })).data.map((h) => h.progress)).toEqual([3]);
    expect(unwrap(await historyOf(s, who, achievementId, { progressStatus: 'expired' })).totalResultSize).toBe(0);
    expect(unwrap(await historyOf(s, who, achievementId, { startDate: between })).data.map((h) => h.status)).toEqual(['inprogress']);
    expect(unwrap(await historyOf(s, who, achievementId, { endDate: between })).data.map((h) => h.status)).toEqual(['completed']);
    const paged = unwrap(await historyOf(s, who, achievementId, { pageSize: 1, skip: 1 }));
    expect(paged).toMatchObject({ totalResultSize: 2, data: [{ status: 'completed' }] });

    // Another period later the unfinished run shows as expired in the history.
    clock.advance(31 * DAY);
    expect(unwrap(await historyOf(s, who, achievementId, { progressStatus: 'expired' })).data.map((h) => h.progress)).toEqual([1]);
  });

  it('no_recurrence ends progress after the one run; completed runs keep their progress on cancel unless allowed', async () => {
    const s = await newShop();
    const once = await achievementCampaign(t.admin, s.applicationId, { name: 'once', target: 1, period: '7D' });
    const who = 'ach-bob';
    await close(s, 'b1', who);
    expect(await progressOf(s, who, once.achievementId)).toMatchObject({ status: 'completed', progress: 1 });
    // Not allowed to roll back after completion: the cancel leaves it completed.
    unwrap(await session(s, 'b1', { ...cart([10], { profileId: who }), state: 'cancelled' }));
    expect(await progressOf(s, who, once.achievementId)).toMatchObject({ status: 'completed', progress: 1 });

    const who2 = 'ach-carol';
    await close(s, 'c1', who2);
    unwrap(await mgmt(t.admin).update(s.applicationId, once.campaignId, once.achievementId, { allowRollbackAfterCompletion: true }));
    unwrap(await session(s, 'c1', { ...cart([10], { profileId: who2 }), state: 'cancelled' }));
    expect(await progressOf(s, who2, once.achievementId)).toMatchObject({ status: 'inprogress', progress: 0 });

    // A reopen gives the progress back as a cancel does.
    const who3 = 'ach-cathy';
    await close(s, 'r1', who3);
    expect(await progressOf(s, who3, once.achievementId)).toMatchObject({ status: 'completed', progress: 1 });
    unwrap(await s.integration.PUT('/v2/customer_sessions/{customerSessionId}/reopen', { params: { path: { customerSessionId: 'r1' } } }));
    expect(await progressOf(s, who3, once.achievementId)).toMatchObject({ status: 'inprogress', progress: 0 });

    // After the period a no_recurrence achievement takes no more progress.
    clock.advance(8 * DAY);
    await close(s, 'c2', who2);
    expect(await progressOf(s, who2, once.achievementId)).toMatchObject({ status: 'expired', progress: 0 });
    expect(unwrap(await historyOf(s, who2, once.achievementId)).totalResultSize).toBe(1);
  });

  it('counts progress of events and profile updates at once; fixed schedules start at fixedStartDate', async () => {
    const s = await newShop();
    const start = new Date(clock.now().getTime() + 2 * DAY).toISOString();
    const fixed = await achievementCampaign(t.admin, s.applicationId, { name: 'fixed', target: 5, period: '10D', activationPolicy: 'fixed_schedule', fixedStartDate: start, recurrencePolicy: 'on_expiration' }, 2);
    const who = 'ach-dave';
    unwrap(await t.admin.POST('/v1/attributes', { body: { entity: 'Event', eventType: 'visited', name: 'page', type: 'string', title: 'page' } }));
    unwrap(await s.integration.PUT('/v2/customer_profiles/{integrationId}', { params: { path: { integrationId: who } }, body: { attributes: {} } as never }));
    // Scheduled: not listed by default, and progress before the start is ignored.
    expect(unwrap(await listFor(s, who)).totalResultSize).toBe(0);
    const scheduled = unwrap(await listFor(s, who, { achievementStatus: 'scheduled' }));
    expect(scheduled.data.map((a) => [a.id, a.status, a.currentProgress.status])).toEqual([[fixed.achievementId, 'scheduled', 'not_started']]);
    unwrap(await s.integration.POST('/v2/events', { body: { profileId: who, type: 'visited', attributes: { page: 'home' } } as never }));
    expect(unwrap(await historyOf(s, who, fixed.achievementId)).totalResultSize).toBe(0);

    clock.advance(3 * DAY);
    unwrap(await s.integration.POST('/v2/events', { body: { profileId: who, type: 'visited', attributes: { page: 'home' } } as never }));
    const p = await progressOf(s, who, fixed.achievementId);
    expect(p).toMatchObject({ status: 'inprogress', progress: 2, startDate: start });
    expect(Date.parse(p.endDate!) - Date.parse(start)).toBe(10 * DAY);
    unwrap(
      await s.integration.PUT('/v2/customer_profiles/{integrationId}', {
        params: { path: { integrationId: who }, query: { runRuleEngine: true } as never },
        body: { attributes: {} } as never,
      }),
    );
    expect((await progressOf(s, who, fixed.achievementId)).progress).toBe(4);
  });

  it('bounds a run by periodEndOverride and by the achievement endDate', async () => {
    const s = await newShop();
    const yearly = await achievementCampaign(t.admin, s.applicationId, {
      name: 'yearly',
      target: 100,
      period: '1Y',
      periodEndOverride: { month: 12, dayOfMonth: 31, hour: 23, minute: 59, second: 59 },
    });
    const endsSoon = new Date(clock.now().getTime() + 5 * DAY).toISOString();
    const capped = await achievementCampaign(t.admin, s.applicationId, { name: 'capped', target: 100, period: '30D', endDate: endsSoon });
    await close(s, 'o1', 'ach-olga');
    const y = await progressOf(s, 'ach-olga', yearly.achievementId);
    const year = new Date(Date.parse(y.startDate!)).getUTCFullYear() + 1;
    expect(y).toMatchObject({ status: 'inprogress', progress: 1, endDate: `${year}-12-31T23:59:59.000Z` });
    expect(await progressOf(s, 'ach-olga', capped.achievementId)).toMatchObject({ status: 'inprogress', progress: 1, endDate: endsSoon });
    // After the achievement's endDate nothing more is counted.
    clock.advance(6 * DAY);
    await close(s, 'o2', 'ach-olga');
    expect(await progressOf(s, 'ach-olga', capped.achievementId)).toMatchObject({ status: 'expired', progress: 1 });
    expect((await progressOf(s, 'ach-olga', yearly.achievementId)).progress).toBe(2);
  });

  it('rejects bad integration input (400), bad keys (401) and hides other Applications (404)', async () => {
    const s = await newShop();
    const { achievementId } = await achievementCampaign(t.admin, s.applicationId, { name: 'x', target: 2, period: '1D' });
    await close(s, 'e1', 'ach-erin');
    const bad = async (r: Promise<Res>, pointer: string) => {
      const res = await r;
      expect(res.response.status, pointer).toBe(400);
      expect(pointers(res), JSON.stringify(res.error)).toContain(pointer);
    };
    await bad(listFor(s, 'ach-erin', { currentProgressStatus: 'done' }), '/query/currentProgressStatus');
    await bad(listFor(s, 'ach-erin', { achievementIds: '1,x' }), '/query/achievementIds');
    await bad(listFor(s, 'ach-erin', { campaignIds: 'abc' }), '/query/campaignIds');
    await bad(listFor(s, 'ach-erin', { achievementStatus: 'gone' }), '/query/achievementStatus');
    await bad(listFor(s, 'ach-erin', { pageSize: 0 }), '/query/pageSize');
    await bad(historyOf(s, 'ach-erin', achievementId, { progressStatus: 'not_started' }), '/query/progressStatus');
    await bad(historyOf(s, 'ach-erin', achievementId, { startDate: 'yesterday' }), '/query/startDate');

    const wrong = createIntegrationClient({ baseUrl: t.url, apiKey: 'nope', retries: 0 });
    expect((await wrong.GET('/v1/customer_profiles/{integrationId}/achievements', { params: { path: { integrationId: 'ach-erin' } } })).response.status).toBe(401);
    const none = await fetch(`${t.url}/v1/customer_profiles/ach-erin/achievements/${achievementId}`);
    expect(none.status).toBe(401);

    // Another Application of the account sees neither the achievement nor its history.
    const sibling = await newShop();
    expect(unwrap(await listFor(sibling, 'ach-erin')).totalResultSize).toBe(0);
    expect((await historyOf(sibling, 'ach-erin', achievementId)).response.status).toBe(404);
    // Another account does not know the profile.
    expect((await listFor(stranger, 'ach-erin')).response.status).toBe(404);
    expect((await historyOf(stranger, 'ach-erin', achievementId)).response.status).toBe(404);
    expect((await historyOf(s, 'ach-erin', 2_000_000)).response.status).toBe(404);
    expect((await listFor(s, 'nobody-here')).response.status).toBe(404);
    expect(unwrap(await historyOf(s, 'ach-erin', achievementId)).data.map((h) => h.progress)).toEqual([1]);
    // The customer inventory lists them too.
    const inv = unwrap(
      await s.integration.GET('/v1/customer_profiles/{integrationId}/inventory', { params: { path: { integrationId: 'ach-erin' }, query: { achievements: true } } }),
    );
    expect(inv.achievements!.map((a) => [a.id, a.name, a.currentProgress.status, a.currentProgress.progress])).toEqual([[achievementId, 'x', 'inprogress', 1]]);
  });
});

describe('achievements that are not active', () => {
  let t: TestNode;
  let shop: ShopSetup;
  let theirs: ShopSetup;
  const clock = new TestClock();

  beforeAll(async () => {
    t = await startTestNode('pglite', { clock, tokenTtlMs: YEARS });
    shop = await setupShop(t.url, t.admin);
    theirs = await setupShop(t.url, (await otherAccount(t.node.db, t.url, 'achievement-status-stranger@test.local')).client);
    await t.node.db.query(`UPDATE api_keys SET expires = '2099-01-01T00:00:00Z'`);
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  const ALL = 'active,scheduled,expired,inactive';
  const campaignPath = (campaignId: number) => ({ params: { path: { applicationId: shop.applicationId, campaignId } } });
  const setCampaign = async (campaignId: number, body: Body) =>
    unwrap(await t.admin.PUT('/v1/applications/{applicationId}/campaigns/{campaignId}', { ...campaignPath(campaignId), body: { name: 'Autumn sale', ...body } as never }));
  /** Each achievement of the list as [status, its current progress status, progress]. */
  const statuses = async (who: string, query: Body = { achievementStatus: ALL }) =>
    Object.fromEntries(unwrap(await listFor(shop, who, query)).data.map((a) => [a.name, [a.status, a.currentProgress.status, a.currentProgress.progress]]));

  it('lists an achievement of a disabled or archived campaign as inactive and one past its or its campaign\'s end as expired; none of them takes progress', async () => {
    const who = 'ach-ivy';
    const day = (n: number) => new Date(clock.now().getTime() + n * DAY).toISOString();
    const paused = await achievementCampaign(t.admin, shop.applicationId, { name: 'paused', target: 10, period: '30D' });
    const shelved = await achievementCampaign(t.admin, shop.applicationId, { name: 'shelved', target: 10, period: '30D' });
    const moved = await achievementCampaign(t.admin, shop.applicationId, { name: 'moved', target: 10, period: '30D', endDate: day(60) });
    const windowed = await achievementCampaign(t.admin, shop.applicationId, { name: 'windowed', target: 10, period: '30D' });
    await achievementCampaign(t.admin, shop.applicationId, { name: 'stays', target: 10, period: '30D' });
    await close(shop, 'ivy-1', who);
    expect(await statuses(who)).toEqual({
      paused: ['active', 'inprogress', 1],
      shelved: ['active', 'inprogress', 1],
      moved: ['active', 'inprogress', 1],
      windowed: ['active', 'inprogress', 1],
      stays: ['active', 'inprogress', 1],
    });

    await setCampaign(paused.campaignId, { state: 'disabled' });
    await setCampaign(shelved.campaignId, { state: 'archived' });
    await setCampaign(windowed.campaignId, { endTime: day(1) });
    // The endDate moves before the end of the run that has begun.
    const newEnd = day(1);
    unwrap(await mgmt(t.admin).update(shop.applicationId, moved.campaignId, moved.achievementId, { endDate: newEnd }));
    clock.advance(2 * DAY);

    await close(shop, 'ivy-2', who);
    expect(await statuses(who)).toEqual({
      paused: ['inactive', 'inprogress', 1],
      shelved: ['inactive', 'inprogress', 1],
      moved: ['expired', 'expired', 1],
      windowed: ['expired', 'expired', 1],
      stays: ['active', 'inprogress', 2],
    });
    // Only active ones by default (and in the customer inventory); each status on its own.
    expect(Object.keys(await statuses(who, {}))).toEqual(['stays']);
    expect(Object.keys(await statuses(who, { achievementStatus: 'inactive' }))).toEqual(['paused', 'shelved']);
    expect(Object.keys(await statuses(who, { achievementStatus: 'expired,active' }))).toEqual(['moved', 'windowed', 'stays']);
    const inventory = unwrap(
      await shop.integration.GET('/v1/customer_profiles/{integrationId}/inventory', { params: { path: { integrationId: who }, query: { achievements: true } } }),
    );
    expect(inventory.achievements!.map((a) => a.name)).toEqual(['stays']);
    // The Management API shows the same status.
    const shown = unwrap(await mgmt(t.admin).get(shop.applicationId, paused.campaignId, paused.achievementId));
    expect(shown).toMatchObject({ name: 'paused', status: 'inactive' });
    expect(unwrap(await mgmt(t.admin).list(shop.applicationId, moved.campaignId)).data.map((a) => a.status)).toEqual(['expired']);
    // The history of the moved achievement ends its run at the new endDate.
    expect(unwrap(await historyOf(shop, who, moved.achievementId)).data.map((h) => [h.status, h.progress, h.endDate])).toEqual([['expired', 1, newEnd]]);
  });

  it('emits and counts no progress for an achievement whose campaign was disabled behind a cached evaluation, or that has not started', async () => {
    const who = 'ach-jon';
    // A campaign disabled in the database without telling the node (as another node's change
    // reaches this one a moment later): its rules still run here, its achievement takes nothing.
    const stale = await achievementCampaign(t.admin, shop.applicationId, { name: 'stale', target: 10, period: '30D' });
    const later = await achievementCampaign(t.admin, shop.applicationId, {
      name: 'later',
      target: 10,
      period: '30D',
      activationPolicy: 'fixed_schedule',
      fixedStartDate: new Date(clock.now().getTime() + 5 * DAY).toISOString(),
    });
    unwrap(await session(shop, 'jon-0', cart([10], { profileId: who })));
    await t.node.db.query(`UPDATE campaigns SET state = 'disabled' WHERE id = $1`, [stale.campaignId]);
    const closed = await close(shop, 'jon-1', who);
    const progressed = closed.effects.filter((e) => e.effectType === 'increaseAchievementProgress').map((e) => e.props.achievementId);
    expect(progressed).not.toContain(stale.achievementId);
    expect(progressed).not.toContain(later.achievementId);
    expect(await progressOf(shop, who, stale.achievementId)).toEqual({ status: 'not_started', progress: 0 });
    expect(await progressOf(shop, who, later.achievementId)).toEqual({ status: 'not_started', progress: 0 });
    expect(unwrap(await historyOf(shop, who, stale.achievementId)).totalResultSize).toBe(0);
    expect((await statuses(who)).stale).toEqual(['inactive', 'not_started', 0]);
    expect((await statuses(who)).later).toEqual(['scheduled', 'not_started', 0]);
  });

  it('refuses an unknown achievementStatus with a 400 on its pointer, and another account sees nothing', async () => {
    const r = await listFor(shop, 'ach-ivy', { achievementStatus: 'active,retired' });
    expect(r.response.status).toBe(400);
    expect(pointers(r)).toEqual(['/query/achievementStatus']);
    expect((await listFor(theirs, 'ach-ivy', { achievementStatus: ALL })).response.status).toBe(404);
  });
});

describe.skipIf(!postgresUp)('achievements on Postgres', () => {
  let t: TestNode;
  beforeAll(async () => {
    t = await startTestNode('postgres');
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  it('adds up progress of parallel closes of one profile exactly, and completes once', async () => {
    const s = await setupShop(t.url, t.admin);
    const { achievementId } = await achievementCampaign(t.admin, s.applicationId, { name: 'many', target: 15, period: '1Y' });
    const who = 'ach-parallel';
    const ids = Array.from({ length: 20 }, (_, i) => `par-${i}`);
    for (const id of ids) unwrap(await session(s, id, cart([10], { profileId: who })));
    const closes = await Promise.all(ids.map((id) => session(s, id, { ...cart([10], { profileId: who }), state: 'closed' })));
    for (const r of closes) expect(r.response.status).toBe(200);
    // 15 reach the target; the run then takes no more.
    const p = await progressOf(s, who, achievementId);
    expect(p).toMatchObject({ status: 'completed', progress: 15 });
    const rows = await t.node.db.query<{ n: string }>(`SELECT count(*) AS n FROM achievement_progress WHERE achievement_id = $1`, [achievementId]);
    expect(Number(rows[0]!.n)).toBe(1);
  }, 30_000);
});
