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
