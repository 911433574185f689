// Coupons and referrals the session carries (rules.md sections 4 and 6): which are valid for
// which campaign before evaluation, and the rejection reasons of those that are not.
import type { CouponFact, EvaluationInput, ReferralFact } from './types.js';
import { parseTime } from './values.js';

export const CouponReason = {
  notFound: 'CouponNotFound',
  expired: 'CouponExpired',
  startInFuture: 'CouponStartDateInFuture',
  limitReached: 'CouponLimitReached',
  notRunning: 'CouponPartOfNotRunningCampaign',
  notTriggered: 'CouponPartOfNotTriggeredCampaign',
  recipient: 'CouponRecipientDoesNotMatch',
  rejectedByCondition: 'CouponRejectedByCondition',
  reservationRequired: 'CouponReservationRequired',
  campaignLimit: 'CampaignLimitReached',
  profileLimit: 'ProfileLimitReached',
  profileRequired: 'ProfileRequired',
  effectFailed: 'EffectCouldNotBeApplied',
} as const;

export const ReferralReason = {
  notFound: 'ReferralNotFound',
  expired: 'ReferralExpired',
  startInFuture: 'ReferralStartDateInFuture',
  limitReached: 'ReferralLimitReached',
  notRunning: 'ReferralPartOfNotRunningCampaign',
  notTriggered: 'ReferralPartOfNotTriggeredCampaign',
  recipient: 'ReferralRecipientDoesNotMatch',
  rejectedByCondition: 'ReferralRejectedByCondition',
  sameAsAdvocate: 'ReferralRecipientIdSameAsAdvocate',
  alreadyReferred: 'ReferralCustomerAlreadyReferred',
  advocateNotFound: 'AdvocateNotFound',
} as const;

export interface Rejection {
  campaignId: number;
  value: string;
  reason: string;
}

export interface CouponCheck {
  /** The valid coupon of each campaign (the first one sent). */
  byCampaign: Map<number, CouponFact>;
  rejections: Rejection[];
}

const expired = (expiry: string | undefined, now: number) => {
  if (!expiry) return false;
  const t = parseTime(expiry);
  return t !== undefined && t > 0 && t <= now;
};
const notStarted = (start: string | undefined, now: number) => {
  if (!start) return false;
  const t = parseTime(start);
  return t !== undefined && t > now;
};

const NONE: CouponCheck = { byCampaign: new Map(), rejections: [] };

export function checkCoupons(input: EvaluationInput, candidates: () => ReadonlySet<number>): CouponCheck {
  const codes = (input.session as { CouponCodes?: unknown }).CouponCodes;
  if (!Array.isArray(codes) || codes.length === 0) return NONE;
  const facts = input.facts?.coupons ?? [];
  const now = parseTime(input.now) ?? 0;
  const profile = String((input.session as { ProfileId?: unknown }).ProfileId ?? '');
  const byCampaign = new Map<number, CouponFact>();
  const rejections: Rejection[] = [];
  const seen: string[] = [];
  for (const raw of codes) {
    if (typeof raw !== 'string' || seen.includes(raw)) continue;
    seen.push(raw);
    const fact = facts.find((f) => (f.code ?? f.value) === raw);
    const reject = (reason: string) => rejections.push({ campaignId: fact?.campaignId ?? 0, value: fact?.value ?? raw, reason });
    if (!fact) reject(CouponReason.notFound);
    else if (!candidates().has(fact.campaignId)) reject(CouponReason.notRunning);
    else if (notStarted(fact.startDate, now)) reject(CouponReason.startInFuture);
    else if (expired(fact.expiryDate, now)) reject(CouponReason.expired);
    else if (fact.usageLimit > 0 && fact.usageCounter >= fact.usageLimit) reject(CouponReason.limitReached);
    else if (fact.recipientIntegrationId && fact.recipientIntegrationId !== profile) reject(CouponReason.recipient);
    else if (fact.reservationRequired) reject(CouponReason.reservationRequired);
    else if (byCampaign.has(fact.campaignId)) reject(CouponReason.rejectedByCondition);
    else byCampaign.set(fact.campaignId, fact);
  }
  return { byCampaign, rejections };
}

export interface ReferralCheck {
  valid?: ReferralFact;
  rejection?: Rejection;
}

export function checkReferral(input: EvaluationInput, candidates: () => ReadonlySet<number>): ReferralCheck {
  const code = (input.session as { ReferralCode?: unknown }).ReferralCode;
  if (typeof code !== 'string' || code === '') return {};
  const fact = input.facts?.referral;
  const now = parseTime(input.now) ?? 0;
  const profile = String((input.session as { ProfileId?: unknown }).ProfileId ?? '');
  const reject = (reason: string): ReferralCheck => ({ rejection: { campaignId: fact?.campaignId ?? 0, value: fact?.code ?? code, reason } });
  if (!fact || fact.code !== code) return reject(ReferralReason.notFound);
  if (!candidates().has(fact.campaignId)) return reject(ReferralReason.notRunning);
  if (notStarted(fact.startDate, now)) return reject(ReferralReason.startInFuture);
  if (expired(fact.expiryDate, now)) return reject(ReferralReason.expired);
  if (fact.usageLimit > 0 && fact.usageCounter >= fact.usageLimit) return reject(ReferralReason.limitReached);
  if (fact.advocateMissing) return reject(ReferralReason.advocateNotFound);
  if (fact.advocateProfileIntegrationId === profile) return reject(ReferralReason.sameAsAdvocate);
  if (fact.friendProfileIntegrationId && fact.friendProfileIntegrationId !== profile) return reject(ReferralReason.recipient);
  if (fact.alreadyReferred) return reject(ReferralReason.alreadyReferred);
  return { valid: fact };
}
