// Custom attributes (service-spec "Custom attribute (Management)"): names and types of what the
// account's profiles, sessions, cart items and events may carry. An attribute of entity `Event`
// with an `eventType` defines that custom event type; events are checked against them. Attributes
// belong to the account: every user of the account may list and create them.
import { AppError, badRequest } from '../shared/index.js';
import { compact, iso, paging, type ListQuery, type ManagementContext, type Principal } from './context.js';

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
export async function listAttributes(ctx: ManagementContext, principal: Principal, query: AttributeListQuery) {
  const { clause } = paging(query, { id: 'id', name: 'name', entity: 'entity', created: 'created' });
  const where = `account_id = $1 AND ($2::text IS NULL OR entity = $2) AND ($3::text IS NULL OR event_type = $3)`;
  const params = [principal.accountId, query.entity ?? null, query.eventType ?? null];
  const rows = await ctx.db.query(`SELECT * FROM attributes WHERE ${where} ${clause}`, params);
  const [count] = await ctx.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM attributes WHERE ${where}`, params);
  return { totalResultSize: count!.n, data: rows.map(attributeView) };
}
