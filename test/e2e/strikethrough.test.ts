// Strikethrough pricing (issue 7): StrikethroughPrice notifications delivered by a running node to
// the real receiver after catalog syncs and campaign changes, in batches of at most 1000 items, with
// the prices the engine found; the price records they leave (target everyone and each audience the
// campaigns test), read back by best prior price with an audience target.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unwrap, type ManagementClient } from '../../sdk/index.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';
import { contractErrors, notificationsAt, sleep, subscribe, waitForNotifications, type Notification } from '../helpers/notifications.js';
import { addCampaign, rule } from '../helpers/promotions.js';
import { Receiver } from '../helpers/receiver.js';

type Client = ShopSetup['integration'];
type Action = { type: string; payload: Record<string, unknown> };
type Body = Record<string, any>;

const sync = (c: Client, catalogId: number, version: number, actions: Action[]) =>
  c.PUT('/v1/catalogs/{catalogId}/sync', { params: { path: { catalogId } }, body: { version, actions } as never });
const best = (c: Client, body: Record<string, unknown>) => c.POST('/v1/best_prior_price', { body: body as never });
const createCatalog = async (m: ManagementClient, applicationId: number) =>
  unwrap(await m.POST('/v1/catalogs', { body: { name: `c${Math.random().toString(36).slice(2, 8)}`, subscribedApplicationsIds: [applicationId] } as never }));

/** 20% off every item whose attribute `sale` is true (item discounts). */
const saleRule = rule(true, [
  ['forEach', ['cartItemsMatching', [['Item'], ['=', ['.', 'Item', 'Attributes', 'sale'], true]]], [['Item'], ['setDiscountPerItem', 'sale20', ['*', ['.', 'Item', 'Price'], 0.2]]]],
]);
/** 5 off every item for members of the audience. */
const memberRule = (audienceId: number) => rule(['inAudience', audienceId], [['forEach', ['.', 'Session', 'CartItems'], [['Item'], ['setDiscountPerItem', 'member5', 5]]]]);

const sku = (i: number) => `sku-${String(i).padStart(4, '0')}`;
const priceOf = (i: number) => 10 + (i % 200);
const onSale = (i: number) => i % 2 === 0;

describe('strikethrough pricing', () => {
  let t: TestNode;
  let rx: Receiver;

  beforeAll(async () => {
    rx = await Receiver.start();
    t = await startTestNode('pglite', {
      outbox: { pollMs: 50, backoffMs: 20, maxBackoffMs: 100, timeoutMs: 5000, leaseMarginMs: 500 },
      strikethroughJobs: { pollMs: 50 },
    });
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
    await rx?.stop();
  });

  /** Waits for `count` StrikethroughPrice notifications at the prefix, each conforming to the contract. */
  const strikethrough = async (prefix: string, count: number): Promise<Notification[]> => {
    const got = await waitForNotifications(rx, prefix, count, 'StrikethroughPrice', 60_000);
    for (const n of got) expect(contractErrors(n.type, n.body), n.raw.slice(0, 500)).toEqual([]);
    return got;
  };
  const jobs = async (applicationId: number) =>
    t.node.db.query<{ event: string; state: string; total_items: number | null; total_batches: number | null; done_batches: number }>(
      `SELECT event, state, total_items, total_batches, done_batches FROM strikethrough_jobs WHERE application_id = $1 ORDER BY id`,
      [applicationId],
    );
  /** A job's batches in order, checked to be one of each from 1 to totalBatches. */
  const batchesOf = (notes: Notification[]): Body[] => {
    const bodies = notes.map((n) => n.body).sort((a, b) => a.currentBatch - b.currentBatch);
    expect(bodies.map((b) => [b.currentBatch, b.totalBatches])).toEqual(bodies.map((_, i) => [i + 1, bodies.length]));
    return bodies;
  };

  describe('2,500 items', () => {
    let shop: ShopSetup;
    let catalogId: number;
    let saleCampaign: number;
    const at = '/strike-big';

    beforeAll(async () => {
      // setupShop's campaign gives 10% off carts over 100 (a cart-level setDiscount): it never counts.
      shop = await setupShop(t.url, t.admin);
      catalogId = (await createCatalog(t.admin, shop.applicationId)).id;
      saleCampaign = await addCampaign(t.admin, shop.applicationId, [saleRule], { name: 'Sale' });
      // Filled before anyone subscribes: these syncs queue nothing.
      for (let v = 0; v < 3; v++) {
        const from = v * 1000;
        const actions = Array.from({ length: Math.min(1000, 2500 - from) }, (_, k) => {
          const i = from + k;
          return { type: 'ADD', payload: { sku: sku(i), price: priceOf(i), attributes: { n: i, sale: onSale(i) }, product: { name: `P${i}` } } };
        });
        unwrap(await sync(shop.integration, catalogId, v + 1, actions));
      }
      expect(await jobs(shop.applicationId)).toEqual([]);
      await subscribe(t.admin, rx, shop.applicationId, at, ['StrikethroughPrice']);
    }, 120_000);

    it('sends a sync of 2,500 items as 3 batches of 1000, 1000 and 500 with each item priced by its item discounts', async () => {
      // One request that touches every item: a PATCH_MANY whose filter matches all 2,500.
      unwrap(await sync(shop.integration, catalogId, 4, [{ type: 'PATCH_MANY', payload: { filters: [{ attr: 'n', op: 'GE', value: 0 }], attributes: { wave: 1 } } }]));
      const bodies = batchesOf(await strikethrough(at, 3));
      expect(bodies.map((b) => b.items.length)).toEqual([1000, 1000, 500]);
      for (const b of bodies) {
        expect(b).toMatchObject({ NotificationType: 'StrikethroughPrice', applicationId: shop.applicationId, totalBatches: 3, event: { type: 'catalog_sync', version: 4 } });
        expect(Object.keys(b.event).sort()).toEqual(['type', 'version']);
      }
      const items = bodies.flatMap((b) => b.items as Body[]);
      expect(items.map((x) => x.sku)).toEqual(Array.from({ length: 2500 }, (_, i) => sku(i)));
      for (const [i, item] of items.entries()) {
        const price = priceOf(i);
        const discount = onSale(i) ? Math.round(price * 20) / 100 : 0;
        expect(item).toEqual({
          sku: sku(i),
          catalogId,
          price,
          strikethroughPrice: Math.round((price - discount) * 100) / 100,
          effects: onSale(i)
            ? [{ campaignId: saleCampaign, rulesetId: expect.any(Number), ruleIndex: 0, ruleName: 'rule', effectType: 'setDiscountPerItem', props: { name: 'sale20', value: discount, position: 0 } }]
            : [],
          evaluatedAt: expect.any(String),
        });
      }
      // The cart-level 10% over 100 did not count: an item of 150 not on sale keeps its price.
      expect(items[141]).toMatchObject({ price: 151, strikethroughPrice: 151, effects: [] });
      expect(await jobs(shop.applicationId)).toEqual([{ event: 'catalog_sync', state: 'done', total_items: 2500, total_batches: 3, done_batches: 3 }]);
    }, 120_000);

    it('sends every item of the catalogs again after a campaign change, as 3 batches naming the campaign', async () => {
      const before = notificationsAt(rx, at, 'StrikethroughPrice').length;
      unwrap(
        await t.admin.PUT('/v1/applications/{applicationId}/campaigns/{campaignId}', {
          params: { path: { applicationId: shop.applicationId, campaignId: saleCampaign } },
          body: { name: 'Sale', state: 'disabled' } as never,
        }),
      );
      const bodies = batchesOf((await strikethrough(at, before + 3)).slice(before));
      expect(bodies.map((b) => b.items.length)).toEqual([1000, 1000, 500]);
      for (const b of bodies) expect(b.event).toEqual({ type: 'campaign_change', campaignId: saleCampaign });
      const items = bodies.flatMap((b) => b.items as Body[]);
      expect(items.map((x) => x.sku)).toEqual(Array.from({ length: 2500 }, (_, i) => sku(i)));
      // Without the sale nothing lowers any price.
      for (const [i, item] of items.entries()) expect(item).toMatchObject({ price: priceOf(i), strikethroughPrice: priceOf(i), effects: [] });
      await sleep(300);
      expect(notificationsAt(rx, at, 'StrikethroughPrice')).toHaveLength(before + 3);
    }, 120_000);
  });

  it('queues nothing and sends nothing for an Application without a StrikethroughPrice subscriber', async () => {
    const shop = await setupShop(t.url, t.admin);
    const at = '/strike-none';
    // A subscriber of another type only.
    await subscribe(t.admin, rx, shop.applicationId, at, ['CouponCreated']);
    const catalogId = (await createCatalog(t.admin, shop.applicationId)).id;
    unwrap(await sync(shop.integration, catalogId, 1, [{ type: 'ADD', payload: { sku: 'a', price: 10, attributes: { sale: true } } }]));
    const campaignId = await addCampaign(t.admin, shop.applicationId, [saleRule]);
    unwrap(
      await t.admin.PUT('/v1/applications/{applicationId}/campaigns/{campaignId}', {
        params: { path: { applicationId: shop.applicationId, campaignId } },
        body: { name: 'x', state: 'disabled' } as never,
      }),
    );
    await sleep(500);
    expect(await jobs(shop.applicationId)).toEqual([]);
    expect(rx.to(at)).toEqual([]);
    const [records] = await t.node.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM price_records WHERE application_id = $1`, [shop.applicationId]);
    expect(records!.n).toBe(0);
  });

  it('queues nothing for a sync that is refused (its transaction rolls back) or that only removes items', async () => {
    const shop = await setupShop(t.url, t.admin);
    const at = '/strike-refused';
    await subscribe(t.admin, rx, shop.applicationId, at, ['StrikethroughPrice']);
    const catalogId = (await createCatalog(t.admin, shop.applicationId)).id;
    unwrap(await sync(shop.integration, catalogId, 1, [{ type: 'ADD', payload: { sku: 'a', price: 10 } }]));
    await strikethrough(at, 1);
    // Version not above the catalog's: 409, nothing written.
    expect((await sync(shop.integration, catalogId, 1, [{ type: 'ADD', payload: { sku: 'b', price: 10 } }])).response.status).toBe(409);
    // An ADD of a SKU already there without replaceIfExists: 409 after the catalog row was locked.
    expect((await sync(shop.integration, catalogId, 2, [{ type: 'ADD', payload: { sku: 'a', price: 11 } }])).response.status).toBe(409);
    unwrap(await sync(shop.integration, catalogId, 3, [{ type: 'REMOVE', payload: { sku: 'a' } }]));
    await sleep(500);
    expect((await jobs(shop.applicationId)).map((j) => j.event)).toEqual(['catalog_sync']);
    expect(notificationsAt(rx, at, 'StrikethroughPrice')).toHaveLength(1);
  });

  describe('price records and best prior price', () => {
    let shop: ShopSetup;
    let audienceId: number;
    let saleCampaign: number;
    let memberCampaign: number;
    let catalogId: number;
    const at = '/strike-records';

    const setState = async (campaignId: number, state: 'enabled' | 'disabled') => {
      const before = notificationsAt(rx, at, 'StrikethroughPrice').length;
      unwrap(
        await t.admin.PUT('/v1/applications/{applicationId}/campaigns/{campaignId}', {
          params: { path: { applicationId: shop.applicationId, campaignId } },
          body: { name: `c${campaignId}`, state } as never,
        }),
      );
      await strikethrough(at, before + 1);
    };
    const records = async (target: 'everyone' | 'audience') =>
      (
        await t.node.db.query<{ id: string; sku: string; price: string }>(
          `SELECT id::text, sku, price::text FROM price_records WHERE account_id = (SELECT account_id FROM applications WHERE id = $1)
              AND sku = 'tee' AND target ->> 'type' = $2 ORDER BY observed_at, id`,
          [shop.applicationId, target],
        )
      ).map((r) => ({ id: Number(r.id), price: Number(r.price) }));

    beforeAll(async () => {
      shop = await setupShop(t.url, t.admin);
      audienceId = unwrap(await shop.integration.POST('/v2/audiences', { body: { name: 'Members' } as never })).id;
      saleCampaign = await addCampaign(t.admin, shop.applicationId, [saleRule], { name: 'Sale' });
      memberCampaign = await addCampaign(t.admin, shop.applicationId, [memberRule(audienceId)], { name: 'Members' });
      await subscribe(t.admin, rx, shop.applicationId, at, ['StrikethroughPrice']);
      catalogId = (await createCatalog(t.admin, shop.applicationId)).id;
      unwrap(
        await sync(shop.integration, catalogId, 1, [
          { type: 'ADD', payload: { sku: 'tee', price: 100, attributes: { sale: true } } },
          { type: 'ADD', payload: { sku: 'cap', price: 20, attributes: { sale: false } } },
        ]),
      );
      // Prices for members of the audience: tee 100 − 20 − 5 = 75 (t1); without the sale 95 (t2);
      // with it again 75 (t3); without the member discount 80 (t4, a rise).
      await strikethrough(at, 1);
      await setState(saleCampaign, 'disabled');
      await setState(saleCampaign, 'enabled');
      await setState(memberCampaign, 'disabled');
    }, 120_000);

    it('records the evaluated prices for everyone and for each audience the campaigns test, with the campaigns that lowered them', async () => {
      const audience = await records('audience');
      expect(audience.map((r) => r.price)).toEqual([75, 95, 75, 80]);
      // Everyone: the catalog's 100, then 80 (t1), 100 (t2), 80 (t3); t4 left it at 80, not recorded again.
      expect((await records('everyone')).map((r) => r.price)).toEqual([100, 80, 100, 80]);
      const history = unwrap(
        await t.admin.POST('/v1/applications/{applicationId}/price_history', {
          params: { path: { applicationId: shop.applicationId } },
          body: { sku: 'tee', startDate: new Date(Date.now() - 3_600_000).toISOString(), endDate: new Date(Date.now() + 60_000).toISOString() },
        }),
      ).history as Body[];
      expect(history).toHaveLength(8);
      const t1Members = history.find((h) => h.id === audience[0]!.id)!;
      expect(t1Members).toEqual({
        id: audience[0]!.id,
        sku: 'tee',
        observedAt: expect.any(String),
        contextId: `strikethrough:catalog:${catalogId}:v1`,
        price: 75,
        metadata: {
          influencingCampaignDetails: [
            { campaignId: saleCampaign, discountValue: 20 },
            { campaignId: memberCampaign, discountValue: 5 },
          ],
          adjustmentDetails: { referenceId: `catalog:${catalogId}`, selectedPriceType: 'catalog', value: 100 },
        },
        target: { type: 'audience', audienceID: audienceId },
      });
      expect(history.find((h) => h.id === audience[1]!.id)).toMatchObject({
        contextId: `strikethrough:campaign:${saleCampaign}`,
        metadata: { influencingCampaignDetails: [{ campaignId: memberCampaign, discountValue: 5 }] },
      });
      // The catalog's own record keeps empty metadata and target everyone.
      expect(history[0]).toMatchObject({ price: 100, contextId: `catalog:${catalogId}:v1`, metadata: {}, target: { type: 'everyone' } });
      // cap is on no sale: for everyone it stays at its catalog price (nothing recorded beside it);
      // members pay 15, and 20 again once their campaign stops (t4).
      const cap = await t.node.db.query<{ price: string; target: Body }>(`SELECT price::text, target FROM price_records WHERE catalog_id = $1 AND sku = 'cap' ORDER BY id`, [catalogId]);
      expect(cap.map((r) => [Number(r.price), r.target.type])).toEqual([
        [20, 'everyone'],
        [15, 'audience'],
        [20, 'audience'],
      ]);
    });

    it('answers best prior price for an audience target from the audience records, with each timeframeEndDateType', async () => {
      const audience = await records('audience');
      const ask = async (timeframeEndDateType: string, target: Record<string, unknown>) =>
        unwrap(
          await best(shop.integration, {
            skus: ['tee', 'cap'],
            timeframeEndDate: new Date(Date.now() + 60_000).toISOString(),
            timeframe: '30',
            strictEndDate: true,
            timeframeEndDateType,
            target,
          }),
        ) as Body[];
      const members = { targetType: 'audience', audienceID: audienceId };
      // strict: the lowest in the window, the latest of equals (t3).
      const strict = await ask('strict', members);
      expect(strict.map((r) => [r.sku, r.price, r.id])).toEqual([
        ['tee', 75, audience[2]!.id],
        ['cap', 15, expect.any(Number)],
      ]);
      expect(strict[0]).toMatchObject({ target: { type: 'audience', audienceID: audienceId }, metadata: { influencingCampaignDetails: [{ campaignId: saleCampaign }, { campaignId: memberCampaign }] } });
      // price: the window ends at the last change (t4, 75 → 80): the lowest before it is t3's.
      expect((await ask('price', members)).find((r) => r.sku === 'tee')!.id).toBe(audience[2]!.id);
      // sale: the window ends at the last reduction (t3, 95 → 75): the lowest before it is t1's.
      expect((await ask('sale', members)).find((r) => r.sku === 'tee')!.id).toBe(audience[0]!.id);
      // Everyone's prices are another list: 80 for the tee.
      expect((await ask('strict', { targetType: 'everyone' })).map((r) => [r.sku, r.price, r.target.type])).toEqual([
        ['tee', 80, 'everyone'],
        ['cap', 20, 'everyone'],
      ]);
      // An audience no campaign tests has no records.
      const other = unwrap(await shop.integration.POST('/v2/audiences', { body: { name: 'Others' } as never })).id;
      expect(await ask('strict', { targetType: 'audience', audienceID: other })).toEqual([]);
      // Another Application subscribed to the same catalog does not see this one's evaluations.
      const sibling = await setupShop(t.url, t.admin);
      unwrap(await t.admin.PUT('/v1/catalogs/{catalogId}', { params: { path: { catalogId } }, body: { name: 'shared', subscribedApplicationsIds: [shop.applicationId, sibling.applicationId] } as never }));
      const seen = unwrap(await best(sibling.integration, { skus: ['tee'], timeframeEndDate: new Date(Date.now() + 60_000).toISOString(), timeframe: '30', strictEndDate: true })) as Body[];
      expect(seen.map((r) => [r.price, r.contextId])).toEqual([[100, `catalog:${catalogId}:v1`]]);
      expect(unwrap(await best(sibling.integration, { skus: ['tee'], timeframeEndDate: new Date(Date.now() + 60_000).toISOString(), timeframe: '30', strictEndDate: true, target: members }))).toEqual([]);
    });
  });
});
