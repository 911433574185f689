// Coupon and referral codes as stored, and how coupons and referrals look in answers: shared by the
// Integration API (lookups, created coupons and referrals) and the Management API (created batches,
// lists), so that both store and show them the same way.
import { addExact } from '../shared/index.js';

/**
 * The code as the Application's caseSensitivity stores it: one unique index then keeps codes
 * unique under that setting, and a lookup normalizes the code entered the same way.
 */
export function normalizeCode(app: { caseSensitivity: string }, code: string): string {
  if (app.caseSensitivity === 'insensitive-uppercase') return code.toUpperCase();
  if (app.caseSensitivity === 'insensitive-lowercase') return code.toLowerCase();
  return code;
}

const iso = (v: unknown): string | undefined => (v == null ? undefined : v instanceof Date ? v.toISOString() : String(v));

export function couponView(r: Record<string, unknown>): Record<string, unknown> {
  const discountLimit = Number(r.discount_limit);
  return {
    id: Number(r.id),
    created: iso(r.created),
    campaignId: r.campaign_id,
    value: r.value,
    usageLimit: r.usage_limit,
    ...(discountLimit > 0 ? { discountLimit } : {}),
    reservationLimit: r.reservation_limit,
    ...(r.start_date ? { startDate: iso(r.start_date) } : {}),
    ...(r.expiry_date ? { expiryDate: iso(r.expiry_date) } : {}),
    limits: r.limits,
    usageCounter: r.usage_counter,
    discountCounter: Number(r.discount_counter),
    discountRemainder: discountLimit > 0 ? addExact(discountLimit, -Number(r.discount_counter)) : undefined,
    reservationCounter: r.reservation_counter,
    attributes: r.attributes,
    ...(r.referral_id ? { referralId: Number(r.referral_id) } : {}),
    recipientIntegrationId: r.recipient_integration_id || undefined,
    ...(r.import_id ? { importId: r.import_id } : {}),
    reservation: r.reservation,
    batchId: r.batch_id || undefined,
    isReservationMandatory: r.is_reservation_mandatory,
    // A visible coupon: implicitly soft-reserved for every customer (migration 010).
    implicitlyReserved: r.implicitly_reserved === true,
  };
}

export function referralView(r: Record<string, unknown>): Record<string, unknown> {
  return {
    id: Number(r.id),
    created: iso(r.created),
    campaignId: r.campaign_id,
    advocateProfileIntegrationId: r.advocate_profile_integration_id,
    ...(r.friend_profile_integration_id ? { friendProfileIntegrationId: r.friend_profile_integration_id } : {}),
    ...(r.start_date ? { startDate: iso(r.start_date) } : {}),
    ...(r.expiry_date ? { expiryDate: iso(r.expiry_date) } : {}),
    code: r.code,
    usageCounter: r.usage_counter,
    usageLimit: r.usage_limit,
    attributes: r.attributes,
    ...(r.batch_id ? { batchId: r.batch_id } : {}),
  };
}
