// Campaign statistics (couponRedemptionCount, discountCount, ...) change with every session close.
// Commits append their change to campaign_stat_deltas, which never makes two commits wait for each
// other; the changes are folded into the campaigns in the background and before every read.
import type { Queryable } from './db.js';

/**
 * Folds the appended statistics into their campaigns (all, or those of one Application). Safe to
 * run anywhere at any time: a delta is deleted by exactly one fold, which adds it.
 */
export async function foldCampaignStats(db: Queryable, applicationId?: number): Promise<void> {
  await db.query(
    `WITH d AS (
       DELETE FROM campaign_stat_deltas
        WHERE $1::int IS NULL OR campaign_id IN (SELECT id FROM campaigns WHERE application_id = $1::int)
       RETURNING *
     ), t AS (
       SELECT campaign_id, sum(coupons) AS coupons, sum(referrals) AS referrals, sum(discount) AS discount,
              sum(discount_effects) AS discount_effects, sum(created_coupons) AS created_coupons, max(last_activity) AS last_activity
         FROM d GROUP BY campaign_id
     )
     UPDATE campaigns c SET coupon_redemption_count = c.coupon_redemption_count + t.coupons,
       referral_redemption_count = c.referral_redemption_count + t.referrals, discount_count = c.discount_count + t.discount,
       discount_effect_count = c.discount_effect_count + t.discount_effects, coupon_creation_count = c.coupon_creation_count + t.created_coupons,
       last_activity = greatest(c.last_activity, t.last_activity)
      FROM t WHERE c.id = t.campaign_id`,
    [applicationId ?? null],
  );
}

/** A change of one campaign's statistics, appended as a delta and folded into the campaign later. */
export interface CampaignStatsDelta {
  campaignId: number;
  coupons: number;
  referrals: number;
  discount: number;
  discountEffects: number;
  createdCoupons: number;
}

/**
 * The columns of campaign_stat_deltas that statsDeltaSelect and statsDeltaSumSelect fill, in their
 * order: `INSERT INTO campaign_stat_deltas (${STATS_DELTA_COLUMNS}) ${statsDeltaSelect(...)}`.
 */
export const STATS_DELTA_COLUMNS = 'campaign_id, coupons, referrals, discount, discount_effects, created_coupons, last_activity';
const statsDeltaRecords = (json: string) =>
  `jsonb_to_recordset(${json}::jsonb) AS d("campaignId" int, coupons int, referrals int, discount numeric, "discountEffects" int, "createdCoupons" int)`;
/**
 * The SELECT that turns a JSON array of CampaignStatsDelta (SQL expression `json`) into rows of
 * campaign_stat_deltas, with `from` joined (a CTE that must have a row) and `at` as last activity.
 */
export function statsDeltaSelect(json: string, at: string, from = ''): string {
  return `SELECT d."campaignId", d.coupons, d.referrals, d.discount, d."discountEffects", d."createdCoupons", ${at}
       FROM ${from ? `${from}, ` : ''}${statsDeltaRecords(json)}`;
}
/**
 * statsDeltaSelect summed per campaign: the deltas of many commits of one statement as one row per
 * campaign (what foldCampaignStats makes of them is the same: sums, and the latest activity).
 */
export function statsDeltaSumSelect(json: string, at: string, from: string): string {
  return `SELECT d."campaignId", sum(d.coupons), sum(d.referrals), sum(d.discount), sum(d."discountEffects"), sum(d."createdCoupons"), max(${at})
       FROM ${from}, ${statsDeltaRecords(json)}
      GROUP BY d."campaignId"`;
}
export const statsDeltaRows = (stats: readonly CampaignStatsDelta[]): CampaignStatsDelta[] =>
  stats.map(({ campaignId, coupons, referrals, discount, discountEffects, createdCoupons }) => ({ campaignId, coupons, referrals, discount, discountEffects, createdCoupons }));
export const statsDeltaJson = (stats: readonly CampaignStatsDelta[]): string => JSON.stringify(statsDeltaRows(stats));
