// Notification webhooks (ext, addendum): per-Application endpoints that receive the outbound
// notifications of the types they subscribe to (campaigns, coupons, ...). Reading one needs read
// access to its Application and changing one write access. Like a rule-triggered webhook's,
// header values often authenticate to the receiver: users who may not change the Application see
// them redacted; the signing secret is never shown. A change is a configuration change of the
// Application: the integration snapshots hold the types that have subscribers, and a commit
// writes the rule engine's notifications only for those.
import { notFound } from '../shared/index.js';
import type { NotificationType, Queryable } from '../store/index.js';
import { compact, isAdmin, iso, listPage, requireApplication, type ListQuery, type ManagementContext, type Principal } from './context.js';
import { checkEndpointHeaders, checkEndpointUrl, redactedHeaders } from './outbound-endpoints.js';

export interface NotificationWebhookBody {
  url: string;
  headers: string[];
  notificationTypes: NotificationType[];
  /** HMAC key of X-Signature; write-only. On update, absent keeps the current one and '' removes it. */
  secret?: string;
  enabled?: boolean;
}

export function notificationWebhookView(r: Record<string, unknown>): Record<string, unknown> {
  return compact({
    id: r.id as number,
    created: iso(r.created),
    modified: iso(r.modified),
    applicationId: r.application_id as number,
    url: r.url as string,
    headers: r.headers as string[],
    notificationTypes: r.notification_types as string[],
    enabled: r.enabled as boolean,
  });
}

const mayWrite = (principal: Principal, applicationId: number): boolean =>
  isAdmin(principal) || principal.policy.applications?.[String(applicationId)] === 'write';

function viewFor(principal: Principal, r: Record<string, unknown>): Record<string, unknown> {
  const view = notificationWebhookView(r);
  if (!mayWrite(principal, r.application_id as number)) {
    view.headers = redactedHeaders(view.headers as string[]);
  }
  return view;
}

function checkBody(body: NotificationWebhookBody): void {
  checkEndpointUrl(body.url, '/url');
  checkEndpointHeaders(body.headers);
}

async function requireNotificationWebhook(db: Queryable, applicationId: number, id: number): Promise<Record<string, unknown>> {
  const [row] = await db.query(`SELECT * FROM notification_webhooks WHERE id = $1 AND application_id = $2`, [id, applicationId]);
  if (!row) throw notFound('Notification webhook', '/notificationWebhookId');
  return row;
}

/** Every node drops its snapshot of the Application, which holds the subscribed types. */
function announce(ctx: ManagementContext, applicationId: number): void {
  ctx.events.publish({ kind: 'application', applicationId });
}

/** POST /v1/applications/{applicationId}/notification_webhooks */
export async function createNotificationWebhook(ctx: ManagementContext, principal: Principal, applicationId: number, body: NotificationWebhookBody) {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  checkBody(body);
  const now = ctx.clock.now().toISOString();
  const [row] = await ctx.db.query(
    `INSERT INTO notification_webhooks (application_id, created, modified, url, headers, notification_types, secret, enabled)
     SELECT id, $2, $2, $3, $4::jsonb, $5::jsonb, $6, $7 FROM applications WHERE id = $1 RETURNING *`,
    [applicationId, now, body.url, JSON.stringify(body.headers), JSON.stringify(body.notificationTypes), body.secret ?? '', body.enabled ?? true],
  );
  // Deleted by a racing request since it was checked.
  if (!row) throw notFound('Application', '/applicationId');
  announce(ctx, applicationId);
  return viewFor(principal, row);
}

/** GET /v1/applications/{applicationId}/notification_webhooks */
export async function listNotificationWebhooks(ctx: ManagementContext, principal: Principal, applicationId: number, query: ListQuery) {
  await requireApplication(ctx.db, principal, applicationId, 'read');
  return listPage(
    ctx.db,
    {
      from: `FROM notification_webhooks WHERE application_id = $1`,
      params: [applicationId],
      query,
      sortable: { id: 'id', created: 'created', modified: 'modified', url: 'url' },
      withTotal: true,
    },
    (row) => viewFor(principal, row),
  );
}

/** GET .../notification_webhooks/{notificationWebhookId} */
export async function getNotificationWebhook(ctx: ManagementContext, principal: Principal, applicationId: number, id: number) {
  await requireApplication(ctx.db, principal, applicationId, 'read');
  return viewFor(principal, await requireNotificationWebhook(ctx.db, applicationId, id));
}

/** PUT .../notification_webhooks/{notificationWebhookId}: replaces it; an absent secret is kept, an absent `enabled` is true. */
export async function updateNotificationWebhook(ctx: ManagementContext, principal: Principal, applicationId: number, id: number, body: NotificationWebhookBody) {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  checkBody(body);
  const [row] = await ctx.db.query(
    `UPDATE notification_webhooks SET url = $3, headers = $4::jsonb, notification_types = $5::jsonb, secret = coalesce($6, secret), enabled = $7, modified = $8
      WHERE id = $1 AND application_id = $2 RETURNING *`,
    [id, applicationId, body.url, JSON.stringify(body.headers), JSON.stringify(body.notificationTypes), body.secret ?? null, body.enabled ?? true, ctx.clock.now().toISOString()],
  );
  if (!row) throw notFound('Notification webhook', '/notificationWebhookId');
  announce(ctx, applicationId);
  return viewFor(principal, row);
}

/** DELETE .../notification_webhooks/{notificationWebhookId}: requests not yet sent to it are dropped by the dispatcher. */
export async function deleteNotificationWebhook(ctx: ManagementContext, principal: Principal, applicationId: number, id: number): Promise<void> {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  const rows = await ctx.db.query(`DELETE FROM notification_webhooks WHERE id = $1 AND application_id = $2 RETURNING id`, [id, applicationId]);
  if (rows.length === 0) throw notFound('Notification webhook', '/notificationWebhookId');
  announce(ctx, applicationId);
}
