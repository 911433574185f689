// The caller's account (service-spec "User and account"). Counters are counted when read, so they
// are always true. A self-hosted deployment has no plan: every limit is 0, meaning "no limit",
// `planName` is the stored plan (default `self-hosted`) and `planExpires` is absent (never).
// Another account is "not found"; every user may read their account, only admins update it.
import { notFound } from '../shared/index.js';
import { compact, iso, requireAdmin, type ManagementContext, type Principal } from './context.js';

/** Limits of a self-hosted account: 0 = unlimited. */
export const ACCOUNT_LIMITS = { apiLimit: 0, applicationLimit: 0, campaignLimit: 0, userLimit: 0 } as const;

export interface UpdateAccountBody {
  billingEmail?: string;
  companyName?: string;
}

export async function getAccount(ctx: ManagementContext, principal: Principal, accountId: number) {
  if (accountId !== principal.accountId) throw notFound('Account', '/accountId');
  // a.* rather than named columns: api_call_count exists only once API call counting is deployed.
  const [row] = await ctx.db.query(
    `SELECT a.*,
            (SELECT count(*)::int FROM applications WHERE account_id = a.id) AS application_count,
            (SELECT count(*)::int FROM users WHERE account_id = a.id) AS user_count,
            (SELECT count(*) FILTER (WHERE c.state = 'enabled')::int FROM campaigns c JOIN applications p ON p.id = c.application_id WHERE p.account_id = a.id) AS campaigns_active,
            (SELECT count(*) FILTER (WHERE c.state <> 'enabled')::int FROM campaigns c JOIN applications p ON p.id = c.application_id WHERE p.account_id = a.id) AS campaigns_inactive
       FROM accounts a WHERE a.id = $1`,
    [accountId],
  );
  if (!row) throw notFound('Account', '/accountId');
  return accountView(row);
}

/** PUT /v1/accounts/{accountId}: only `billingEmail` and `companyName` (the schema refuses any other property). */
export async function updateAccount(ctx: ManagementContext, principal: Principal, accountId: number, body: UpdateAccountBody) {
  if (accountId !== principal.accountId) throw notFound('Account', '/accountId');
  requireAdmin(principal);
  await ctx.db.query(
    `UPDATE accounts SET billing_email = coalesce($2, billing_email), company_name = coalesce($3, company_name), modified = $4 WHERE id = $1`,
    [accountId, body.billingEmail ?? null, body.companyName ?? null, ctx.clock.now().toISOString()],
  );
  return getAccount(ctx, principal, accountId);
}

function accountView(r: Record<string, unknown>): Record<string, unknown> {
  return compact({
    id: r.id as number,
    created: iso(r.created),
    modified: iso(r.modified),
    companyName: r.company_name as string,
    billingEmail: r.billing_email as string,
    domainName: r.domain_name as string,
    planName: r.plan_name as string,
    planExpires: iso(r.plan_expires),
    state: r.state as string,
    apiCallCount: Number(r.api_call_count ?? 0),
    applicationCount: r.application_count as number,
    userCount: r.user_count as number,
    campaignsActiveCount: r.campaigns_active as number,
    campaignsInactiveCount: r.campaigns_inactive as number,
    ...ACCOUNT_LIMITS,
  });
}
