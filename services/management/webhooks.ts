// Rule-triggered webhooks (service-spec "Webhook (Management)"): what a `triggerWebhook` effect
// calls. A webhook belongs to the account and is attached to some of its Applications; a user sees
// the webhooks of the Applications its policy names and changes one only with write access to
// every Application it is (or will be) attached to. Delivery is not here (see services/notify).
import { AppError, badRequest, notFound, parseTemplate, TemplateError, type TemplatePart } from '../shared/index.js';
import type { Queryable } from '../store/index.js';
import { compact, isAdmin, iso, listPage, requireApplication, visibleApplicationIds, type ListQuery, type ManagementContext, type Principal } from './context.js';
import { checkEndpointHeaders, checkEndpointUrl, redactedHeaders } from './outbound-endpoints.js';

export interface WebhookParam {
  title: string;
  type: string;
  description?: string;
  ui?: Record<string, unknown>;
}

export interface WebhookBody {
  applicationIds: number[];
  title: string;
  verb: 'POST' | 'PUT' | 'GET' | 'DELETE' | 'PATCH';
  url: string;
  headers?: string[];
  params?: WebhookParam[];
  payload?: string;
  enabled?: boolean;
  /** (ext) HMAC key of X-Signature; write-only. */
  secret?: string;
}

export interface WebhookListQuery extends ListQuery {
  /** Comma-separated Application IDs (the contract checks the form). */
  applicationIds?: string;
}

export function webhookView(r: Record<string, unknown>): Record<string, unknown> {
  return compact({
    id: r.id as number,
    created: iso(r.created),
    modified: iso(r.modified),
    applicationIds: (r.shown_application_ids as number[] | null) ?? (r.application_ids as number[] | null) ?? [],
    title: r.title as string,
    verb: r.verb as string,
    url: r.url as string,
    headers: r.headers as string[],
    params: r.params as WebhookParam[],
    payload: r.payload as string,
    enabled: r.enabled as boolean,
    usedAt: (r.used_at as string[] | null) ?? [],
  });
}

/** Whether the caller may change the webhook: an admin, or a writer of every Application it is attached to. */
const mayChange = (principal: Principal, r: Record<string, unknown>): boolean =>
  isAdmin(principal) || ((r.application_ids as number[] | null) ?? []).every((id) => principal.policy.applications?.[String(id)] === 'write');

/**
 * The webhook as the caller may see it. Header values often authenticate to the receiver: like an
 * Application's signing secret, they are shown only to users who may change the webhook (the
 * others see each header's name with its value redacted).
 */
function webhookFor(principal: Principal, r: Record<string, unknown>): Record<string, unknown> {
  const view = webhookView(r);
  if (!mayChange(principal, r) && Array.isArray(view.headers)) {
    view.headers = redactedHeaders(view.headers as string[]);
  }
  return view;
}

/**
 * The webhook's columns with its Applications and `usedAt`: the campaigns (of those Applications)
 * whose active ruleset has a top-level `["triggerWebhook", <id>, ...]` effect. `$3` is the
 * caller's visible Applications (null: an admin): `application_ids` holds them all (for the write
 * checks), `shown_application_ids` and `used_at` only what the caller may see.
 */
const select = `w.*,
  (SELECT COALESCE(jsonb_agg(wa.application_id ORDER BY wa.application_id), '[]'::jsonb)
     FROM webhook_applications wa WHERE wa.webhook_id = w.id) AS application_ids,
  (SELECT COALESCE(jsonb_agg(wa.application_id ORDER BY wa.application_id), '[]'::jsonb)
     FROM webhook_applications wa WHERE wa.webhook_id = w.id AND ($3::int[] IS NULL OR wa.application_id = ANY($3::int[]))) AS shown_application_ids,
  (SELECT COALESCE(jsonb_agg(c.id::text ORDER BY c.id), '[]'::jsonb)
     FROM webhook_applications wa
     JOIN campaigns c ON c.application_id = wa.application_id
     JOIN rulesets r ON r.id = c.active_ruleset_id
    WHERE wa.webhook_id = w.id AND ($3::int[] IS NULL OR wa.application_id = ANY($3::int[])) AND jsonb_typeof(r.rules) = 'array'
      AND EXISTS (SELECT 1 FROM jsonb_array_elements(r.rules) rule
                   CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(rule -> 'effects') = 'array' THEN rule -> 'effects' ELSE '[]'::jsonb END) e
                   WHERE jsonb_typeof(e) = 'array' AND e ->> 0 = 'triggerWebhook' AND e ->> 1 = w.id::text)) AS used_at`;

/**
 * Checks the `${...}` references of a template (services/shared webhook-template) against the
 * declared parameters; returns the template with every reference replaced by `x` (for the URL check).
 */
function checkTemplate(template: string, params: ReadonlySet<string>, pointer: string): string {
  let parts: TemplatePart[];
  try {
    parts = parseTemplate(template);
  } catch (e) {
    if (e instanceof TemplateError) throw badRequest(e.message, pointer, e.title);
    throw e;
  }
  for (const p of parts) {
    if ('param' in p && !params.has(p.param)) {
      throw badRequest(`Template reference \${$${p.param}} names no parameter of this webhook; declare it in params`, pointer, 'UndeclaredParameter');
    }
  }
  return parts.map((p) => ('text' in p ? p.text : 'x')).join('');
}

function checkBody(body: WebhookBody): void {
  const params = body.params ?? [];
  const titles = new Set<string>();
  params.forEach((p, i) => {
    if (titles.has(p.title)) throw badRequest(`Parameter ${JSON.stringify(p.title)} is declared twice`, `/params/${i}/title`);
    titles.add(p.title);
  });
  checkTemplate(body.payload ?? '', titles, '/payload');
  checkEndpointUrl(checkTemplate(body.url, titles, '/url'), '/url');
  checkEndpointHeaders(body.headers);
}

/** Every Application must be the account's and writable by the caller (404 / 403 otherwise). */
async function requireWritableApplications(db: Queryable, principal: Principal, ids: readonly number[], pointer: (i: number) => string): Promise<void> {
  for (const [i, id] of ids.entries()) {
    try {
      await requireApplication(db, principal, id, 'write');
    } catch (e) {
      if (e instanceof AppError && (e.kind === 'not_found' || e.kind === 'permission_denied')) {
        const what = e.kind === 'not_found' ? `Application ${id} not found` : `This user may not change Application ${id}`;
        throw new AppError(e.kind, what, [{ title: e.kind === 'not_found' ? 'Not Found' : 'Forbidden', details: what, source: { pointer: pointer(i) } }]);
      }
      throw e;
    }
  }
}

/**
 * The caller already sees the webhook: an attached Application it may not write (or not even see)
 * is a 403, not a 404.
 */
function requireWriteOnAttached(principal: Principal, applicationIds: readonly number[]): void {
  if (isAdmin(principal)) return;
  const denied = applicationIds.filter((id) => principal.policy.applications?.[String(id)] !== 'write');
  if (denied.length > 0) {
    // Only the Applications the caller sees are named: the others' ids are not revealed.
    const named = denied.filter((id) => principal.policy.applications?.[String(id)] !== undefined);
    const details = named.length > 0 ? `write access to Applications ${named.join(', ')} is required` : 'write access to every Application of the webhook is required';
    throw new AppError('permission_denied', 'This user may not change this webhook', [
      { title: 'Forbidden', details, source: { pointer: '/webhookId', parameter: 'webhookId' } },
    ]);
  }
}

/** The Applications of the policy (null: an admin, who sees the whole account). */
const visibleApplications = (principal: Principal): number[] | null =>
  isAdmin(principal) ? null : Object.keys(principal.policy.applications ?? {}).map(Number);

/** A webhook the caller may see (404 otherwise, also for another account's). */
async function requireWebhook(db: Queryable, principal: Principal, webhookId: number, lock = false): Promise<Record<string, unknown>> {
  const [row] = await db.query(
    `SELECT ${select} FROM webhooks w
      WHERE w.id = $1 AND w.account_id = $2
        AND ($3::int[] IS NULL OR EXISTS (SELECT 1 FROM webhook_applications v WHERE v.webhook_id = w.id AND v.application_id = ANY($3::int[])))
      ${lock ? 'FOR UPDATE OF w' : ''}`,
    [webhookId, principal.accountId, visibleApplications(principal)],
  );
  if (!row) throw notFound('Webhook', '/webhookId');
  return row;
}

/** Configuration of these Applications changed (their evaluation snapshots hold webhook names). */
function announce(ctx: ManagementContext, applicationIds: Iterable<number>): void {
  for (const applicationId of new Set(applicationIds)) ctx.events.publish({ kind: 'application', applicationId });
}

/** POST /v1/webhooks */
export async function createWebhook(ctx: ManagementContext, principal: Principal, body: WebhookBody): Promise<Record<string, unknown>> {
  checkBody(body);
  const now = ctx.clock.now().toISOString();
  const row = await ctx.db.transaction(async (tx) => {
    await requireWritableApplications(tx, principal, body.applicationIds, (i) => `/applicationIds/${i}`);
    const [w] = await tx.query<{ id: number }>(
      `INSERT INTO webhooks (account_id, title, verb, url, headers, params, payload, enabled, created, modified, secret)
       VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb, $7, $8, $9, $9, $10) RETURNING id`,
      [principal.accountId, body.title, body.verb, body.url, JSON.stringify(body.headers ?? []), JSON.stringify(body.params ?? []), body.payload ?? '', body.enabled ?? true, now, body.secret ?? ''],
    );
    await attach(tx, w!.id, body.applicationIds);
    return requireWebhook(tx, principal, w!.id);
  });
  announce(ctx, body.applicationIds);
  return webhookFor(principal, row);
}

async function attach(db: Queryable, webhookId: number, applicationIds: readonly number[]): Promise<void> {
  try {
    await db.query(
      `INSERT INTO webhook_applications (webhook_id, application_id) SELECT $1, a FROM unnest($2::int[]) AS a ON CONFLICT DO NOTHING`,
      [webhookId, [...applicationIds]],
    );
  } catch (e) {
    // An Application deleted since it was checked (the insert's foreign key): as if it had been gone then.
    const gone = /\(application_id\)=\((\d+)\)/.exec(String((e as { code?: string; detail?: string }).code === '23503' ? (e as { detail?: string }).detail : ''));
    if (!gone) throw e;
    const i = applicationIds.indexOf(Number(gone[1]));
    throw new AppError('not_found', `Application ${gone[1]} not found`, [
      { title: 'Not Found', details: `Application ${gone[1]} not found`, source: { pointer: i >= 0 ? `/applicationIds/${i}` : '/applicationIds' } },
    ]);
  }
}

/** GET /v1/webhooks: with `applicationIds`, only webhooks attached to any of them. */
export async function listWebhooks(ctx: ManagementContext, principal: Principal, query: WebhookListQuery) {
  let wanted = query.applicationIds ? query.applicationIds.split(',').map(Number) : null;
  if (wanted?.some((id) => !Number.isSafeInteger(id) || id > 2_147_483_647)) throw badRequest('`applicationIds` holds an ID out of range', '/query/applicationIds');
  // An Application outside the caller's policy has no webhooks for it (a match would reveal one).
  if (wanted) wanted = visibleApplicationIds(principal, wanted);
  return listPage(
    ctx.db,
    {
      select,
      from: `FROM webhooks w
        WHERE w.account_id = $1
          AND ($2::int[] IS NULL OR EXISTS (SELECT 1 FROM webhook_applications f WHERE f.webhook_id = w.id AND f.application_id = ANY($2::int[])))
          AND ($3::int[] IS NULL OR EXISTS (SELECT 1 FROM webhook_applications v WHERE v.webhook_id = w.id AND v.application_id = ANY($3::int[])))`,
      params: [principal.accountId, wanted, visibleApplications(principal)],
      query,
      sortable: { id: 'w.id', title: 'w.title', created: 'w.created', modified: 'w.modified' },
      withTotal: true,
    },
    (row) => webhookFor(principal, row),
  );
}

/** GET /v1/webhooks/{webhookId} */
export async function getWebhook(ctx: ManagementContext, principal: Principal, webhookId: number): Promise<Record<string, unknown>> {
  return webhookFor(principal, await requireWebhook(ctx.db, principal, webhookId));
}

/** PUT /v1/webhooks/{webhookId}: replaces the webhook; its Applications, old and new, must be writable. */
export async function updateWebhook(ctx: ManagementContext, principal: Principal, webhookId: number, body: WebhookBody): Promise<Record<string, unknown>> {
  checkBody(body);
  const now = ctx.clock.now().toISOString();
  const { row, before } = await ctx.db.transaction(async (tx) => {
    const current = await requireWebhook(tx, principal, webhookId, true);
    const before = (current.application_ids as number[] | null) ?? [];
    requireWriteOnAttached(principal, before);
    await requireWritableApplications(tx, principal, body.applicationIds, (i) => `/applicationIds/${i}`);
    await tx.query(
      `UPDATE webhooks SET title = $2, verb = $3, url = $4, headers = $5::jsonb, params = $6::jsonb, payload = $7, enabled = $8, modified = $9,
         secret = coalesce($10, secret) WHERE id = $1`,
      [webhookId, body.title, body.verb, body.url, JSON.stringify(body.headers ?? []), JSON.stringify(body.params ?? []), body.payload ?? '', body.enabled ?? true, now, body.secret ?? null],
    );
    await tx.query(`DELETE FROM webhook_applications WHERE webhook_id = $1 AND application_id <> ALL($2::int[])`, [webhookId, [...body.applicationIds]]);
    await attach(tx, webhookId, body.applicationIds);
    return { row: await requireWebhook(tx, principal, webhookId), before };
  });
  announce(ctx, [...before, ...body.applicationIds]);
  return webhookFor(principal, row);
}

/** DELETE /v1/webhooks/{webhookId}: write access to every Application of the webhook is needed. */
export async function deleteWebhook(ctx: ManagementContext, principal: Principal, webhookId: number): Promise<void> {
  const before = await ctx.db.transaction(async (tx) => {
    const current = await requireWebhook(tx, principal, webhookId, true);
    const before = (current.application_ids as number[] | null) ?? [];
    requireWriteOnAttached(principal, before);
    await tx.query(`DELETE FROM webhooks WHERE id = $1`, [webhookId]);
    return before;
  });
  announce(ctx, before);
}
