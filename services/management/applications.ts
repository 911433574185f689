import { badRequest, notFound, randomToken } from '../shared/index.js';
import { compact, iso, isAdmin, paging, requireAdmin, requireApplication, type ListQuery, type ManagementContext, type Principal } from './context.js';

export interface ApplicationBody {
  name: string;
  description?: string;
  timezone: string;
  currency: string;
  caseSensitivity?: string;
  attributes?: Record<string, unknown>;
  limits?: unknown[];
  campaignPriority?: string;
  exclusiveCampaignsStrategy?: string;
  attributesSettings?: Record<string, unknown>;
  sandbox?: boolean;
}

export function applicationView(r: Record<string, unknown>): Record<string, unknown> {
  return compact({
    id: r.id as number,
    created: iso(r.created),
    modified: iso(r.modified),
    accountId: r.account_id as number,
    name: r.name as string,
    description: r.description as string,
    timezone: r.timezone as string,
    currency: r.currency as string,
    caseSensitivity: r.case_sensitivity as string,
    attributes: r.attributes as Record<string, unknown>,
    limits: r.limits as unknown[],
    campaignPriority: r.campaign_priority as string,
    exclusiveCampaignsStrategy: r.exclusive_campaigns_strategy as string,
    attributesSettings: r.attributes_settings as Record<string, unknown>,
    sandbox: r.sandbox as boolean,
    loyaltyPrograms: [],
  });
}

function checkTimezone(tz: string): void {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
  } catch {
    throw badRequest(`Unknown IANA timezone ${JSON.stringify(tz)}`, '/timezone');
  }
}

const currencyPattern = /^[A-Z]{3}$/;

function checkBody(body: ApplicationBody): void {
  checkTimezone(body.timezone);
  if (!currencyPattern.test(body.currency)) throw badRequest('`currency` must be an ISO 4217 code such as EUR', '/currency');
}

export async function createApplication(ctx: ManagementContext, principal: Principal, body: ApplicationBody) {
  requireAdmin(principal);
  checkBody(body);
  const [row] = await ctx.db.query(
    `INSERT INTO applications (account_id, name, description, timezone, currency, case_sensitivity, attributes, limits,
       campaign_priority, exclusive_campaigns_strategy, attributes_settings, sandbox, signing_secret)
     VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8::jsonb, $9, $10, $11::jsonb, $12, $13) RETURNING *`,
    [
      principal.accountId,
      body.name,
      body.description ?? '',
      body.timezone,
      body.currency,
      body.caseSensitivity ?? 'sensitive',
      JSON.stringify(body.attributes ?? {}),
      JSON.stringify(body.limits ?? []),
      body.campaignPriority ?? 'universal',
      body.exclusiveCampaignsStrategy ?? 'listOrder',
      JSON.stringify(body.attributesSettings ?? {}),
      body.sandbox ?? false,
      randomToken(32),
    ],
  );
  return applicationView(row!);
}

export async function listApplications(ctx: ManagementContext, principal: Principal, query: ListQuery) {
  const { clause } = paging(query, { id: 'id', name: 'name', created: 'created', modified: 'modified' });
  const visible = isAdmin(principal) ? null : Object.keys(principal.policy.applications ?? {}).map(Number);
  const filter = visible ? `AND id = ANY($2::int[])` : '';
  const params = visible ? [principal.accountId, visible] : [principal.accountId];
  const rows = await ctx.db.query(`SELECT * FROM applications WHERE account_id = $1 ${filter} ${clause}`, params);
  const [count] = await ctx.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM applications WHERE account_id = $1 ${filter}`, params);
  return { totalResultSize: count!.n, data: rows.map(applicationView) };
}

export async function getApplication(ctx: ManagementContext, principal: Principal, applicationId: number) {
  return applicationView(await requireApplication(ctx.db, principal, applicationId, 'read'));
}

export async function updateApplication(ctx: ManagementContext, principal: Principal, applicationId: number, body: ApplicationBody) {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  checkBody(body);
  const [row] = await ctx.db.query(
    `UPDATE applications SET name = $2, description = COALESCE($3, description), timezone = $4, currency = $5,
       case_sensitivity = COALESCE($6, case_sensitivity), attributes = COALESCE($7::jsonb, attributes),
       limits = COALESCE($8::jsonb, limits), campaign_priority = COALESCE($9, campaign_priority),
       exclusive_campaigns_strategy = COALESCE($10, exclusive_campaigns_strategy),
       attributes_settings = COALESCE($11::jsonb, attributes_settings), sandbox = COALESCE($12, sandbox), modified = $13
     WHERE id = $1 RETURNING *`,
    [
      applicationId,
      body.name,
      body.description ?? null,
      body.timezone,
      body.currency,
      body.caseSensitivity ?? null,
      body.attributes ? JSON.stringify(body.attributes) : null,
      body.limits ? JSON.stringify(body.limits) : null,
      body.campaignPriority ?? null,
      body.exclusiveCampaignsStrategy ?? null,
      body.attributesSettings ? JSON.stringify(body.attributesSettings) : null,
      body.sandbox ?? null,
      ctx.clock.now().toISOString(),
    ],
  );
  ctx.events.publish({ kind: 'application', applicationId });
  return applicationView(row!);
}

/** Deletes the Application with everything that belongs to it (campaigns, keys, sessions, events). */
export async function deleteApplication(ctx: ManagementContext, principal: Principal, applicationId: number): Promise<void> {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  const rows = await ctx.db.query(`DELETE FROM applications WHERE id = $1 RETURNING id`, [applicationId]);
  if (rows.length === 0) throw notFound('Application', '/applicationId');
  ctx.events.publish({ kind: 'application', applicationId });
}
