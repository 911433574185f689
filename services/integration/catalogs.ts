// Catalogs (issue 6): the Integration API side. A sync (`PUT /v1/catalogs/{catalogId}/sync`)
// applies one type of action to the items of a catalog the key's Application subscribes to, in one
// transaction holding the catalog's row lock; every price it sets becomes a price record. Best
// prior price reads the price records of the SKUs.
//
// Version check: a catalog starts at version 0; a sync must carry a `version` greater than the
// catalog's, which becomes the catalog's version. A sync with a version not greater (a replay or
// one that arrives after a later one) changes nothing and is a 409 on /version.
//
// A sync's actions are applied set-based: one statement for all of them (a request has one action
// type), with the outcome of applying them one after another in their order. That order matters
// only to PATCH_MANY, whose filters may read what an earlier action of the request wrote: its
// actions are cut into runs within which no filter reads a key an earlier action of the run writes,
// and each run is applied to what the run before it left, in one statement of chained CTEs.
import type { CatalogSyncCall, BestPriorPriceCall, JsonObject } from '../actors/port.js';
import { AppError, badRequest, notFound, type Clock } from '../shared/index.js';
import { queueStrikethroughJobs, type Db, type Queryable } from '../store/index.js';
import { withTotals, type SessionRecord } from './session-model.js';

export type CatalogActionType = 'ADD' | 'PATCH' | 'PATCH_MANY' | 'REMOVE' | 'REMOVE_MANY';

interface Filter {
  attr: string;
  op: 'EQ' | 'LT' | 'LE' | 'GT' | 'GE' | 'IN';
  value: unknown;
}

interface ActionPayload {
  sku?: string;
  price?: number;
  attributes?: Record<string, unknown>;
  product?: { name?: string };
  replaceIfExists?: boolean;
  createIfNotExists?: boolean;
  filters?: Filter[];
}

const conflict = (message: string, pointer: string): AppError =>
  new AppError('conflict', message, [{ title: 'Conflict', details: message, source: { pointer } }]);

const notFoundAt = (message: string, pointer: string): AppError =>
  new AppError('not_found', message, [{ title: 'Not Found', details: message, source: { pointer } }]);

export function catalogSyncView(r: Record<string, unknown>, applicationIds: number[]): JsonObject {
  return {
    id: r.id as number,
    created: (r.created as Date).toISOString?.() ?? String(r.created),
    accountId: r.account_id as number,
    modified: (r.modified as Date).toISOString?.() ?? String(r.modified),
    name: r.name as string,
    description: (r.description as string) ?? '',
    subscribedApplicationsIds: applicationIds,
    version: Number(r.version),
    createdBy: (r.created_by as number | null) ?? undefined,
  };
}

const ORDERING: Record<string, string> = { LT: '<', LE: '<=', GT: '>', GE: '>=' };

/** Placeholders already given to equal values in one parameter list (a request's filters repeat their attributes). */
const shared = new WeakMap<unknown[], Map<string, string>>();
function placeholder(params: unknown[], value: unknown, type: string): string {
  let seen = shared.get(params);
  if (!seen) shared.set(params, (seen = new Map()));
  const key = `${type}|${JSON.stringify(value)}`;
  let p = seen.get(key);
  if (!p) {
    params.push(value);
    p = `$${params.length}::${type}`;
    seen.set(key, p);
  }
  return p;
}

/**
 * The SQL condition (on the jsonb `column`, by default `attributes`) of the filters, all of which
 * must hold, adding its parameters to `params` (equal values share one). The ordering operators
 * take numbers and match numeric attributes only; `IN` takes a comma-separated list and matches an
 * attribute whose text is one of its entries; `EQ` matches an attribute equal to the value (as JSON).
 */
export function filtersSql(filters: readonly Filter[], params: unknown[], pointer: string, column = 'attributes'): string {
  if (filters.length === 0) throw badRequest('`filters` must have at least one filter', pointer);
  return filters
    .map((f, j) => {
      const at = `${pointer}/${j}`;
      if (typeof f.attr !== 'string' || f.attr === '') throw badRequest('`attr` must name an attribute', `${at}/attr`);
      const attr = placeholder(params, f.attr, 'text');
      switch (f.op) {
        case 'EQ':
          if (f.value === undefined) throw badRequest('`value` is required', `${at}/value`);
          return `(${column} -> ${attr}) = ${placeholder(params, JSON.stringify(f.value), 'jsonb')}`;
        case 'IN': {
          if (typeof f.value !== 'string') throw badRequest('`IN` takes a comma-separated list as a string', `${at}/value`);
          return `(${column} ->> ${attr}) = ANY(${placeholder(params, f.value.split(',').map((s) => s.trim()), 'text[]')})`;
        }
        case 'LT':
        case 'LE':
        case 'GT':
        case 'GE': {
          if (typeof f.value !== 'number' || !Number.isFinite(f.value)) throw badRequest(`\`${f.op}\` compares numbers only: \`value\` must be a number`, `${at}/value`);
          return `(jsonb_typeof(${column} -> ${attr}) = 'number' AND (${column} ->> ${attr})::numeric ${ORDERING[f.op]} ${placeholder(params, f.value, 'numeric')})`;
        }
        default:
          throw badRequest('`op` must be one of EQ, LT, LE, GT, GE, IN', `${at}/op`);
      }
    })
    .map((c) => `(${c})`)
    .join(' AND ');
}

/**
 * Most parameters one statement of filters takes: PostgreSQL allows 65,535. A request whose
 * filters need more (tens of thousands of distinct values) is applied in as many statements, in
 * order.
 */
const MAX_FILTER_PARAMS = 30_000;

type FilterAction = { index: number; payload: ActionPayload };

/** The actions in consecutive groups, each of whose filters need at most MAX_FILTER_PARAMS parameters. */
function filterGroups(actions: readonly FilterAction[]): FilterAction[][] {
  const groups: FilterAction[][] = [];
  let group: FilterAction[] = [];
  let size = 0;
  for (const a of actions) {
    const n = 2 * (a.payload.filters?.length ?? 0) + 1;
    if (group.length > 0 && size + n > MAX_FILTER_PARAMS) {
      groups.push(group);
      group = [];
      size = 0;
    }
    group.push(a);
    size += n;
  }
  if (group.length > 0) groups.push(group);
  return groups;
}

/** REMOVE_MANY: deleting what any filter matches is deleting what each matches in turn. */
function removeManySql(catalogId: number, actions: readonly FilterAction[]): [string, unknown[]] {
  const params: unknown[] = [catalogId];
  const any = actions.map((a) => `(${filtersSql(a.payload.filters ?? [], params, `/actions/${a.index}/payload/filters`)})`).join(' OR ');
  return [`DELETE FROM catalog_items WHERE catalog_id = $1 AND (${any})`, params];
}

/**
 * PATCH_MANY: each action merges its attributes into the items its filters match, in order. An
 * item changes only if it matches some filter as it was before the request (the first action to
 * change it must match it so), so those items are read once; then each run of actions (see the
 * top of the file) is a CTE over the previous one, merging into each item the attributes of every
 * action of the run whose filters it matches, in action order. The update writes the items some
 * action matched.
 */
function patchManySql(catalogId: number, actions: readonly FilterAction[], now: string, version: number): [string, unknown[]] {
  const params: unknown[] = [catalogId, now, version];
  const pointer = (a: FilterAction) => `/actions/${a.index}/payload/filters`;
  const runs: FilterAction[][] = [];
  let written = new Set<string>();
  for (const a of actions) {
    const reads = (a.payload.filters ?? []).some((f) => written.has(f.attr));
    if (runs.length === 0 || reads) {
      runs.push([]);
      written = new Set();
    }
    runs[runs.length - 1]!.push(a);
    for (const key of Object.keys(a.payload.attributes ?? {})) written.add(key);
  }
  const anyBefore = actions.map((a) => `(${filtersSql(a.payload.filters ?? [], params, pointer(a))})`).join(' OR ');
  const steps = runs.map((run, r) => {
    const from = r === 0 ? `(SELECT sku, attributes AS a, false AS hit FROM catalog_items WHERE catalog_id = $1 AND (${anyBefore})) s` : `s${r - 1} s`;
    // Whether each action of the run matches, computed once per item (OFFSET 0 keeps the planner
    // from copying the conditions into every place they are used).
    const matches = run.map((a, k) => `(${filtersSql(a.payload.filters ?? [], params, pointer(a), 's.a')}) AS m${k}`);
    const merged = run.map((a, k) => `CASE WHEN m${k} THEN ${placeholder(params, JSON.stringify(a.payload.attributes ?? {}), 'jsonb')} ELSE '{}'::jsonb END`);
    const any = run.map((_, k) => `m${k}`).join(' OR ');
    // Most items match no action of a run: they pass through without building a new jsonb.
    return `s${r} AS MATERIALIZED (SELECT sku, CASE WHEN ${any} THEN a || ${merged.join(' || ')} ELSE a END AS a, hit OR ${any} AS hit
       FROM (SELECT s.sku, s.a, s.hit, ${matches.join(', ')} FROM ${from} OFFSET 0) m)`;
  });
  return [
    `WITH ${steps.join(',\n')}
     UPDATE catalog_items i SET attributes = f.a, modified = $2::timestamptz, version = $3::int
       FROM s${runs.length - 1} f
      WHERE i.catalog_id = $1 AND i.sku = f.sku AND f.hit`,
    params,
  ];
}

export class CatalogService {
  /**
   * @param strikethroughQueued called after a sync queued strikethrough jobs (the node wakes its
   * job runner rather than waiting for its next poll)
   */
  constructor(
    private readonly db: Db,
    private readonly clock: Clock = { now: () => new Date() },
    private readonly strikethroughQueued: () => void = () => {},
  ) {}

  /** PUT /v1/catalogs/{catalogId}/sync */
  async sync(call: CatalogSyncCall): Promise<JsonObject> {
    const body = call.request as { actions?: { type: CatalogActionType; payload?: ActionPayload }[]; version?: number };
    const actions = body.actions ?? [];
    const version = body.version!;
    const type = actions[0]?.type;
    const skus = new Map<string, number>();
    actions.forEach((a, i) => {
      if (a.type !== type) throw badRequest(`Only one action type per request: action 0 is ${type}, action ${i} is ${a.type}`, `/actions/${i}/type`);
      const sku = a.payload?.sku;
      const price = a.payload?.price;
      if (price !== undefined && (typeof price !== 'number' || !Number.isFinite(price) || price < 0)) {
        throw badRequest('`price` must be a finite number, at least 0', `/actions/${i}/payload/price`);
      }
      if (type === 'ADD' || type === 'PATCH' || type === 'REMOVE') {
        if (typeof sku !== 'string' || sku === '') throw badRequest('`sku` is required', `/actions/${i}/payload/sku`);
        // The (catalog, sku) key must fit a B-tree index row: 1000 characters of 3-byte text do not.
        if (Buffer.byteLength(sku, 'utf8') > MAX_RECORDED_SKU_BYTES) throw badRequest(`\`sku\` takes at most ${MAX_RECORDED_SKU_BYTES} bytes of UTF-8`, `/actions/${i}/payload/sku`);
        if (skus.has(sku)) throw badRequest(`SKU ${JSON.stringify(sku)} appears twice in this request (actions ${skus.get(sku)} and ${i})`, `/actions/${i}/payload/sku`);
        skus.set(sku, i);
      }
      if (type === 'PATCH_MANY' || type === 'REMOVE_MANY') filtersSql(a.payload?.filters ?? [], [], `/actions/${i}/payload/filters`);
      if (type === 'PATCH_MANY' && (a.payload?.attributes === undefined || a.payload.attributes === null)) {
        throw badRequest('`attributes` is required', `/actions/${i}/payload/attributes`);
      }
    });
    const now = this.clock.now().toISOString();
    const result = await this.db.transaction(async (tx) => {
      const [catalog] = await tx.query(
        `SELECT c.* FROM catalogs c
          WHERE c.id = $1 AND c.account_id = $2
            AND EXISTS (SELECT 1 FROM catalog_applications ca WHERE ca.catalog_id = c.id AND ca.application_id = $3)
          FOR UPDATE`,
        [call.catalogId, call.app.accountId, call.app.applicationId],
      );
      if (!catalog) throw notFound('Catalog', '/catalogId');
      if (version <= Number(catalog.version)) {
        throw conflict(`The catalog is at version ${catalog.version}; a sync must carry a greater version`, '/version');
      }
      const contextId = `catalog:${call.catalogId}:v${version}`;
      const prices: { sku: string; price: number }[] = [];
      const skuList = [...skus.keys()];
      const existing = (type === 'ADD' || type === 'PATCH')
        ? new Set((await tx.query<{ sku: string }>(`SELECT sku FROM catalog_items WHERE catalog_id = $1 AND sku = ANY($2::text[])`, [call.catalogId, skuList])).map((r) => r.sku))
        : new Set<string>();
      const at = (i: number) => `/actions/${i}/payload`;
      const item = (a: { payload?: ActionPayload }) => {
        const p = a.payload ?? {};
        return { sku: p.sku!, price: p.price ?? null, attributes: p.attributes ?? {}, product: p.product ?? null };
      };
      // Every action is checked against the catalog as it was before the request (a SKU appears
      // once in it), so the first refused action, in order, is the one reported.
      switch (type) {
        case 'ADD': {
          const taken = actions.findIndex((a) => existing.has(a.payload!.sku!) && a.payload!.replaceIfExists !== true);
          if (taken >= 0) throw conflict(`SKU ${JSON.stringify(actions[taken]!.payload!.sku)} is already in the catalog; set replaceIfExists to replace it`, `${at(taken)}/sku`);
          await tx.query(
            `INSERT INTO catalog_items (catalog_id, sku, price, attributes, product, created, modified, version)
             SELECT $1::int, x.sku, x.price, x.attributes, x.product, $2::timestamptz, $2::timestamptz, $4 FROM jsonb_to_recordset($3::jsonb) AS x(sku text, price numeric, attributes jsonb, product jsonb)
             ON CONFLICT (catalog_id, sku) DO UPDATE SET price = EXCLUDED.price, attributes = EXCLUDED.attributes, product = EXCLUDED.product, modified = EXCLUDED.modified,
               version = EXCLUDED.version`,
            [call.catalogId, now, JSON.stringify(actions.map(item)), version],
          );
          break;
        }
        case 'PATCH': {
          const missing = actions.findIndex((a) => !existing.has(a.payload!.sku!) && a.payload!.createIfNotExists !== true);
          if (missing >= 0) throw notFoundAt(`SKU ${JSON.stringify(actions[missing]!.payload!.sku)} is not in the catalog; set createIfNotExists to create it`, `${at(missing)}/sku`);
          // A missing item is created as sent; a stored one keeps what the patch leaves out.
          await tx.query(
            `INSERT INTO catalog_items (catalog_id, sku, price, attributes, product, created, modified, version)
             SELECT $1::int, x.sku, x.price, x.attributes, x.product, $2::timestamptz, $2::timestamptz, $4 FROM jsonb_to_recordset($3::jsonb) AS x(sku text, price numeric, attributes jsonb, product jsonb)
             ON CONFLICT (catalog_id, sku) DO UPDATE SET price = COALESCE(EXCLUDED.price, catalog_items.price),
               attributes = catalog_items.attributes || EXCLUDED.attributes, product = COALESCE(EXCLUDED.product, catalog_items.product), modified = EXCLUDED.modified,
               version = EXCLUDED.version`,
            [call.catalogId, now, JSON.stringify(actions.map(item)), version],
          );
          break;
        }
        case 'REMOVE':
          await tx.query(`DELETE FROM catalog_items WHERE catalog_id = $1 AND sku = ANY($2::text[])`, [call.catalogId, skuList]);
          break;
        case 'PATCH_MANY':
        case 'REMOVE_MANY':
          for (const group of filterGroups(actions.map((a, index) => ({ index, payload: a.payload ?? {} })))) {
            const [sql, params] = type === 'PATCH_MANY' ? patchManySql(call.catalogId, group, now, version) : removeManySql(call.catalogId, group);
            await tx.query(sql, params);
          }
          break;
      }
      if (type === 'ADD' || type === 'PATCH') {
        for (const a of actions) if (typeof a.payload?.price === 'number') prices.push({ sku: a.payload.sku!, price: a.payload.price });
      }
      if (prices.length > 0) {
        await tx.query(
          `INSERT INTO price_records (account_id, catalog_id, sku, price, observed_at, context_id)
           SELECT $1, $2, x.sku, x.price, $3, $4 FROM unnest($5::text[], $6::numeric[]) AS x(sku, price)`,
          [call.app.accountId, call.catalogId, now, contextId, prices.map((x) => x.sku), prices.map((x) => x.price)],
        );
      }
      const [row] = await tx.query(`UPDATE catalogs SET version = $2, modified = $3 WHERE id = $1 RETURNING *`, [call.catalogId, version, now]);
      const apps = await tx.query<{ application_id: number }>(`SELECT application_id FROM catalog_applications WHERE catalog_id = $1 ORDER BY application_id`, [call.catalogId]);
      const queued = await queueStrikethroughJobs(tx, { type: 'catalog_sync', catalogId: call.catalogId, version }, now);
      return { view: catalogSyncView(row!, apps.map((r) => r.application_id)), queued };
    });
    if (result.queued > 0) this.strikethroughQueued();
    return result.view;
  }

  /**
   * POST /v1/best_prior_price: for each SKU, the lowest price observed for the target (by the
   * catalogs the Application subscribes to, its own sessions and its strikethrough evaluations;
   * an audience target only by the last) in the `timeframe` days before the window's
   * end; ties go to the latest record. The end is `timeframeEndDate` (`strict`), the last price
   * change of the SKU at or before it (`price`), or the last price reduction at or before it
   * (`sale`); with `price` and `sale` the change itself is outside the window. Without
   * `timeframeEndDateType` the deprecated `strictEndDate` decides: true is `strict`, false `price`.
   * SKUs without a record in their window are left out.
   */
  async bestPriorPrice(call: BestPriorPriceCall): Promise<JsonObject[]> {
    const b = call.request as {
      skus: string[];
      timeframeEndDate: string;
      timeframe: string;
      strictEndDate?: boolean;
      timeframeEndDateType?: 'strict' | 'price' | 'sale';
      target?: { targetType?: string; audienceID?: number };
    };
    const end = new Date(b.timeframeEndDate);
    if (Number.isNaN(end.getTime())) throw badRequest('`timeframeEndDate` must be a date-time', '/timeframeEndDate');
    if (!/^\d{1,5}$/.test(String(b.timeframe).trim()) || Number(b.timeframe) < 1) throw badRequest('`timeframe` must be a whole number of days (at least 1)', '/timeframe');
    const days = Number(b.timeframe);
    const endType = b.timeframeEndDateType ?? (b.strictEndDate === false ? 'price' : 'strict');
    const targetType = b.target?.targetType ?? 'everyone';
    if (targetType === 'audience' && typeof b.target?.audienceID !== 'number') throw badRequest('`audienceID` is required with targetType audience', '/target/audienceID');
    const out: JsonObject[] = [];
    const skus = [...new Set(b.skus)];
    const all = await this.records(this.db, call.app.accountId, call.app.applicationId, skus, end, targetType, b.target?.audienceID);
    const bySku = new Map<string, Record<string, unknown>[]>();
    for (const r of all) {
      const list = bySku.get(r.sku as string) ?? [];
      list.push(r);
      bySku.set(r.sku as string, list);
    }
    for (const sku of skus) {
      const records = bySku.get(sku) ?? [];
      let windowEnd = end.getTime();
      let inclusive = true;
      if (endType !== 'strict') {
        // The change: the latest record whose price differs from (price) or is below (sale) the one before it.
        for (let k = records.length - 1; k >= 1; k--) {
          const prev = Number(records[k - 1]!.price);
          const cur = Number(records[k]!.price);
          if (endType === 'price' ? cur !== prev : cur < prev) {
            windowEnd = new Date(records[k]!.observed_at as string).getTime();
            inclusive = false;
            break;
          }
        }
      }
      const windowStart = windowEnd - days * 86_400_000;
      let best: Record<string, unknown> | undefined;
      for (const r of records) {
        const t = new Date(r.observed_at as string).getTime();
        if (t < windowStart || (inclusive ? t > windowEnd : t >= windowEnd)) continue;
        if (!best || Number(r.price) <= Number(best.price)) best = r;
      }
      if (best) out.push(priceRecordJson(best));
    }
    return out;
  }

  /** The price records of the SKUs up to `end` that the Application sees, oldest first (one query). */
  private records(db: Queryable, accountId: number, applicationId: number, skus: string[], end: Date, targetType: string, audienceId: number | undefined) {
    return db.query(
      `SELECT * FROM price_records p
        WHERE p.account_id = $1 AND p.sku = ANY($2::text[]) AND p.observed_at <= $3
          AND (p.application_id = $4 OR (p.application_id IS NULL AND EXISTS (SELECT 1 FROM catalog_applications ca WHERE ca.catalog_id = p.catalog_id AND ca.application_id = $4)))
          AND p.target ->> 'type' = $5 AND ($6::int IS NULL OR (p.target ->> 'audienceID')::int = $6)
        ORDER BY p.observed_at, p.id`,
      [accountId, skus, end.toISOString(), applicationId, targetType, audienceId ?? null],
    );
  }
}

export function priceRecordJson(r: Record<string, unknown>): JsonObject {
  const at = r.observed_at;
  return {
    id: Number(r.id),
    sku: r.sku as string,
    observedAt: at instanceof Date ? at.toISOString() : new Date(String(at)).toISOString(),
    contextId: r.context_id as string,
    price: Number(r.price),
    metadata: r.metadata ?? {},
    target: r.target ?? { type: 'everyone' },
  };
}

/**
 * Prices and enriches the cart items sent in a session update from the catalogs the session's
 * Application subscribes to (one query for the cart's SKUs). For a SKU found in a catalog: the
 * catalog's price replaces the sent one (the catalog is the price authority; the sent price stays
 * when the catalog item has none), the catalog item's attributes are the defaults under the sent
 * item attributes, and its product is used when the item sends none. A SKU in several subscribed
 * catalogs takes the oldest catalog's item. Totals are recomputed.
 */
export async function priceFromCatalogs(db: Queryable, applicationId: number, session: SessionRecord, cartSent: boolean): Promise<SessionRecord> {
  if (!cartSent || session.cartItems.length === 0) return session;
  const skus = [...new Set(session.cartItems.map((i) => i.sku))];
  const rows = await db.query<{ sku: string; price: string | null; attributes: Record<string, unknown>; product: { name?: string } | null }>(
    `SELECT DISTINCT ON (i.sku) i.sku, i.price::text AS price, i.attributes, i.product
       FROM catalog_items i JOIN catalog_applications ca ON ca.catalog_id = i.catalog_id AND ca.application_id = $1
      WHERE i.sku = ANY($2::text[])
      ORDER BY i.sku, i.catalog_id`,
    [applicationId, skus],
  );
  if (rows.length === 0) return session;
  const bySku = new Map(rows.map((r) => [r.sku, r]));
  const cartItems = session.cartItems.map((item) => {
    const known = bySku.get(item.sku);
    if (!known) return item;
    const next = { ...item };
    if (known.price !== null) next.price = Number(known.price);
    if (known.attributes && Object.keys(known.attributes).length > 0) next.attributes = { ...known.attributes, ...(item.attributes ?? {}) };
    if (item.product === undefined && known.product) next.product = known.product;
    return next;
  });
  return withTotals({ ...session, cartItems });
}

/**
 * Records the prices of a committed session's cart (sent in the update) as price records of the
 * Application, context the session's id. A price equal to the latest record of the SKU in the
 * Application is not recorded again, so an unchanged cart adds nothing. Written after the session
 * commit, outside its transaction: a crash in between loses these records only.
 */
export async function recordCartPrices(db: Queryable, accountId: number, applicationId: number, session: SessionRecord, observedAt: string): Promise<void> {
  const bySku = new Map<string, number>();
  // Prices this node recorded (or found recorded) last: an unchanged cart costs no statement.
  // Another node may record the same price once more, which changes no best prior price.
  let recent = recentPrices.get(db);
  if (!recent) recentPrices.set(db, (recent = new Map()));
  // A SKU longer than a B-tree index row holds (2704 bytes; no catalog item has one) cannot be a
  // price record: recording it would fail this already committed update with a 500.
  for (const item of session.cartItems) {
    if (Buffer.byteLength(item.sku, 'utf8') > MAX_RECORDED_SKU_BYTES) continue;
    if (recent.get(`${applicationId}|${item.sku}`) !== item.price) bySku.set(item.sku, item.price);
  }
  if (bySku.size === 0) return;
  await db.query(
    `INSERT INTO price_records (account_id, application_id, sku, price, observed_at, context_id)
     SELECT $1, $2, x.sku, x.price, $3, $4 FROM unnest($5::text[], $6::numeric[]) AS x(sku, price)
      WHERE NOT EXISTS (
        SELECT 1 FROM (SELECT p.price FROM price_records p
                        WHERE p.account_id = $1 AND p.application_id = $2 AND p.sku = x.sku
                        ORDER BY p.observed_at DESC, p.id DESC LIMIT 1) last
         WHERE last.price = x.price)`,
    [accountId, applicationId, observedAt, `session:${session.integrationId}`, [...bySku.keys()], [...bySku.values()]],
  );
  if (recent.size > RECENT_PRICES_MAX) recent.clear();
  for (const [sku, price] of bySku) recent.set(`${applicationId}|${sku}`, price);
}

/** Per database: `<applicationId>|<sku>` → the latest price recorded for it, as far as this node knows. */
const recentPrices = new WeakMap<Queryable, Map<string, number>>();
const RECENT_PRICES_MAX = 100_000;
/** Longest SKU (UTF-8 bytes) a price record is kept for: well inside the index row limit with the other key columns. */
const MAX_RECORDED_SKU_BYTES = 2000;
