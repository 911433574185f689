// Referrals of a campaign (service-spec "Management API v1", referrals): listed with the spec's
// filters and deleted one by one. They are created through the Integration API or by rules.
import { notFound } from '../shared/index.js';
import { referralView } from '../store/index.js';
import { requireCampaign } from './campaigns.js';
import { Conditions, FOLDED, foldCode, usability, validity, type Validity } from './code-filters.js';
import { listPage, requireApplication, type ListQuery, type ManagementContext, type Principal } from './context.js';

export interface ReferralListQuery extends ListQuery {
  code?: string;
  createdBefore?: string;
  createdAfter?: string;
  valid?: Validity;
  usable?: boolean;
  advocate?: string;
}

const SORTABLE = {
  id: 'id',
  created: 'created',
  code: 'code',
  startDate: 'start_date',
  expiryDate: 'expiry_date',
  usageLimit: 'usage_limit',
  usageCounter: 'usage_counter',
  advocateProfileIntegrationId: 'advocate_profile_integration_id',
};

async function listReferralsPage(
  ctx: ManagementContext,
  principal: Principal,
  applicationId: number,
  campaignId: number,
  query: ReferralListQuery,
  withTotal: boolean,
) {
  await requireApplication(ctx.db, principal, applicationId, 'read');
  await requireCampaign(ctx, applicationId, campaignId);
  const w = new Conditions([applicationId, campaignId]);
  if (query.code !== undefined) w.add(`${FOLDED('code')} LIKE ${w.p(`%${foldCode(query.code)}%`)}`);
  if (query.createdBefore) w.add(`created < ${w.p(query.createdBefore)}::timestamptz`);
  if (query.createdAfter) w.add(`created > ${w.p(query.createdAfter)}::timestamptz`);
  validity(w, query.valid, ctx.clock.now().toISOString());
  usability(w, query.usable);
  if (query.advocate !== undefined) w.add(`advocate_profile_integration_id = ${w.p(query.advocate)}`);
  return listPage(
    ctx.db,
    { from: `FROM referrals WHERE application_id = $1 AND campaign_id = $2${w.sql}`, params: w.params, query, sortable: SORTABLE, withTotal },
    referralView,
  );
}

/** GET .../referrals: a page of the campaign's referrals with the total. */
export const listReferrals = (ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, query: ReferralListQuery) =>
  listReferralsPage(ctx, principal, applicationId, campaignId, query, true);

/** GET .../referrals/no_total: a page and whether more follow. */
export const listReferralsWithoutTotal = (ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, query: ReferralListQuery) =>
  listReferralsPage(ctx, principal, applicationId, campaignId, query, false);

/** DELETE .../referrals/{referralId}: the path parameter is a string; one that is no referral ID of the campaign is a 404. */
export async function deleteReferral(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, referralId: string): Promise<void> {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  await requireCampaign(ctx, applicationId, campaignId);
  // Checked here so that a value bigint cannot hold is a 404 like any other unknown ID, not a database error.
  if (!/^[0-9]{1,18}$/.test(referralId)) throw notFound('Referral', '/referralId');
  // Coupons that name the referral forget it in the same statement (referral_id has no foreign key).
  const rows = await ctx.db.query(
    `WITH d AS (DELETE FROM referrals WHERE id = $1::bigint AND application_id = $2 AND campaign_id = $3 RETURNING id),
     c AS (UPDATE coupons SET referral_id = NULL WHERE application_id = $2 AND referral_id IN (SELECT id FROM d))
     SELECT id FROM d`,
    [referralId, applicationId, campaignId],
  );
  if (rows.length === 0) throw notFound('Referral', '/referralId');
}
