// Catalogs (issue 6, ext): account-level product catalogs that some of the account's Applications
// subscribe to. Creating, changing and deleting a catalog needs the admin role (a catalog is shared
// by Applications); a non-admin sees the catalogs subscribed by an Application of its policy, with
// only those Applications named. Items are synced through the Integration API
// (services/integration/catalogs.ts). Price history of a SKU is read here too.
import { AppError, badRequest, notFound } from '../shared/index.js';
import type { Queryable } from '../store/index.js';
import { compact, isAdmin, iso, listPage, requireAdmin, requireApplication, type ListQuery, type ManagementContext, type Principal } from './context.js';

export interface CatalogBody {
  name: string;
  description?: string;
  subscribedApplicationsIds?: number[];
}

const visible = (principal: Principal): number[] | null =>
  isAdmin(principal) ? null : Object.keys(principal.policy.applications ?? {}).map(Number);

const select = `c.*,
  (SELECT COALESCE(jsonb_agg(ca.application_id ORDER BY ca.application_id), '[]'::jsonb)
     FROM catalog_applications ca WHERE ca.catalog_id = c.id AND ($2::int[] IS NULL OR ca.application_id = ANY($2::int[]))) AS application_ids`;

export function catalogView(r: Record<string, unknown>): Record<string, unknown> {
  return compact({
    id: r.id as number,
    created: iso(r.created),
    modified: iso(r.modified),
    accountId: r.account_id as number,
    name: r.name as string,
    description: (r.description as string) ?? '',
    subscribedApplicationsIds: (r.application_ids as number[] | null) ?? [],
    version: Number(r.version),
    createdBy: (r.created_by as number | null) ?? undefined,
  });
}

async function requireCatalog(db: Queryable, principal: Principal, catalogId: number, lock = false): Promise<Record<string, unknown>> {
  const [row] = await db.query(
    `SELECT ${select} FROM catalogs c
      WHERE c.id = $1 AND c.account_id = $3
        AND ($2::int[] IS NULL OR EXISTS (SELECT 1 FROM catalog_applications v WHERE v.catalog_id = c.id AND v.application_id = ANY($2::int[])))
      ${lock ? 'FOR UPDATE OF c' : ''}`,
    [catalogId, visible(principal), principal.accountId],
  );
  if (!row) throw notFound('Catalog', '/catalogId');
  return row;
}

function checkBody(body: CatalogBody): void {
  if (typeof body.name !== 'string' || body.name.trim() === '') throw badRequest('`name` must not be empty', '/name');
  const ids = body.subscribedApplicationsIds ?? [];
  const seen = new Set<number>();
  ids.forEach((id, i) => {
    if (seen.has(id)) throw badRequest(`Application ${id} is named twice`, `/subscribedApplicationsIds/${i}`);
    seen.add(id);
  });
}

/** Every subscribed Application must be the account's (404 on its pointer otherwise). */
async function requireApplications(db: Queryable, principal: Principal, ids: readonly number[]): Promise<void> {
  for (const [i, id] of ids.entries()) {
    try {
      await requireApplication(db, principal, id, 'read');
    } catch (e) {
      if (e instanceof AppError && e.kind === 'not_found') {
        throw new AppError('not_found', `Application ${id} not found`, [
          { title: 'Not Found', details: `Application ${id} not found`, source: { pointer: `/subscribedApplicationsIds/${i}` } },
        ]);
      }
      throw e;
    }
  }
}

/** Replaces the subscribed Applications; returns those that were subscribed before or are now. */
async function setApplications(db: Queryable, catalogId: number, ids: readonly number[]): Promise<number[]> {
  const before = await db.query<{ application_id: number }>(`DELETE FROM catalog_applications WHERE catalog_id = $1 RETURNING application_id`, [catalogId]);
  if (ids.length > 0) {
    await db.query(`INSERT INTO catalog_applications (catalog_id, application_id) SELECT $1, unnest($2::int[])`, [catalogId, [...ids]]);
  }
  return [...new Set([...before.map((r) => r.application_id), ...ids])];
}

/**
 * The Applications whose subscriptions changed drop their cached snapshots on every node: a
 * snapshot knows whether its Application has catalogs at all (sessions skip the catalog lookup
 * when it has none).
 */
function subscriptionsChanged(ctx: ManagementContext, applicationIds: readonly number[]): void {
  for (const applicationId of applicationIds) ctx.events.publish({ kind: 'application', applicationId });
}

/** POST /v1/catalogs */
export async function createCatalog(ctx: ManagementContext, principal: Principal, body: CatalogBody): Promise<Record<string, unknown>> {
  requireAdmin(principal);
  checkBody(body);
  const now = ctx.clock.now().toISOString();
  return ctx.db.transaction(async (tx) => {
    await requireApplications(tx, principal, body.subscribedApplicationsIds ?? []);
    const [c] = await tx.query<{ id: number }>(
      `INSERT INTO catalogs (account_id, name, description, created_by, created, modified) VALUES ($1, $2, $3, $4, $5, $5) RETURNING id`,
      [principal.accountId, body.name, body.description ?? '', principal.userId, now],
    );
    const touched = await setApplications(tx, c!.id, body.subscribedApplicationsIds ?? []);
    return { view: catalogView(await requireCatalog(tx, principal, c!.id)), touched };
  }).then(({ view, touched }) => {
    subscriptionsChanged(ctx, touched);
    return view;
  });
}

/** GET /v1/catalogs */
export async function listCatalogs(ctx: ManagementContext, principal: Principal, query: ListQuery): Promise<unknown> {
  return listPage(
    ctx.db,
    {
      from: `FROM catalogs c WHERE c.account_id = $3
        AND ($2::int[] IS NULL OR EXISTS (SELECT 1 FROM catalog_applications v WHERE v.catalog_id = c.id AND v.application_id = ANY($2::int[])))
        AND $1::int IS NULL`,
      params: [null, visible(principal), principal.accountId],
      query,
      sortable: { id: 'id', name: 'name', created: 'created', modified: 'modified' },
      withTotal: true,
      select,
    },
    catalogView,
  );
}

/** GET /v1/catalogs/{catalogId} */
export async function getCatalog(ctx: ManagementContext, principal: Principal, catalogId: number): Promise<Record<string, unknown>> {
  return catalogView(await requireCatalog(ctx.db, principal, catalogId));
}

/** PUT /v1/catalogs/{catalogId}: replaces name, description and the subscribed Applications. */
export async function updateCatalog(ctx: ManagementContext, principal: Principal, catalogId: number, body: CatalogBody): Promise<Record<string, unknown>> {
  await requireCatalog(ctx.db, principal, catalogId);
  requireAdmin(principal);
  checkBody(body);
  const now = ctx.clock.now().toISOString();
  return ctx.db.transaction(async (tx) => {
    await requireCatalog(tx, principal, catalogId, true);
    await requireApplications(tx, principal, body.subscribedApplicationsIds ?? []);
    await tx.query(`UPDATE catalogs SET name = $2, description = $3, modified = $4 WHERE id = $1`, [catalogId, body.name, body.description ?? '', now]);
    const touched = await setApplications(tx, catalogId, body.subscribedApplicationsIds ?? []);
    return { view: catalogView(await requireCatalog(tx, principal, catalogId)), touched };
  }).then(({ view, touched }) => {
    subscriptionsChanged(ctx, touched);
    return view;
  });
}

/** DELETE /v1/catalogs/{catalogId} (its items go with it; price records stay). */
export async function deleteCatalog(ctx: ManagementContext, principal: Principal, catalogId: number): Promise<void> {
  await requireCatalog(ctx.db, principal, catalogId);
  requireAdmin(principal);
  const subscribed = await ctx.db.query<{ application_id: number }>(`SELECT application_id FROM catalog_applications WHERE catalog_id = $1`, [catalogId]);
  await ctx.db.query(`DELETE FROM catalogs WHERE id = $1 AND account_id = $2`, [catalogId, principal.accountId]);
  subscriptionsChanged(
    ctx,
    subscribed.map((r) => r.application_id),
  );
}

export interface PriceHistoryBody {
  sku: string;
  startDate: string;
  endDate: string;
}

export function priceRecordView(r: Record<string, unknown>): Record<string, unknown> {
  return {
    id: Number(r.id),
    sku: r.sku as string,
    observedAt: iso(r.observed_at),
    contextId: r.context_id as string,
    price: Number(r.price),
    metadata: r.metadata ?? {},
    target: r.target ?? { type: 'everyone' },
  };
}

/**
 * POST /v1/applications/{applicationId}/price_history: the price records of a SKU observed in
 * [startDate, endDate], oldest first: those of the catalogs the Application subscribes to, and the
 * Application's own (its sessions' cart prices and its strikethrough evaluations, for every target).
 */
export async function priceHistory(ctx: ManagementContext, principal: Principal, applicationId: number, body: PriceHistoryBody): Promise<Record<string, unknown>> {
  await requireApplication(ctx.db, principal, applicationId, 'read');
  const start = new Date(body.startDate);
  const end = new Date(body.endDate);
  if (Number.isNaN(start.getTime())) throw badRequest('`startDate` must be a date-time', '/startDate');
  if (Number.isNaN(end.getTime())) throw badRequest('`endDate` must be a date-time', '/endDate');
  if (end < start) throw badRequest('`endDate` must not be before `startDate`', '/endDate');
  const rows = await ctx.db.query(
    `SELECT * FROM price_records p
      WHERE p.account_id = $1 AND p.sku = $2 AND p.observed_at >= $3 AND p.observed_at <= $4
        AND (p.application_id = $5 OR (p.application_id IS NULL AND EXISTS (SELECT 1 FROM catalog_applications ca WHERE ca.catalog_id = p.catalog_id AND ca.application_id = $5)))
      ORDER BY p.observed_at, p.id`,
    [principal.accountId, body.sku, start.toISOString(), end.toISOString(), applicationId],
  );
  return { sku: body.sku, history: rows.map(priceRecordView) };
}
