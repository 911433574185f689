// Access logs and webhook logs (service-spec "Logs (Management)"). Access log entries are written
// by the AccessLogWriter; webhook log entries by the outbound dispatcher, one per attempt. Both are
// read here, newest first by default, limited to the Applications the caller may read.
import { badRequest } from '../shared/index.js';
import type { Queryable } from '../store/index.js';
import { compact, isAdmin, iso, listPage, requireApplication, type ListQuery, type ManagementContext, type Principal } from './context.js';

export interface AccessLogQuery extends ListQuery {
  rangeStart: string;
  rangeEnd: string;
  /** Regular expression (Postgres `~`) on the request path. */
  path?: string;
  /** Regular expression (Postgres `~`) on the HTTP method. */
  method?: string;
  status?: 'success' | 'error';
}

export function accessLogView(r: Record<string, unknown>): Record<string, unknown> {
  return {
    uuid: r.uuid as string,
    status: r.status as number,
    method: r.method as string,
    requestUri: r.request_uri as string,
    time: iso(r.time)!,
    requestPayload: r.request_payload as string,
    responsePayload: r.response_payload as string,
  };
}

const accessSortable = { time: 'time', status: 'status', method: 'method', requestUri: 'request_uri' };

/**
 * A regular expression Postgres refuses is the caller's mistake: checked on its own first so that
 * it is a 400 on its parameter instead of a failed list query.
 */
async function checkRegex(db: Queryable, pattern: string | undefined, pointer: string): Promise<void> {
  if (pattern === undefined) return;
  try {
    await db.query(`SELECT ''::text ~ $1::text AS ok`, [pattern]);
  } catch (e) {
    throw badRequest(`Invalid regular expression: ${(e as Error).message}`, pointer);
  }
}

/** The filters every access log list shares, after `scope` (an SQL condition on $1..$k). */
async function accessLogs(
  ctx: ManagementContext,
  scope: string,
  scopeParams: unknown[],
  query: AccessLogQuery,
  withTotal: boolean,
) {
  const start = new Date(query.rangeStart);
  const end = new Date(query.rangeEnd);
  if (end.getTime() < start.getTime()) throw badRequest('`rangeEnd` must not be before `rangeStart`', '/query/rangeEnd');
  await checkRegex(ctx.db, query.path, '/query/path');
  await checkRegex(ctx.db, query.method, '/query/method');
  const params: unknown[] = [...scopeParams, start.toISOString(), end.toISOString()];
  const n = scopeParams.length;
  let where = `${scope} AND time >= $${n + 1} AND time <= $${n + 2}`;
  if (query.path !== undefined) {
    params.push(query.path);
    where += ` AND path ~ $${params.length}`;
  }
  if (query.method !== undefined) {
    params.push(query.method);
    where += ` AND method ~ $${params.length}`;
  }
  if (query.status === 'success') where += ` AND status BETWEEN 200 AND 299`;
  if (query.status === 'error') where += ` AND status NOT BETWEEN 200 AND 299`;
  return listPage(
    ctx.db,
    {
      from: `FROM access_logs WHERE ${where}`,
      params,
      query,
      sortable: accessSortable,
      defaultSort: '-time',
      withTotal,
      select: 'id, uuid, status, method, request_uri, time, request_payload, response_payload',
    },
    accessLogView,
  );
}

/** GET /v1/applications/{applicationId}/access_logs (and `/no_total`: withTotal false). */
export async function listApplicationAccessLogs(
  ctx: ManagementContext,
  principal: Principal,
  applicationId: number,
  query: AccessLogQuery,
  withTotal = true,
) {
  await requireApplication(ctx.db, principal, applicationId, 'read');
  return accessLogs(ctx, `application_id = $1`, [applicationId], query, withTotal);
}

/**
 * GET /v1/access_logs: the whole account for an admin, account-level calls included; a user with
 * per-Application access sees only the entries of the Applications their policy names.
 */
export async function listAccountAccessLogs(ctx: ManagementContext, principal: Principal, query: AccessLogQuery) {
  if (isAdmin(principal)) return accessLogs(ctx, `account_id = $1`, [principal.accountId], query, true);
  return accessLogs(ctx, `account_id = $1 AND application_id = ANY($2::int[])`, [principal.accountId, readableIds(principal)], query, true);
}

/** The Application ids a non-admin's policy names (read or write), as a Postgres array literal. */
function readableIds(principal: Principal): string {
  const ids = Object.keys(principal.policy.applications ?? {}).filter((k) => /^\d+$/.test(k));
  return `{${ids.join(',')}}`;
}

export interface WebhookLogQuery extends ListQuery {
  webhookId?: number;
  applicationId?: number;
  campaignId?: number;
  requestUuid?: string;
  status?: 'success' | 'error';
  createdBefore?: string;
  createdAfter?: string;
}

export function webhookLogView(r: Record<string, unknown>): Record<string, unknown> {
  return compact({
    id: Number(r.id),
    applicationId: r.application_id as number,
    webhookId: r.webhook_id as number,
    campaignId: (r.campaign_id as number | null) ?? undefined,
    integrationRequestUuid: r.integration_request_uuid as string,
    request: r.request as Record<string, unknown>,
    requestTime: iso(r.request_time)!,
    response: r.response as string,
    responseTime: iso(r.response_time),
    status: (r.status as number | null) ?? null,
    url: r.url as string,
    attempt: r.attempt as number,
  });
}

/**
 * GET /v1/webhook_logs: attempts of the Applications the caller may read. Naming an Application
 * the caller may not read is a 404, as on every Application path. `created*` filter the time the
 * attempt was sent; `status` `success` is a 2xx answer, `error` anything else (no answer included).
 */
export async function listWebhookLogs(ctx: ManagementContext, principal: Principal, query: WebhookLogQuery) {
  const params: unknown[] = [];
  const p = (v: unknown): string => {
    params.push(v);
    return `$${params.length}`;
  };
  let where: string;
  if (query.applicationId !== undefined) {
    await requireApplication(ctx.db, principal, query.applicationId, 'read');
    where = `application_id = ${p(query.applicationId)}`;
  } else if (isAdmin(principal)) {
    where = `application_id IN (SELECT id FROM applications WHERE account_id = ${p(principal.accountId)})`;
  } else {
    where = `application_id IN (SELECT id FROM applications WHERE account_id = ${p(principal.accountId)} AND id = ANY(${p(readableIds(principal))}::int[]))`;
  }
  if (query.webhookId !== undefined) where += ` AND webhook_id = ${p(query.webhookId)}`;
  if (query.campaignId !== undefined) where += ` AND campaign_id = ${p(query.campaignId)}`;
  if (query.requestUuid !== undefined) where += ` AND integration_request_uuid = ${p(query.requestUuid)}`;
  if (query.status === 'success') where += ` AND status BETWEEN 200 AND 299`;
  if (query.status === 'error') where += ` AND (status IS NULL OR status NOT BETWEEN 200 AND 299)`;
  if (query.createdBefore !== undefined) where += ` AND request_time < ${p(new Date(query.createdBefore).toISOString())}`;
  if (query.createdAfter !== undefined) where += ` AND request_time > ${p(new Date(query.createdAfter).toISOString())}`;
  return listPage(
    ctx.db,
    {
      from: `FROM webhook_logs WHERE ${where}`,
      params,
      query,
      sortable: { id: 'id', requestTime: 'request_time', status: 'status', webhookId: 'webhook_id' },
      defaultSort: '-requestTime',
      withTotal: true,
    },
    webhookLogView,
  );
}
