// Builders for promotion tests: campaigns with rulesets, and coupons and referrals stored directly
// (the Management API for coupons arrives with its own issue).
import type { Db } from '../../services/store/index.js';
import { unwrap, type ManagementClient } from '../../sdk/index.js';
import { newCampaign } from './fixtures.js';

export const rule = (condition: unknown, effects: unknown[], title = 'rule') => ({ title, condition, effects });

/** A campaign in the Application with one active ruleset of the given rules. */
export async function addCampaign(
  admin: ManagementClient,
  applicationId: number,
  rules: unknown[],
  overrides: Record<string, unknown> = {},
): Promise<number> {
  const campaign = unwrap(
    await admin.POST('/v1/applications/{applicationId}/campaigns', {
      params: { path: { applicationId } },
      body: newCampaign(overrides) as never,
    }),
  );
  unwrap(
    await admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets', {
      params: { path: { applicationId, campaignId: campaign.id } },
      body: { rules, bindings: [], activate: true } as never,
    }),
  );
  return campaign.id;
}

export interface CouponRow {
  value: string;
  usageLimit?: number;
  usageCounter?: number;
  discountLimit?: number;
  startDate?: string;
  expiryDate?: string;
  recipientIntegrationId?: string;
  limits?: unknown[];
  attributes?: Record<string, unknown>;
}

export async function insertCoupon(db: Db, applicationId: number, campaignId: number, c: CouponRow): Promise<number> {
  const [row] = await db.query<{ id: number }>(
    `INSERT INTO coupons (application_id, campaign_id, value, usage_limit, usage_counter, discount_limit, start_date, expiry_date,
       recipient_integration_id, limits, attributes)
     VALUES ($1, $2, $3, $4, $5, $6::numeric, $7, $8, $9, $10::jsonb, $11::jsonb) RETURNING id`,
    [
      applicationId,
      campaignId,
      c.value,
      c.usageLimit ?? 0,
      c.usageCounter ?? 0,
      String(c.discountLimit ?? 0),
      c.startDate ?? null,
      c.expiryDate ?? null,
      c.recipientIntegrationId ?? '',
      JSON.stringify(c.limits ?? []),
      JSON.stringify(c.attributes ?? {}),
    ],
  );
  return Number(row!.id);
}

export async function couponCounters(db: Db, id: number): Promise<{ usageCounter: number; discountCounter: number }> {
  const [row] = await db.query<{ usage_counter: number; discount_counter: string }>(`SELECT usage_counter, discount_counter FROM coupons WHERE id = $1`, [id]);
  return { usageCounter: row!.usage_counter, discountCounter: Number(row!.discount_counter) };
}

export const hoursFromNow = (h: number) => new Date(Date.now() + h * 3600_000).toISOString();

/** Effect types with their rejection reasons, e.g. `rejectCoupon:CouponNotFound`. */
export const effectSummary = (effects: Array<{ effectType: string; props: Record<string, unknown> }>) =>
  effects.map((e) => (e.props.rejectionReason ? `${e.effectType}:${String(e.props.rejectionReason)}` : e.effectType));

/** A campaign's statistics as the Management API shows them. */
export async function campaignStats(admin: ManagementClient, applicationId: number, campaignId: number) {
  const c = unwrap(await admin.GET('/v1/applications/{applicationId}/campaigns/{campaignId}', { params: { path: { applicationId, campaignId } } }));
  return {
    couponRedemptionCount: c.couponRedemptionCount,
    referralRedemptionCount: c.referralRedemptionCount,
    discountCount: c.discountCount,
    discountEffectCount: c.discountEffectCount,
    couponCreationCount: c.couponCreationCount,
  };
}
