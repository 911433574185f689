// Strikethrough pricing (addendum "Strikethrough notifications"): the nodes' runners work the jobs
// that catalog syncs and campaign changes queued (services/store/strikethrough.ts), in the
// background and never in a request. A job evaluates its items (a sync's items, or every item of
// the Application's catalogs) in batches of at most 1000, each item as a cart of one line
// (quantity 1, its catalog price) against the Application's campaigns as they are at that moment:
// once for an anonymous customer, and once as a member of each audience that a campaign's rules
// test with `inAudience` (a campaign not archived, running or not). Only item discounts count: the strikethrough price is the catalog price
// less the setDiscountPerItem effects on the line (a cart-level setDiscount depends on the whole
// cart a customer will have, and additional costs are not part of an item's price). Each batch is
// one transaction: its price records (target `everyone` and each audience, with the campaigns that
// lowered the price), its StrikethroughPrice notification (the anonymous prices) and the job's
// progress, written only while this node still holds the job.
import type { Effect } from '../engine/index.js';
import { addExact, uuid } from '../shared/index.js';
import { enqueueNotifications, LeasedJobRunner, type JobStep, type LeasedJobRunnerOptions, type Queryable, type Row } from '../store/index.js';
import { engineInput, type Evaluator } from './evaluation.js';
import { inAudienceIdsOf, loadFacts } from './facts.js';
import { profileRoot } from './repository.js';
import { emptySession, sessionRoot, withTotals } from './session-model.js';
import { candidateCampaigns, type SnapshotCache } from './snapshot.js';

/** Addendum: a StrikethroughPrice notification carries at most this many items. */
export const STRIKETHROUGH_BATCH_SIZE = 1000;

export interface StrikethroughJobRunnerOptions extends LeasedJobRunnerOptions {
  snapshots: SnapshotCache;
  evaluator: Evaluator;
  /** Items per batch (one notification, one transaction); at most 1000 (default 1000). */
  batchSize?: number;
  /** Prefix of built-in event names: the evaluation runs as a session update (default `service_`). */
  eventPrefix?: string;
  /** Called after a batch wrote notifications, so that they leave at once. */
  outboundWritten?: () => void;
}

interface CatalogItemRow extends Row {
  catalog_id: number;
  sku: string;
  price: string;
  attributes: Record<string, unknown>;
  product: { name?: string } | null;
}

/** One item's evaluation for one customer. */
interface Priced {
  strikethroughPrice: number;
  effects: Effect[];
  influencingCampaignDetails: Array<{ campaignId: number; discountValue: number }>;
}

export class StrikethroughJobRunner extends LeasedJobRunner {
  private readonly batchSize: number;
  private readonly prefix: string;

  constructor(private readonly options: StrikethroughJobRunnerOptions) {
    super({ ...options, name: 'strikethrough jobs' }, 'strikethrough_jobs', 'The strikethrough prices could not be evaluated');
    this.batchSize = Math.min(STRIKETHROUGH_BATCH_SIZE, Math.max(1, options.batchSize ?? STRIKETHROUGH_BATCH_SIZE));
    this.prefix = options.eventPrefix ?? 'service_';
  }

  /** An Application's jobs run one after another, in the order of their changes: their batches never interleave. */
  protected override claimCondition(): string {
    return `AND NOT EXISTS (SELECT 1 FROM strikethrough_jobs o WHERE o.application_id = j.application_id AND o.id < j.id AND o.state IN ('pending', 'running'))`;
  }

  protected async step(jobId: string): Promise<JobStep> {
    const [job] = await this.db.query(`SELECT * FROM strikethrough_jobs WHERE id = $1 AND claimed_by = $2 AND state = 'running'`, [jobId, this.nodeId]);
    if (!job) return 'lost';
    const applicationId = job.application_id as number;
    const [scope, scopeParams] = itemScope(job);
    let totalItems = job.total_items as number | null;
    let totalBatches = job.total_batches as number | null;
    if (totalBatches === null) {
      const [count] = await this.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM catalog_items i WHERE ${scope}`, scopeParams);
      totalItems = count!.n;
      totalBatches = Math.ceil(totalItems / this.batchSize);
    }
    const done = job.done_batches as number;
    if (totalBatches === 0) {
      return this.db.transaction(async (tx) => {
        if (!(await this.hold(tx, jobId))) return 'lost';
        await this.advance(tx, jobId, true, { total_items: 0, total_batches: 0 });
        return 'done';
      });
    }
    const after = job.cursor_catalog_id === null ? null : [job.cursor_catalog_id, job.cursor_sku];
    const n = scopeParams.length;
    const items = await this.db.query<CatalogItemRow>(
      `SELECT i.catalog_id, i.sku, i.price::text AS price, i.attributes, i.product FROM catalog_items i
        WHERE ${scope} AND ($${n + 1}::int IS NULL OR (i.catalog_id, i.sku) > ($${n + 1}::int, $${n + 2}::text))
        ORDER BY i.catalog_id, i.sku LIMIT $${n + 3}`,
      [...scopeParams, after?.[0] ?? null, after?.[1] ?? null, this.batchSize],
    );
    const evaluatedAt = this.clock.now();
    const priced = await this.evaluate(applicationId, items, evaluatedAt);
    const event =
      job.event === 'catalog_sync'
        ? { type: 'catalog_sync', version: job.version as number }
        : { type: 'campaign_change', campaignId: job.campaign_id as number };
    const contextId = job.event === 'catalog_sync' ? `strikethrough:catalog:${job.catalog_id}:v${job.version}` : `strikethrough:campaign:${job.campaign_id}`;
    let written = 0;
    const outcome = await this.db.transaction(async (tx): Promise<JobStep> => {
      const held = await this.hold(tx, jobId);
      // Another node took the job over (this one's lease ran out) and may have done this batch.
      if (!held || held.done_batches !== done) return 'lost';
      const records: unknown[] = [];
      const notified: unknown[] = [];
      items.forEach((item, k) => {
        const price = Number(item.price);
        const forItem = priced[k]!;
        for (const [target, p] of forItem) {
          records.push({
            catalog_id: item.catalog_id,
            sku: item.sku,
            price: p.strikethroughPrice,
            target: JSON.parse(target) as unknown,
            metadata: {
              influencingCampaignDetails: p.influencingCampaignDetails,
              adjustmentDetails: { referenceId: `catalog:${item.catalog_id}`, selectedPriceType: 'catalog', value: price },
            },
          });
        }
        const anonymous = forItem.get(EVERYONE)!;
        notified.push({
          sku: item.sku,
          catalogId: item.catalog_id,
          price,
          strikethroughPrice: anonymous.strikethroughPrice,
          effects: anonymous.effects,
          evaluatedAt: evaluatedAt.toISOString(),
        });
      });
      await recordPrices(tx, job.account_id as number, applicationId, contextId, evaluatedAt, records);
      written = await enqueueNotifications(
        tx,
        {
          accountId: job.account_id as number,
          applicationId,
          ...(job.event === 'campaign_change' ? { campaignId: job.campaign_id as number } : {}),
          notificationType: 'StrikethroughPrice',
          bodies: [{ NotificationType: 'StrikethroughPrice', applicationId, currentBatch: done + 1, totalBatches, event, items: notified }],
        },
        evaluatedAt,
      );
      const last = items[items.length - 1];
      const finished = done + 1 >= totalBatches!;
      await this.advance(tx, jobId, finished, {
        total_items: totalItems,
        total_batches: totalBatches,
        done_batches: done + 1,
        cursor_catalog_id: last?.catalog_id ?? job.cursor_catalog_id,
        cursor_sku: last?.sku ?? job.cursor_sku,
      });
      return finished ? 'done' : 'more';
    });
    if (written > 0) this.options.outboundWritten?.();
    return outcome;
  }

  /**
   * Each item's prices by target (JSON of the price record's target, `everyone` first), evaluated
   * against the Application's campaigns as stored now (read past this node's cache, which may not
   * have heard of the change yet).
   */
  private async evaluate(applicationId: number, items: readonly CatalogItemRow[], now: Date): Promise<Array<Map<string, Priced>>> {
    const snapshot = await this.options.snapshots.fresh(applicationId);
    const app = snapshot.application;
    const campaigns = candidateCampaigns(snapshot.campaigns, now);
    // Every audience some campaign of the Application tests, running or not: when a campaign for
    // members stops, their price goes back up, and that is a price record of theirs too.
    const audiences = await this.audiences(app.accountId, [...new Set(snapshot.campaigns.flatMap(inAudienceIdsOf))]);
    const targets: Array<[string, number[]]> = [[EVERYONE, []], ...audiences.map((id): [string, number[]] => [JSON.stringify({ type: 'audience', audienceID: id }), [id]])];
    const unchanged = (price: number): Priced => ({ strikethroughPrice: price, effects: [], influencingCampaignDetails: [] });
    if (campaigns.length === 0) return items.map((i) => new Map(targets.map(([t]) => [t, unchanged(Number(i.price))])));
    const customer = { profileId: '', couponCodes: [], referralCode: '', identifiers: [], loyaltyCards: [] };
    const { facts } = await loadFacts(this.db, app, campaigns, customer, now, uuid());
    const out: Array<Map<string, Priced>> = [];
    for (const [k, item] of items.entries()) {
      // Long batches leave room to the requests this node serves.
      if (k % 25 === 24) await new Promise((resolve) => setImmediate(resolve));
      const price = Number(item.price);
      const session = withTotals({
        ...emptySession(applicationId, '', now.toISOString()),
        cartItems: [{ sku: item.sku, quantity: 1, price, position: 0, attributes: item.attributes ?? {}, ...(item.product ? { product: item.product } : {}) }],
      });
      const byTarget = new Map<string, Priced>();
      for (const [target, memberOf] of targets) {
        const result = await this.options.evaluator.evaluate(
          engineInput(app, campaigns, {
            session: sessionRoot(session),
            profile: { ...profileRoot(undefined, ''), Audiences: memberOf },
            event: { type: `${this.prefix}session_updated`, attributes: {} },
            now,
            facts,
          }),
        );
        byTarget.set(target, priceOf(price, result.effects));
      }
      out.push(byTarget);
    }
    return out;
  }

  /** Of these audience ids, those of the account that exist. */
  private async audiences(accountId: number, ids: number[]): Promise<number[]> {
    if (ids.length === 0) return [];
    const rows = await this.db.query<{ id: number }>(`SELECT id FROM audiences WHERE account_id = $1 AND id = ANY($2::int[]) ORDER BY id`, [accountId, ids]);
    return rows.map((r) => Number(r.id));
  }
}

const EVERYONE = JSON.stringify({ type: 'everyone' });

/** The item's price less the item discounts on its line, and which campaigns gave them. */
function priceOf(price: number, effects: readonly Effect[]): Priced {
  const counted = effects.filter((e) => e.effectType === 'setDiscountPerItem' && Number(e.props.position) === 0);
  const byCampaign = new Map<number, number>();
  for (const e of counted) byCampaign.set(e.campaignId, addExact(byCampaign.get(e.campaignId) ?? 0, Number(e.props.value)));
  const discount = addExact(...counted.map((e) => Number(e.props.value)));
  return {
    // The engine caps item discounts at the line's amount: never below zero.
    strikethroughPrice: Math.max(0, addExact(price, -discount)),
    effects: counted.map((e) => ({ ...e })),
    influencingCampaignDetails: [...byCampaign].map(([campaignId, discountValue]) => ({ campaignId, discountValue })),
  };
}

/** The items a job evaluates, as an SQL condition on catalog_items `i` and its parameters. */
function itemScope(job: Row): [string, unknown[]] {
  if (job.event === 'catalog_sync') {
    // The sync's items, while the Application still subscribes to the catalog.
    return [
      `i.catalog_id = $1 AND i.version = $2 AND i.price IS NOT NULL
       AND EXISTS (SELECT 1 FROM catalog_applications ca WHERE ca.catalog_id = i.catalog_id AND ca.application_id = $3)`,
      [job.catalog_id, job.version, job.application_id],
    ];
  }
  return [`i.catalog_id IN (SELECT catalog_id FROM catalog_applications WHERE application_id = $1) AND i.price IS NOT NULL`, [job.application_id]];
}

/**
 * The evaluated prices as price records of the Application (observed at the evaluation). A price
 * equal to the latest record the Application has of the SKU for the same target (its own, or its
 * catalog's) is not recorded again: an item no campaign discounts adds nothing beside its catalog
 * price, and a re-evaluation that changes nothing adds nothing.
 */
async function recordPrices(tx: Queryable, accountId: number, applicationId: number, contextId: string, at: Date, records: readonly unknown[]): Promise<void> {
  if (records.length === 0) return;
  await tx.query(
    `INSERT INTO price_records (account_id, application_id, catalog_id, sku, price, observed_at, context_id, metadata, target)
     SELECT $1, $2, x.catalog_id, x.sku, x.price, $3, $4, x.metadata, x.target
       FROM jsonb_to_recordset($5::jsonb) AS x(catalog_id int, sku text, price numeric, metadata jsonb, target jsonb)
      WHERE NOT EXISTS (
        SELECT 1 FROM (SELECT p.price FROM price_records p
                        WHERE p.account_id = $1 AND p.sku = x.sku AND p.target = x.target AND p.observed_at <= $3
                          AND (p.application_id = $2 OR (p.application_id IS NULL AND p.catalog_id = x.catalog_id))
                        ORDER BY p.observed_at DESC, p.id DESC LIMIT 1) latest
         WHERE latest.price = x.price)`,
    [accountId, applicationId, at.toISOString(), contextId, JSON.stringify(records)],
  );
}
