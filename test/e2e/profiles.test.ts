import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIntegrationClient, unwrap } from '../../sdk/index.js';
import { cart } from '../helpers/fixtures.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';
import { campaignStats, rule } from '../helpers/promotions.js';
import { strangerAdmin } from '../helpers/coupon-management.js';
import { postgresUp } from '../helpers/services.js';

const BUSY_MESSAGE = 'Too many requests are updating this profile at the same time';

/** A coupon for every new profile, a notification for every updated profile with 10+ points. */
const profileRuleset = () => ({
  rules: [
    rule(['=', ['.', 'Event', 'Type'], 'service_profile_created'], [['createCoupon', { usageLimit: 1 }]], 'welcome'),
    rule(
      ['and', ['=', ['.', 'Event', 'Type'], 'service_profile_updated'], ['>=', ['.|', 'Profile', 'Attributes', 'points', 0], 10]],
      [['showNotification', 'info', 'Well done', 'You have 10 points']],
      'points',
    ),
  ],
  bindings: [],
  activate: true,
});

describe.skipIf(!postgresUp)('customer profiles (v2)', () => {
  let t: TestNode;
  let shop: ShopSetup;
  let other: ShopSetup;
  let release: (() => void) | undefined;
  let held: Promise<void> | undefined;

  beforeAll(async () => {
    t = await startTestNode('postgres', {
      // Holds the actor of any profile whose ID starts with "busy" until the test releases it.
      actorBeforeRun: async (key) => {
        if (key.includes(':busy') && held) await held;
      },
    });
    shop = await setupShop(t.url, t.admin, { ruleset: profileRuleset() });
    other = await setupShop(t.url, t.admin);
  });
  afterAll(async () => {
    await t?.stop();
  });

  const db = () => t.node.db;
  const put = (
    s: ShopSetup,
    integrationId: string,
    body: Record<string, unknown>,
    query: Record<string, unknown> = {},
    headers: Record<string, string> = {},
  ) =>
    s.integration.PUT('/v2/customer_profiles/{integrationId}', {
      params: { path: { integrationId }, query: query as never },
      body: body as never,
      headers,
    });
  const profileRow = async (integrationId: string) =>
    (await db().query<{ attributes: Record<string, unknown>; closed_sessions: number; total_sales: string }>(
      `SELECT attributes, closed_sessions, total_sales FROM customer_profiles WHERE integration_id = $1`,
      [integrationId],
    ))[0];
  const eventRows = (profileId: string) =>
    db().query<{ type: string; effects: Array<{ effectType: string }>; session_id: string; application_id: number }>(
      `SELECT type, effects, session_id, application_id FROM events WHERE profile_id = $1 ORDER BY id`,
      [profileId],
    );

  it('creates a missing profile and merges attributes into the stored ones without running rules', async () => {
    const first = unwrap(await put(shop, 'alice', { attributes: { name: 'Alice', tier: 'silver' }, responseContent: ['customerProfile'] }));
    expect(first.effects).toEqual([]);
    expect(first.customerProfile).toMatchObject({ integrationId: 'alice', attributes: { name: 'Alice', tier: 'silver' }, closedSessions: 0, totalSales: 0 });
    const second = unwrap(await put(shop, 'alice', { attributes: { tier: 'gold', age: 34 }, responseContent: ['customerProfile'] }));
    expect(second.customerProfile).toMatchObject({ id: first.customerProfile!.id, integrationId: 'alice', attributes: { name: 'Alice', tier: 'gold', age: 34 } });
    expect((await profileRow('alice'))!.attributes).toEqual({ name: 'Alice', tier: 'gold', age: 34 });
    // No rule engine: no event, no created coupon.
    expect(await eventRows('alice')).toEqual([]);
    expect(Object.keys(second).sort()).toEqual(['createdCoupons', 'createdReferrals', 'customerProfile', 'effects']);
  });

  it('evaluates service_profile_created, then service_profile_updated, committing effects at once', async () => {
    const created = unwrap(
      await put(shop, 'bob', { attributes: { points: 3 }, responseContent: ['customerProfile', 'event', 'triggeredCampaigns', 'ruleFailureReasons', 'loyalty', 'awardedGiveaways'] }, { runRuleEngine: true }),
    );
    expect(created.effects.map((e) => e.effectType)).toEqual(['couponCreated']);
    expect(created.createdCoupons).toHaveLength(1);
    const code = created.createdCoupons[0]!.value as string;
    expect(created.event).toMatchObject({ type: 'service_profile_created', profileId: 'bob', applicationId: shop.applicationId });
    expect(created.event!.id).toBeGreaterThan(0);
    expect(created.triggeredCampaigns).toEqual([expect.objectContaining({ id: shop.campaignId })]);
    expect(created.ruleFailureReasons).toEqual([]);
    expect(created.loyalty).toEqual({ cards: [], programs: {} });
    expect((created as Record<string, unknown>).awardedGiveaways).toEqual([]);
    // Committed at once: the coupon exists and counts in the campaign statistics.
    const coupons = await db().query<{ value: string; recipient_integration_id: string }>(`SELECT value, recipient_integration_id FROM coupons WHERE value = $1`, [code]);
    expect(coupons).toEqual([{ value: code, recipient_integration_id: 'bob' }]);

    const notYet = unwrap(await put(shop, 'bob', { attributes: { points: 5 }, responseContent: ['event'] }, { runRuleEngine: true }));
    expect(notYet.effects).toEqual([]);
    expect(notYet.event).toMatchObject({ type: 'service_profile_updated' });
    // The rules see the profile after the merge.
    const updated = unwrap(await put(shop, 'bob', { attributes: { points: 12 }, responseContent: ['event', 'customerProfile'] }, { runRuleEngine: true }));
    expect(updated.effects.map((e) => [e.effectType, e.props])).toEqual([
      ['showNotification', { notificationType: 'info', title: 'Well done', body: 'You have 10 points' }],
    ]);
    expect(updated.customerProfile?.attributes).toEqual({ points: 12 });
    const events = await eventRows('bob');
    expect(events.map((e) => e.type)).toEqual(['service_profile_created', 'service_profile_updated', 'service_profile_updated']);
    expect(events[2]!.effects.map((e) => e.effectType)).toEqual(['showNotification']);
    expect((await campaignStats(t.admin, shop.applicationId, shop.campaignId)).couponCreationCount).toBeGreaterThanOrEqual(1);
  });

  it('persists nothing for a dry run: no profile, event or coupon rows', async () => {
    const couponsBefore = await db().query(`SELECT id FROM coupons`);
    const dry = unwrap(
      await put(shop, 'dry-carol', { attributes: { points: 1 }, responseContent: ['customerProfile', 'event'] }, { runRuleEngine: true, dry: true }),
    );
    expect(dry.effects.map((e) => e.effectType)).toEqual(['couponCreated']);
    expect(dry.createdCoupons).toHaveLength(1);
    expect(dry.event).toMatchObject({ id: 0, type: 'service_profile_created' });
    expect(dry.customerProfile).toMatchObject({ integrationId: 'dry-carol', attributes: { points: 1 } });
    expect(await profileRow('dry-carol')).toBeUndefined();
    expect(await eventRows('dry-carol')).toEqual([]);
    expect(await db().query(`SELECT id FROM coupons`)).toHaveLength(couponsBefore.length);

    // An existing profile keeps its attributes.
    unwrap(await put(shop, 'dry-dave', { attributes: { points: 1 } }));
    const dryUpdate = unwrap(await put(shop, 'dry-dave', { attributes: { points: 50 }, responseContent: ['customerProfile'] }, { runRuleEngine: true, dry: true }));
    expect(dryUpdate.effects.map((e) => e.effectType)).toEqual(['showNotification']);
    expect((await profileRow('dry-dave'))!.attributes).toEqual({ points: 1 });
    expect(await eventRows('dry-dave')).toEqual([]);
  });

  it('refuses bad input with a pointer to it', async () => {
    const cases: Array<[Record<string, unknown>, Record<string, unknown>, string]> = [
      [{ attributes: 'x' }, {}, '/attributes'],
      [{ responseContent: ['customerSession'] }, {}, '/responseContent/0'],
      [{ evaluableCampaignIds: ['a'] }, {}, '/evaluableCampaignIds/0'],
      [{ audiencesChanges: { adds: ['x'] } }, {}, '/audiencesChanges/adds/0'],
      [{ audiencesChanges: { remove: [1] } }, {}, '/audiencesChanges/remove'],
      [{ audiencesChanges: { adds: [3, 4], deletes: [4] } }, {}, '/audiencesChanges/deletes/0'],
      [{}, { dry: true }, '/query/dry'],
      [{}, { runRuleEngine: 'maybe' }, '/query/runRuleEngine'],
    ];
    for (const [body, query, pointer] of cases) {
      const r = await put(shop, 'erin', body, query);
      expect(r.response.status, pointer).toBe(400);
      expect(r.error!.errors.map((e) => e.source?.pointer), pointer).toContain(pointer);
    }
    expect(await profileRow('erin')).toBeUndefined();
  });

  it('refuses audiencesChanges naming an unknown audience with 404, storing nothing (audiences.test.ts covers the rest)', async () => {
    const r = await put(shop, 'frank', { attributes: { a: 1 }, audiencesChanges: { adds: [2_000_000_001], deletes: [] }, responseContent: ['customerProfile'] });
    expect(r.response.status).toBe(404);
    expect(r.error!.errors[0]!.source?.pointer).toBe('/audiencesChanges/adds/0');
    expect(await profileRow('frank')).toBeUndefined();
  });

  it('answers 401 to a wrong key', async () => {
    const stranger = createIntegrationClient({ baseUrl: t.url, apiKey: 'not-a-key', retries: 0 });
    const r = await stranger.PUT('/v2/customer_profiles/{integrationId}', { params: { path: { integrationId: 'x' } }, body: { attributes: { a: 1 } } });
    expect(r.response.status).toBe(401);
    expect(r.error!.errors[0]!.source?.pointer).toBe('/headers/authorization');
    const bulk = await stranger.PUT('/v2/customer_profiles', { body: { customerProfiles: [{ integrationId: 'x' }] } });
    expect(bulk.response.status).toBe(401);
    expect(await profileRow('x')).toBeUndefined();
  });

  it('shares profiles between the Applications of the account, but not their events', async () => {
    unwrap(await put(shop, 'gina', { attributes: { shop: 'A' } }, { runRuleEngine: true }));
    const fromOther = unwrap(await put(other, 'gina', { attributes: { app: 'B' }, responseContent: ['customerProfile'] }, { runRuleEngine: true }));
    expect(fromOther.customerProfile?.attributes).toEqual({ shop: 'A', app: 'B' });
    const events = await eventRows('gina');
    expect(events.map((e) => [e.application_id, e.type])).toEqual([
      [shop.applicationId, 'service_profile_created'],
      [other.applicationId, 'service_profile_updated'],
    ]);
    // The other Application's campaigns did not run for shop A's welcome rule.
    expect(fromOther.effects).toEqual([]);
  });

  it("keeps another account's calls away from this account's profile of the same integrationId", async () => {
    unwrap(await put(shop, 'ivy', { attributes: { tier: 'gold' } }, { runRuleEngine: true }));
    const ours = async () => (await eventRows('ivy')).filter((e) => e.application_id === shop.applicationId);
    const oursBefore = await ours();
    expect(oursBefore.map((e) => e.type)).toEqual(['service_profile_created']);
    const stranger = await setupShop(t.url, await strangerAdmin(t));
    const theirs = unwrap(await put(stranger, 'ivy', { attributes: { tier: 'none' }, responseContent: ['customerProfile'] }));
    expect(theirs.customerProfile?.attributes).toEqual({ tier: 'none' });
    unwrap(await stranger.integration.PUT('/v1/customer_profiles/{integrationId}', { params: { path: { integrationId: 'ivy' } }, body: { attributes: { v1: true } } }));
    const closed = unwrap(
      await stranger.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'ivy-s' } },
        body: { customerSession: cart([30], { profileId: 'ivy', state: 'closed' }) as never, responseContent: ['customerProfile'] },
      }),
    );
    expect(closed.customerProfile).toMatchObject({ closedSessions: 1, attributes: { tier: 'none', v1: true } });
    expect((await stranger.integration.DELETE('/v1/customer_data/{integrationId}', { params: { path: { integrationId: 'ivy' } } })).response.status).toBe(204);
    const rows = await db().query<{ application_id: number; attributes: Record<string, unknown>; closed_sessions: number }>(
      `SELECT a.id AS application_id, p.attributes, p.closed_sessions FROM customer_profiles p JOIN applications a ON a.account_id = p.account_id
       WHERE p.integration_id = 'ivy' AND a.id = ANY($1::int[]) ORDER BY a.id`,
      [[shop.applicationId, stranger.applicationId]],
    );
    // This account's profile is untouched; the stranger's own lost its attributes to the DELETE.
    expect(rows).toEqual([
      { application_id: shop.applicationId, attributes: { tier: 'gold' }, closed_sessions: 0 },
      { application_id: stranger.applicationId, attributes: {}, closed_sessions: 1 },
    ]);
    expect(await ours()).toEqual(oursBefore);
  });

  it('replays an update sent again with the same Idempotency-Key', async () => {
    const headers = { 'Idempotency-Key': 'profile-key-1' };
    const first = unwrap(await put(shop, 'hank', { attributes: { v: 1 }, responseContent: ['event'] }, { runRuleEngine: true }, headers));
    const again = unwrap(await put(shop, 'hank', { attributes: { v: 1 }, responseContent: ['event'] }, { runRuleEngine: true }, headers));
    expect(again).toEqual(first);
    expect(await eventRows('hank')).toHaveLength(1);
    const reused = await put(shop, 'hank', { attributes: { v: 2 } }, { runRuleEngine: true }, headers);
    expect(reused.response.status).toBe(409);
  });

  describe('bulk update', () => {
    it('updates every listed profile, merging repeated ones in order, and runs no rules', async () => {
      unwrap(await put(shop, 'bulk-1', { attributes: { keep: true, v: 0 } }));
      const r = unwrap(
        await shop.integration.PUT('/v2/customer_profiles', {
          body: {
            customerProfiles: [
              { integrationId: 'bulk-1', attributes: { v: 1 } },
              { integrationId: 'bulk-2', attributes: { v: 2, w: 'x' } },
              { integrationId: 'bulk-1', attributes: { v: 3 } },
              { integrationId: 'bulk-3' },
            ],
          },
        }),
      );
      expect(r.customerProfiles.map((p) => [p.integrationId, p.attributes])).toEqual([
        ['bulk-1', { keep: true, v: 3 }],
        ['bulk-2', { v: 2, w: 'x' }],
        ['bulk-3', {}],
      ]);
      expect((await profileRow('bulk-2'))!.attributes).toEqual({ v: 2, w: 'x' });
      expect(await eventRows('bulk-2')).toEqual([]);
      expect(await db().query(`SELECT 1 FROM coupons WHERE recipient_integration_id IN ('bulk-2', 'bulk-3')`)).toEqual([]);
    });

    it('takes 1 to 1000 profiles, each with an integrationId', async () => {
      const cases: Array<[unknown, string]> = [
        [[], '/customerProfiles'],
        [Array.from({ length: 1001 }, (_, i) => ({ integrationId: `p${i}` })), '/customerProfiles'],
        [[{ attributes: {} }], '/customerProfiles/0/integrationId'],
        [[{ integrationId: 'ok' }, { integrationId: '' }], '/customerProfiles/1/integrationId'],
        [[{ integrationId: 'ok', attributes: [] }], '/customerProfiles/0/attributes'],
      ];
      for (const [customerProfiles, pointer] of cases) {
        const r = await shop.integration.PUT('/v2/customer_profiles', { body: { customerProfiles } as never });
        expect(r.response.status, pointer).toBe(400);
        expect(r.error!.errors.map((e) => e.source?.pointer), pointer).toContain(pointer);
      }
      expect(await profileRow('ok')).toBeUndefined();
    });

    it('updates 1000 profiles in one request', async () => {
      const customerProfiles = Array.from({ length: 1000 }, (_, i) => ({ integrationId: `many-${i}`, attributes: { n: i } }));
      const r = unwrap(await shop.integration.PUT('/v2/customer_profiles', { body: { customerProfiles } }));
      expect(r.customerProfiles).toHaveLength(1000);
      const [count] = await db().query<{ n: number }>(`SELECT count(*)::int AS n FROM customer_profiles WHERE integration_id LIKE 'many-%' AND (attributes->>'n') IS NOT NULL`);
      expect(count!.n).toBe(1000);
    });
  });

  describe('concurrency', () => {
    it('runs one call per profile, queues two and refuses a fourth with 409', async () => {
      held = new Promise((r) => (release = r));
      const calls = Array.from({ length: 3 }, (_, i) => put(shop, 'busy-profile', { attributes: { [`k${i}`]: i } }));
      await new Promise((r) => setTimeout(r, 100));
      const refused = await put(shop, 'busy-profile', { attributes: { k3: 3 } });
      expect(refused.response.status).toBe(409);
      expect(refused.error).toMatchObject({ message: BUSY_MESSAGE, StatusCode: 409 });
      release!();
      held = undefined;
      expect((await Promise.all(calls)).map((r) => r.response.status)).toEqual([200, 200, 200]);
      expect((await profileRow('busy-profile'))!.attributes).toEqual({ k0: 0, k1: 1, k2: 2 });
    });

    it('loses no attribute under 50 parallel updates and parallel session closes of the same profile', async () => {
      // A client that retries the 409s of a busy profile until each call went through.
      const patient = createIntegrationClient({ baseUrl: t.url, apiKey: shop.apiKey, retries: 30, baseDelayMs: 5 });
      const updates = Array.from({ length: 50 }, (_, i) =>
        patient.PUT('/v2/customer_profiles/{integrationId}', {
          params: { path: { integrationId: 'racer' }, query: { runRuleEngine: i % 2 === 0 } },
          body: { attributes: { [`k${i}`]: i } },
        }),
      );
      // Session closes count purchases on the same profile row from the sessions' actors.
      const closes = Array.from({ length: 10 }, (_, i) =>
        patient.PUT('/v2/customer_sessions/{customerSessionId}', {
          params: { path: { customerSessionId: `racer-s${i}` } },
          body: { customerSession: cart([10], { profileId: 'racer', state: 'closed' }) as never },
        }),
      );
      const all = await Promise.all([...updates, ...closes]);
      expect(all.map((r) => r.response.status)).toEqual(all.map(() => 200));
      const row = (await profileRow('racer'))!;
      expect(Object.keys(row.attributes).sort()).toEqual(Array.from({ length: 50 }, (_, i) => `k${i}`).sort());
      expect(row.closed_sessions).toBe(10);
      expect(Number(row.total_sales)).toBe(100);
      // Every rule-engine update wrote its event.
      expect((await eventRows('racer')).filter((e) => e.type.startsWith('service_profile_'))).toHaveLength(25);
    });
  });
});
