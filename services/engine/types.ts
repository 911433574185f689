// The engine's public shapes: rulesets in, effects and failure reasons out. Messages to the
// worker pool carry EvaluationInput and EvaluationResult as they are (plain, structured-cloneable).

export interface BindingSpec {
  name: string;
  expression: unknown;
}

export interface RuleSpec {
  title: string;
  description?: string;
  bindings?: BindingSpec[];
  condition: unknown;
  effects: unknown[];
}

export interface RulesetSpec {
  rules: RuleSpec[];
  bindings: BindingSpec[];
}

export interface CodeSettings {
  /** Each `#` is replaced by a character of validCharacters. */
  couponPattern?: string;
  validCharacters?: string[];
}

export interface CampaignInput {
  id: number;
  name: string;
  tags: string[];
  attributes: Record<string, unknown>;
  rulesetId: number;
  ruleset: RulesetSpec;
  /** Pattern of coupons created by createCoupon (default `####-####`, A-Z and 0-9). */
  couponSettings?: CodeSettings;
  referralSettings?: CodeSettings;
}

/** A coupon the session carries, as stored (codes not found have no fact). */
export interface CouponFact {
  id: number;
  /** The code as the session sent it (it may differ in case from the stored value). */
  code?: string;
  value: string;
  campaignId: number;
  usageCounter: number;
  /** 0 means no limit. */
  usageLimit: number;
  discountLimit?: number;
  discountCounter?: number;
  startDate?: string;
  expiryDate?: string;
  recipientIntegrationId?: string;
  attributes: Record<string, unknown>;
  /** A hard reservation exists and the session's profile does not hold it. */
  reservationRequired?: boolean;
}

export interface ReferralFact {
  id: number;
  code: string;
  campaignId: number;
  advocateProfileIntegrationId: string;
  friendProfileIntegrationId?: string;
  usageCounter: number;
  usageLimit: number;
  startDate?: string;
  expiryDate?: string;
  attributes: Record<string, unknown>;
  /** The session's profile was already referred in this campaign. */
  alreadyReferred?: boolean;
  /** The advocate's profile no longer exists. */
  advocateMissing?: boolean;
}

/**
 * A limit in play (campaign or coupon `limits`) with what is left of it in its current period
 * for the entities of this session, as the integration layer counted it. Actions: redeemCoupon,
 * redeemReferral, setDiscount (an amount), setDiscountEffect, createCoupon, createReferral,
 * addLoyaltyPoints (an amount).
 */
export interface LimitFact {
  campaignId: number;
  /** Set for a coupon's own limits. */
  couponValue?: string;
  action: string;
  remaining: number;
  /** The limit counts per profile (entities include Profile). */
  perProfile?: boolean;
}

/** What the engine needs to know beyond the roots; all optional. */
export interface EvaluationFacts {
  /** Makes generated codes and transaction ids reproducible (inline and pooled agree). */
  seed?: string;
  /** The session's coupon codes, in the order sent, resolved to stored coupons. */
  coupons?: CouponFact[];
  referral?: ReferralFact;
  audiences?: Record<string, { name: string }>;
  achievements?: Record<string, { name: string; target: number; progress: number }>;
  webhooks?: Record<string, { name: string }>;
  limits?: LimitFact[];
  /**
   * The loyalty programs the Application subscribes to, by program id: the balance that rules read
   * and effects change. When given, addLoyaltyPoints / deductLoyaltyPoints are checked against it
   * (a program not listed, a card-based program without the session's card, a deduction the
   * balance does not cover); without it (a bare engine call) they are emitted unchecked.
   */
  loyalty?: Record<string, LoyaltyFact>;
}

export interface LoyaltyFact {
  /**
   * The active balance of the ledger effects act on (the profile's, or the session's card's in a
   * card-based program), less its debt: negative only where the program allows it.
   */
  balance: number;
  subledgers?: Record<string, number>;
  /** Points live on cards; effects need `card`. */
  cardBased?: boolean;
  /** The identifier of the first active card of this program that the session names. */
  card?: string;
  /** A card of this program the session names that is blocked (when it names no active one). */
  blockedCard?: string;
  /** A deduction may take the balance below zero. */
  allowNegative?: boolean;
}

export type CampaignPriority = 'universal' | 'stackable' | 'exclusive';
export type ExclusiveStrategy = 'listOrder' | 'lowestDiscount' | 'highestDiscount';

export interface EvaluationInput {
  version: 1;
  application: {
    id: number;
    currency: string;
    timezone: string;
    attributes: Record<string, unknown>;
    campaignPriority: CampaignPriority;
    exclusiveCampaignsStrategy: ExclusiveStrategy;
  };
  /** Candidates, already filtered, in list order. */
  campaigns: CampaignInput[];
  /** The Session root (rules.md section 2). */
  session: Record<string, unknown>;
  /** The Profile root. */
  profile: Record<string, unknown>;
  event: { Type: string; Attributes: Record<string, unknown> };
  /** RFC 3339. */
  now: string;
  /** Evaluation budget of the whole input in ms (default 50). */
  budgetMs?: number;
  facts?: EvaluationFacts;
}

export interface Effect {
  campaignId: number;
  rulesetId: number;
  ruleIndex: number;
  ruleName: string;
  effectType: string;
  props: Record<string, unknown>;
}

export interface RuleFailureReason {
  campaignId: number;
  campaignName: string;
  rulesetId: number;
  ruleIndex: number;
  ruleName: string;
  /** Set when an effect (not the condition) failed. */
  effectIndex?: number;
  details: string;
}

export interface EvaluationResult {
  effects: Effect[];
  ruleFailureReasons: RuleFailureReason[];
  triggeredCampaignIds: number[];
}

/** A compile error: what is wrong, and where (JSON pointer into the ruleset). */
export interface RuleCompileIssue {
  message: string;
  pointer: string;
  ruleIndex?: number;
}

export class RuleCompileError extends Error {
  constructor(readonly errors: RuleCompileIssue[]) {
    super(errors.map((e) => `${e.pointer}: ${e.message}`).join('; '));
    this.name = 'RuleCompileError';
  }
}

/** A run-time error of an expression (missing data, type mismatch, division by zero, budget). */
export class EvalError extends Error {
  /** JSON pointer of the innermost node that failed, when compiled with tracing. */
  pointer?: string;

  constructor(message: string) {
    // Evaluation errors are data about the request, not bugs: a stack trace would only cost time
    // (capturing one is most of the price of an error).
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
    this.name = 'EvalError';
  }
}
