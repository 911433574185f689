// The notifications that background work writes, with two nodes on one PostgreSQL racing for it:
// the strikethrough runners of both nodes send a job's batches once each; the loyalty schedulers of
// both nodes (and more rounds started by the test) announce each expiring grant once and each tier
// crossing once. The loyalty test moves the shared clock by weeks: it runs last.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIntegrationClient, unwrap } from '../../sdk/index.js';
import { settleDueLedgers } from '../../services/integration/index.js';
import { dropSchema } from '../helpers/db.js';
import { createProgram, longKey, noopRuleset } from '../helpers/loyalty.js';
import { setupShop, startTestNode, TestClock, type TestNode } from '../helpers/node.js';
import { contractErrors, notificationsAt, sleep, subscribe, waitForNotifications } from '../helpers/notifications.js';
import { addCampaign, rule } from '../helpers/promotions.js';
import { Receiver } from '../helpers/receiver.js';
import { postgresUp, uniqueName } from '../helpers/services.js';

const DAY = 86_400_000;
const LOYALTY_TYPES = ['LoyaltyPointsAdded', 'LoyaltyPointsDeducted', 'LoyaltyPointsExpiring', 'TierUpgrade', 'TierDowngrade'];

describe.runIf(postgresUp)('background notifications with two nodes on one PostgreSQL', () => {
  const schema = uniqueName('bgn');
  const clock = new TestClock();
  let a: TestNode;
  let b: TestNode;
  let rx: Receiver;

  beforeAll(async () => {
    rx = await Receiver.start();
    const options = {
      dbSchema: schema,
      clock,
      loyaltySchedulerMs: 20,
      outbox: { pollMs: 50, backoffMs: 20, maxBackoffMs: 100, timeoutMs: 5000, leaseMarginMs: 500 },
      strikethroughJobs: { pollMs: 20 },
    };
    a = await startTestNode('postgres', options);
    b = await startTestNode('postgres', options);
  }, 60_000);
  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    await dropSchema(schema);
    await rx?.stop();
  });

  /** Outbox rows of a type for the Application, and how many distinct bodies they carry. */
  const count = async (applicationId: number, type: string) => {
    const [row] = await a.node.db.query<{ n: number; ids: number }>(
      `SELECT count(*)::int AS n, count(DISTINCT body)::int AS ids FROM outbox WHERE application_id = $1 AND notification_type = $2`,
      [applicationId, type],
    );
    return row!;
  };

  it('sends each batch of a strikethrough job once, one job of an Application after the other, while both nodes work the jobs', async () => {
    const shop = await longKey(a, await setupShop(a.url, a.admin, { ruleset: noopRuleset }));
    const catalog = unwrap(await a.admin.POST('/v1/catalogs', { body: { name: 'two nodes', subscribedApplicationsIds: [shop.applicationId] } as never }));
    const campaignId = await addCampaign(a.admin, shop.applicationId, [rule(true, [['forEach', ['.', 'Session', 'CartItems'], [['Item'], ['setDiscountPerItem', 'one off', 1]]]])]);
    for (let v = 0; v < 3; v++) {
      const actions = Array.from({ length: v < 2 ? 1000 : 500 }, (_, k) => ({ type: 'ADD', payload: { sku: `s${String(v * 1000 + k).padStart(4, '0')}`, price: 10, attributes: { n: k } } }));
      unwrap(await shop.integration.PUT('/v1/catalogs/{catalogId}/sync', { params: { path: { catalogId: catalog.id } }, body: { version: v + 1, actions } as never }));
    }
    await subscribe(a.admin, rx, shop.applicationId, '/pg-strike', ['StrikethroughPrice']);
    // Two changes in a row, on different nodes: a sync touching every item, then a campaign change.
    unwrap(
      await shop.integration.PUT('/v1/catalogs/{catalogId}/sync', {
        params: { path: { catalogId: catalog.id } },
        body: { version: 4, actions: [{ type: 'PATCH_MANY', payload: { filters: [{ attr: 'n', op: 'GE', value: 0 }], attributes: { seen: true } } }] } as never,
      }),
    );
    unwrap(
      await b.admin.PUT('/v1/applications/{applicationId}/campaigns/{campaignId}', {
        params: { path: { applicationId: shop.applicationId, campaignId } },
        body: { name: 'off', state: 'disabled' } as never,
      }),
    );
    await waitForNotifications(rx, '/pg-strike', 6, 'StrikethroughPrice', 60_000);
    await sleep(1000);
    const all = notificationsAt(rx, '/pg-strike', 'StrikethroughPrice').map((n) => n.body);
    const batches = (type: string) => all.filter((x) => x.event.type === type).map((x) => [x.currentBatch, x.totalBatches, x.items.length]).sort();
    expect(batches('catalog_sync')).toEqual([
      [1, 3, 1000],
      [2, 3, 1000],
      [3, 3, 500],
    ]);
    expect(batches('campaign_change')).toEqual(batches('catalog_sync'));
    // A job evaluates the campaigns as they are when it runs: the sync's job may already see the
    // campaign disabled, the campaign change's job always does.
    for (const x of all.filter((y) => y.event.type === 'campaign_change')) for (const item of x.items) expect(item.strikethroughPrice).toBe(10);
    expect(await count(shop.applicationId, 'StrikethroughPrice')).toEqual({ n: 6, ids: 6 });
    const jobs = await a.node.db.query<{ event: string; state: string; done_batches: number }>(
      `SELECT event, state, done_batches FROM strikethrough_jobs WHERE application_id = $1 ORDER BY id`,
      [shop.applicationId],
    );
    expect(jobs).toEqual([
      { event: 'catalog_sync', state: 'done', done_batches: 3 },
      { event: 'campaign_change', state: 'done', done_batches: 3 },
    ]);
    // The second job started after the first had written its last batch.
    const [order] = await a.node.db.query<{ ok: boolean }>(
      `SELECT max(created) FILTER (WHERE body LIKE '%"catalog_sync"%') <= min(created) FILTER (WHERE body LIKE '%"campaign_change"%') AS ok
         FROM outbox WHERE notification_type = 'StrikethroughPrice' AND application_id = $1`,
      [shop.applicationId],
    );
    expect(order!.ok).toBe(true);
  }, 120_000);

  it('notifies each tier crossing once when closes on both nodes add points to one ledger at once', async () => {
    const shop = await longKey(a, await setupShop(a.url, a.admin, { ruleset: noopRuleset }));
    const pid = (
      await createProgram(a.admin, shop.applicationId, {
        tiers: [
          { name: 'Silver', minPoints: 100 },
          { name: 'Gold', minPoints: 250 },
        ],
      })
    ).id;
    await addCampaign(a.admin, shop.applicationId, [rule(true, [['addLoyaltyPoints', pid, 30, { name: 'visit' }]], 'earn')]);
    await subscribe(a.admin, rx, shop.applicationId, '/pg-tiers', LOYALTY_TYPES);
    const onB = createIntegrationClient({ baseUrl: b.url, apiKey: shop.apiKey, retries: 0 });
    const closes = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        (i % 2 === 0 ? shop.integration : onB).PUT('/v2/customer_sessions/{customerSessionId}', {
          params: { path: { customerSessionId: `race-${i}` } },
          body: { customerSession: { profileId: 'racer', state: 'closed', cartItems: [{ sku: 'x', quantity: 1, price: 1 }] } as never },
        }),
      ),
    );
    expect(closes.map((r) => r.response.status)).toEqual(closes.map(() => 200));
    await waitForNotifications(rx, '/pg-tiers', 10, 'LoyaltyPointsAdded', 20_000);
    await waitForNotifications(rx, '/pg-tiers', 2, 'TierUpgrade', 20_000);
    await sleep(500);
    const upgrades = notificationsAt(rx, '/pg-tiers', 'TierUpgrade').map((n) => n.body);
    expect(upgrades.map((u) => [u.OldTier?.Name ?? null, u.NewTier.Name, u.ActivePoints])).toEqual([
      [null, 'Silver', 120],
      ['Silver', 'Gold', 270],
    ]);
    expect(notificationsAt(rx, '/pg-tiers', 'LoyaltyPointsAdded').map((n) => n.body.Amount)).toEqual(Array(10).fill(30));
    expect(notificationsAt(rx, '/pg-tiers', 'TierDowngrade')).toEqual([]);
    expect(await count(shop.applicationId, 'TierUpgrade')).toEqual({ n: 2, ids: 2 });
  }, 60_000);

  it('announces each expiring grant once and each tier crossing once while both schedulers and more rounds race', async () => {
    const shop = await longKey(a, await setupShop(a.url, a.admin, { ruleset: noopRuleset }));
    const pid = (await createProgram(a.admin, shop.applicationId, { defaultValidity: '30D', tiers: [{ name: 'Silver', minPoints: 100 }] })).id;
    await subscribe(a.admin, rx, shop.applicationId, '/pg-loyalty', LOYALTY_TYPES);
    const profiles = Array.from({ length: 24 }, (_, i) => `p${i}`);
    for (const [i, p] of profiles.entries()) {
      unwrap(await shop.integration.PUT('/v2/customer_profiles/{integrationId}', { params: { path: { integrationId: p } }, body: { attributes: {} } as never }));
      // Half get their points at once (a tier now), half pending for a day (a tier from the scheduler).
      const body = i % 2 === 0 ? { points: 150, name: 'now' } : { points: 150, name: 'later', pendingDuration: '1D' };
      unwrap(await a.admin.PUT('/v1/loyalty_programs/{programID}/profile/{integrationID}/add_points', { params: { path: { programID: pid, integrationID: p } }, body }));
    }
    await waitForNotifications(rx, '/pg-loyalty', 12, 'TierUpgrade', 20_000);
    const race = () => Promise.all([...Array.from({ length: 3 }, () => settleDueLedgers(a.node.db, clock.now())), ...Array.from({ length: 3 }, () => settleDueLedgers(b.node.db, clock.now()))]);

    // A day on: the pending halves become active, each ledger reaches Silver, once.
    clock.advance(DAY + 60_000);
    await race();
    await waitForNotifications(rx, '/pg-loyalty', 24, 'TierUpgrade', 20_000);
    // 24 days after the first grants: all 24 grants expire within 7 days.
    clock.advance(23 * DAY);
    await race();
    await waitForNotifications(rx, '/pg-loyalty', 24, 'LoyaltyPointsExpiring', 20_000);
    await sleep(500);
    await race();
    // Past every expiry: the tiers fall, once each.
    clock.advance(8 * DAY);
    await race();
    await waitForNotifications(rx, '/pg-loyalty', 24, 'TierDowngrade', 20_000);
    await sleep(800);
    await race();
    await sleep(300);

    expect(await count(shop.applicationId, 'LoyaltyPointsExpiring')).toEqual({ n: 24, ids: 24 });
    expect(await count(shop.applicationId, 'TierUpgrade')).toEqual({ n: 24, ids: 24 });
    expect(await count(shop.applicationId, 'TierDowngrade')).toEqual({ n: 24, ids: 24 });
    const expiring = notificationsAt(rx, '/pg-loyalty', 'LoyaltyPointsExpiring').map((n) => n.body);
    expect(new Set(expiring.map((x) => x.ProfileIntegrationID))).toEqual(new Set(profiles));
    for (const n of notificationsAt(rx, '/pg-loyalty')) expect(contractErrors(n.type, n.body)).toEqual([]);
    const downgrades = notificationsAt(rx, '/pg-loyalty', 'TierDowngrade').map((n) => n.body);
    for (const d of downgrades) expect(d).toMatchObject({ OldTier: { Name: 'Silver', MinPoints: 100 }, NewTier: null, ActivePoints: 0 });
  }, 120_000);
});
