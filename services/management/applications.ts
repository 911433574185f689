import { badRequest, notFound, randomToken } from '../shared/index.js';
import { loyaltyProgramsOfApplication, loyaltyProgramsOfApplications, programForViewer } from './loyalty.js';
import type { Queryable } from '../store/index.js';
import { advanceEvaluationTree, lockEvaluationTree, notifyEvaluationTreeChanged } from './campaign-notifications.js';
import {
  compact,
  iso,
  isAdmin,
  listPage,
  outboundWritten,
  requireAdmin,
  requireApplication,
  userName,
  type ListQuery,
  type ManagementContext,
  type Principal,
} from './context.js';

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
  attributesSettings?: AttributesSettings;
  sandbox?: boolean;
}

export interface AttributesSettings {
  mandatory?: { campaigns?: string[]; coupons?: string[] };
}

/** Always the full shape, so clients need not guess which parts an older row lacks. */
function attributesSettingsView(v: unknown): { mandatory: { campaigns: string[]; coupons: string[] } } {
  const mandatory = ((v as AttributesSettings | null)?.mandatory ?? {}) as NonNullable<AttributesSettings['mandatory']>;
  return { mandatory: { campaigns: mandatory.campaigns ?? [], coupons: mandatory.coupons ?? [] } };
}

/** Whether the caller may change the Application (and so see its signing secret). */
const mayWrite = (principal: Principal, applicationId: number): boolean =>
  isAdmin(principal) || principal.policy.applications?.[String(applicationId)] === 'write';

export function applicationView(r: Record<string, unknown>, loyaltyPrograms: Record<string, unknown>[] = [], withSecret = false): Record<string, unknown> {
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
    attributesSettings: attributesSettingsView(r.attributes_settings),
    sandbox: r.sandbox as boolean,
    loyaltyPrograms,
    signingSecret: withSecret ? (r.signing_secret as string) : undefined,
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
      JSON.stringify(attributesSettingsView(body.attributesSettings)),
      body.sandbox ?? false,
      randomToken(32),
    ],
  );
  return applicationView(row!, await loyaltyProgramsOfApplication(ctx.db, row!.id as number), true);
}

async function viewWithPrograms(db: Queryable, principal: Principal, row: Record<string, unknown>): Promise<Record<string, unknown>> {
  const programs = (await loyaltyProgramsOfApplication(db, row.id as number)).map((p) => programForViewer(principal, p));
  return applicationView(row, programs, mayWrite(principal, row.id as number));
}

export async function listApplications(ctx: ManagementContext, principal: Principal, query: ListQuery) {
  // Non-admins see only the Applications their policy names (ids that are not numbers name nothing).
  const visible = isAdmin(principal) ? null : Object.keys(principal.policy.applications ?? {}).map(Number).filter(Number.isInteger);
  const page = await listPage(
    ctx.db,
    {
      from: `FROM applications WHERE account_id = $1 ${visible ? 'AND id = ANY($2::int[])' : ''}`,
      params: visible ? [principal.accountId, visible] : [principal.accountId],
      query,
      sortable: { id: 'id', name: 'name', created: 'created', modified: 'modified', timezone: 'timezone', currency: 'currency' },
      withTotal: true,
    },
    (row) => row,
  );
  const programs = await loyaltyProgramsOfApplications(ctx.db, page.data.map((row) => row.id as number));
  const data = page.data.map((row) =>
    applicationView(row, (programs.get(row.id as number) ?? []).map((p) => programForViewer(principal, p)), mayWrite(principal, row.id as number)),
  );
  return { ...page, data };
}

export async function getApplication(ctx: ManagementContext, principal: Principal, applicationId: number) {
  return viewWithPrograms(ctx.db, principal, await requireApplication(ctx.db, principal, applicationId, 'read'));
}

export async function updateApplication(ctx: ManagementContext, principal: Principal, applicationId: number, body: ApplicationBody) {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  checkBody(body);
  // The priority is the evaluation mode of the Application's campaign evaluation tree.
  const treeChanges = body.campaignPriority !== undefined || body.exclusiveCampaignsStrategy !== undefined;
  const by = treeChanges ? await userName(ctx.db, principal) : '';
  const at = ctx.clock.now();
  const { row, sent } = await ctx.db.transaction(async (tx) => {
    const tree = treeChanges ? await lockEvaluationTree(tx, applicationId, at) : undefined;
    const [row] = await tx.query(
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
        body.attributesSettings ? JSON.stringify(attributesSettingsView(body.attributesSettings)) : null,
        body.sandbox ?? null,
        at.toISOString(),
      ],
    );
    // Deleted by a racing request since it was checked.
    if (!row) throw notFound('Application', '/applicationId');
    const change = tree ? await advanceEvaluationTree(tx, tree, by, at) : undefined;
    return { row, sent: await notifyEvaluationTreeChanged(tx, { accountId: principal.accountId, applicationId }, change, at) };
  });
  ctx.events.publish({ kind: 'application', applicationId });
  outboundWritten(ctx, sent);
  return viewWithPrograms(ctx.db, principal, row);
}

/**
 * Deletes the Application with everything that belongs to it: every table with an application_id
 * references applications ON DELETE CASCADE (campaigns and through them rulesets, coupons,
 * referrals, counters; API keys, sessions, events, returns, idempotency keys). Account-level
 * custom attributes only lose their mention of it.
 */
export async function deleteApplication(ctx: ManagementContext, principal: Principal, applicationId: number): Promise<void> {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  const deleted = await ctx.db.transaction(async (tx) => {
    const rows = await tx.query(`DELETE FROM applications WHERE id = $1 RETURNING id`, [applicationId]);
    if (rows.length === 0) return false;
    // Access logs carry no foreign key (see migration 008): their Application's go here.
    await tx.query(`DELETE FROM access_logs WHERE application_id = $1`, [applicationId]);
    await tx.query(
      `UPDATE attributes SET subscribed_applications_ids =
          (SELECT coalesce(jsonb_agg(e), '[]'::jsonb) FROM jsonb_array_elements(subscribed_applications_ids) e WHERE e <> to_jsonb($2::int))
        WHERE account_id = $1 AND subscribed_applications_ids @> to_jsonb($2::int)`,
      [principal.accountId, applicationId],
    );
    await tx.query(`UPDATE attributes SET last_used_application_id = NULL WHERE account_id = $1 AND last_used_application_id = $2`, [
      principal.accountId,
      applicationId,
    ]);
    return true;
  });
  if (!deleted) throw notFound('Application', '/applicationId');
  ctx.events.publish({ kind: 'application', applicationId });
}
