// Custom attributes (service-spec "Custom attribute (Management)"): names and types of what the
// account's profiles, sessions, cart items and events may carry. An attribute of entity `Event`
// with an `eventType` defines that custom event type; events are checked against them. Attributes
// belong to the account: every user of the account may read them; only admins change them, since
// one change (above all a delete, which destroys the attribute's data) reaches every Application.
import { AppError, badRequest, notFound } from '../shared/index.js';
import type { Queryable } from '../store/index.js';
import { compact, iso, listPage, requireAdmin, visibleApplicationIds, type ListQuery, type ManagementContext, type Principal } from './context.js';

export interface AttributeBody {
  entity: string;
  eventType?: string;
  name: string;
  title?: string;
  type: string;
  description?: string;
  tags?: string[];
  editable?: boolean;
  subscribedApplicationsIds?: number[];
}

export function attributeView(r: Record<string, unknown>): Record<string, unknown> {
  return compact({
    id: r.id as number,
    accountId: r.account_id as number,
    created: iso(r.created),
    modified: iso(r.modified),
    entity: r.entity as string,
    eventType: (r.event_type as string) || undefined,
    name: r.name as string,
    title: r.title as string,
    type: r.type as string,
    description: r.description as string,
    editable: r.editable as boolean,
    locked: r.locked as boolean,
    tags: r.tags as string[],
    subscribedApplicationsIds: (r.subscribed_applications_ids as number[] | null) ?? undefined,
    usedAt: [] as string[],
    lastUsed: iso(r.last_used),
    lastUsedApplicationId: (r.last_used_application_id as number | null) ?? undefined,
  });
}

/** POST /v1/attributes: 409 when the account already has this (entity, eventType, name). */
export async function createAttribute(ctx: ManagementContext, principal: Principal, body: AttributeBody): Promise<Record<string, unknown>> {
  requireAdmin(principal);
  const eventType = body.eventType ?? '';
  if (body.entity === 'Event' && eventType === '') throw badRequest('An attribute of entity Event needs an eventType', '/eventType');
  if (body.entity !== 'Event' && eventType !== '') throw badRequest('Only attributes of entity Event have an eventType', '/eventType');
  if (body.subscribedApplicationsIds) {
    const ids = body.subscribedApplicationsIds;
    const rows = await ctx.db.query<{ id: number }>(`SELECT id FROM applications WHERE account_id = $1 AND id IN (SELECT jsonb_array_elements_text($2::jsonb)::int)`,
      [principal.accountId, JSON.stringify(ids)],
    );
    const known = new Set(rows.map((r) => r.id));
    ids.forEach((id, i) => {
      if (!known.has(id)) throw badRequest(`Application ${id} not found`, `/subscribedApplicationsIds/${i}`);
    });
  }
  const now = ctx.clock.now().toISOString();
  const [row] = await ctx.db.query(
    `INSERT INTO attributes (account_id, entity, event_type, name, title, type, description, tags, editable, subscribed_applications_ids, created, modified)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10::jsonb, $11, $11)
     ON CONFLICT (account_id, entity, event_type, name) DO NOTHING
     RETURNING *`,
    [
      principal.accountId,
      body.entity,
      eventType,
      body.name,
      body.title ?? body.name,
      body.type,
      body.description ?? '',
      JSON.stringify(body.tags ?? []),
      body.editable ?? true,
      body.subscribedApplicationsIds ? JSON.stringify(body.subscribedApplicationsIds) : null,
      now,
    ],
  );
  if (!row) {
    const what = `${body.entity}${eventType ? ` (event type ${eventType})` : ''}`;
    throw new AppError('conflict', `An attribute ${JSON.stringify(body.name)} of ${what} already exists`, [
      { title: 'Conflict', details: `attribute ${body.name} of ${what} already exists`, source: { pointer: '/name' } },
    ]);
  }
  return attributeView(row);
}

export interface AttributeListQuery extends ListQuery {
  entity?: string;
  eventType?: string;
}

/** GET /v1/attributes: the account's attributes, optionally of one entity or event type. */
/** An attribute's view as the caller may see it: only the Applications its policy names. */
function attributeForViewer(principal: Principal, r: Record<string, unknown>): Record<string, unknown> {
  const view = attributeView(r);
  if (view.subscribedApplicationsIds !== undefined) view.subscribedApplicationsIds = visibleApplicationIds(principal, view.subscribedApplicationsIds as number[]);
  if (view.lastUsedApplicationId !== undefined && visibleApplicationIds(principal, [view.lastUsedApplicationId as number]).length === 0) {
    delete view.lastUsedApplicationId;
  }
  return view;
}

export async function listAttributes(ctx: ManagementContext, principal: Principal, query: AttributeListQuery) {
  return listPage(
    ctx.db,
    {
      from: `FROM attributes WHERE account_id = $1 AND ($2::text IS NULL OR entity = $2) AND ($3::text IS NULL OR event_type = $3)`,
      params: [principal.accountId, query.entity ?? null, query.eventType ?? null],
      query,
      sortable: { id: 'id', name: 'name', entity: 'entity', created: 'created' },
      withTotal: true,
    },
    (row) => attributeForViewer(principal, row),
  );
}

async function requireAttribute(db: Queryable, principal: Principal, attributeId: number, lock = false): Promise<Record<string, unknown>> {
  const [row] = await db.query(`SELECT * FROM attributes WHERE id = $1 AND account_id = $2${lock ? ' FOR UPDATE' : ''}`, [attributeId, principal.accountId]);
  if (!row) throw notFound('Attribute', '/attributeId');
  return row;
}

/** GET /v1/attributes/{attributeId}: another account's attribute is not found. */
export async function getAttribute(ctx: ManagementContext, principal: Principal, attributeId: number): Promise<Record<string, unknown>> {
  return attributeForViewer(principal, await requireAttribute(ctx.db, principal, attributeId));
}

/** PUT /v1/attributes/{attributeId}: only the title changes (the contract refuses other fields). */
export async function updateAttribute(ctx: ManagementContext, principal: Principal, attributeId: number, body: { title: string }): Promise<Record<string, unknown>> {
  requireAdmin(principal);
  const [row] = await ctx.db.query(`UPDATE attributes SET title = $3, modified = $4 WHERE id = $1 AND account_id = $2 RETURNING *`, [
    attributeId,
    principal.accountId,
    body.title,
    ctx.clock.now().toISOString(),
  ]);
  if (!row) throw notFound('Attribute', '/attributeId');
  return attributeView(row);
}

interface Removal {
  accountId: number;
  name: string;
  eventType: string;
  now: string;
}

/**
 * Where each entity's attributes are stored: one statement per entity that removes the key from
 * the account's rows and returns the Applications (and sessions) it changed. Entities not listed
 * have no stored rows yet: deleting the definition is all. Sessions move their update count so
 * that a session actor's cached copy, which still holds the key, can never be committed over this.
 */
const removeData: Record<string, (r: Removal) => [string, unknown[]]> = {
  CustomerProfile: (r) => [
    `UPDATE customer_profiles SET attributes = attributes - $2::text WHERE account_id = $1 AND attributes ? $2::text
     RETURNING NULL::int AS application_id, NULL::text AS session_id`,
    [r.accountId, r.name],
  ],
  CustomerSession: (r) => [
    `UPDATE customer_sessions s SET attributes = s.attributes - $2::text, update_count = s.update_count + 1, updated = $3
       FROM applications a
      WHERE a.id = s.application_id AND a.account_id = $1 AND s.attributes ? $2::text
      RETURNING s.application_id, s.integration_id AS session_id`,
    [r.accountId, r.name, r.now],
  ],
  CartItem: (r) => [
    `UPDATE customer_sessions s SET update_count = s.update_count + 1, updated = $3,
        cart_items = (SELECT jsonb_agg(CASE WHEN jsonb_typeof(i -> 'attributes') = 'object'
                                            THEN jsonb_set(i, '{attributes}', (i -> 'attributes') - $2::text) ELSE i END ORDER BY n)
                        FROM jsonb_array_elements(s.cart_items::jsonb) WITH ORDINALITY AS x(i, n))
       FROM applications a
      WHERE a.id = s.application_id AND a.account_id = $1 AND jsonb_typeof(s.cart_items::jsonb) = 'array'
        AND EXISTS (SELECT 1 FROM jsonb_array_elements(s.cart_items::jsonb) i WHERE jsonb_typeof(i -> 'attributes') = 'object' AND (i -> 'attributes') ? $2::text)
      RETURNING s.application_id, s.integration_id AS session_id`,
    [r.accountId, r.name, r.now],
  ],
  Event: (r) => [
    `UPDATE events e SET attributes = e.attributes - $2::text
       FROM applications a
      WHERE a.id = e.application_id AND a.account_id = $1 AND e.type = $3 AND e.attributes ? $2::text
      RETURNING NULL::int AS application_id, NULL::text AS session_id`,
    [r.accountId, r.name, r.eventType],
  ],
  Coupon: (r) => [
    `UPDATE coupons c SET attributes = c.attributes - $2::text
       FROM applications a
      WHERE a.id = c.application_id AND a.account_id = $1 AND c.attributes ? $2::text
      RETURNING NULL::int AS application_id, NULL::text AS session_id`,
    [r.accountId, r.name],
  ],
  Referral: (r) => [
    `UPDATE referrals f SET attributes = f.attributes - $2::text
       FROM applications a
      WHERE a.id = f.application_id AND a.account_id = $1 AND f.attributes ? $2::text
      RETURNING NULL::int AS application_id, NULL::text AS session_id`,
    [r.accountId, r.name],
  ],
  Campaign: (r) => [
    `UPDATE campaigns c SET attributes = c.attributes - $2::text, updated = $3
       FROM applications a
      WHERE a.id = c.application_id AND a.account_id = $1 AND c.attributes ? $2::text
      RETURNING c.application_id, NULL::text AS session_id`,
    [r.accountId, r.name, r.now],
  ],
  Application: (r) => [
    `UPDATE applications SET attributes = attributes - $2::text, modified = $3
      WHERE account_id = $1 AND attributes ? $2::text
      RETURNING id AS application_id, NULL::text AS session_id`,
    [r.accountId, r.name, r.now],
  ],
};

/**
 * DELETE /v1/attributes/{attributeId}: the definition and its data go together in one
 * transaction; then every cache built from the changed rows is dropped (campaign and Application
 * attributes live in the evaluation snapshots, session attributes in the session actors).
 */
export async function deleteAttribute(ctx: ManagementContext, principal: Principal, attributeId: number): Promise<void> {
  requireAdmin(principal);
  const now = ctx.clock.now().toISOString();
  const changed = await ctx.db.transaction(async (tx) => {
    const attribute = await requireAttribute(tx, principal, attributeId, true);
    const entity = attribute.entity as string;
    const removal = removeData[entity]?.({ accountId: principal.accountId, name: attribute.name as string, eventType: attribute.event_type as string, now });
    const rows = removal ? await tx.query<{ application_id: number | null; session_id: string | null }>(removal[0], removal[1]) : [];
    await tx.query(`DELETE FROM attributes WHERE id = $1`, [attributeId]);
    return { entity, rows };
  });
  const sessionsByApp = new Map<number, string[]>();
  const apps = new Set<number>();
  for (const r of changed.rows) {
    if (r.application_id === null) continue;
    if (r.session_id !== null) sessionsByApp.set(r.application_id, [...(sessionsByApp.get(r.application_id) ?? []), r.session_id]);
    else apps.add(r.application_id);
  }
  for (const [applicationId, sessionIds] of sessionsByApp) ctx.events.publish({ kind: 'sessions', applicationId, sessionIds });
  const kind = changed.entity === 'Campaign' ? 'campaigns' : 'application';
  for (const applicationId of apps) ctx.events.publish({ kind, applicationId });
}
