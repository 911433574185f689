// Campaign evaluation (rules.md section 6) and money (section 5): pure, snapshot in, effects out.
import { compileRuleset, type CompiledRuleset } from './compile.js';
import type { RawEffect } from './effects.js';
import { currencyDigits, fromMinor, toMinor } from './money.js';
import { checkCoupons, checkReferral, CouponReason, ReferralReason, type Rejection } from './redemptions.js';
import { FailedBinding, tick, type Budget, type Env, type EvalContext } from './runtime.js';
import {
  EvalError,
  type LimitFact,
  type CampaignInput,
  type Effect,
  type EvaluationFacts,
  type EvaluationInput,
  type EvaluationResult,
  type RuleFailureReason,
  type RulesetSpec,
} from './types.js';

const byObject = new WeakMap<RulesetSpec, CompiledRuleset>();
const byId = new Map<number, { text: string; compiled: CompiledRuleset }>();
const MAX_CACHED = 10_000;

/**
 * The compiled form of a campaign's ruleset. In one process the snapshot hands the same ruleset
 * object every time (a WeakMap hit); a worker receives copies, so it keys by ruleset id and checks
 * the content, which also keeps a changed ruleset from ever hitting a stale entry.
 */
export function compiledFor(campaign: Pick<CampaignInput, 'rulesetId' | 'ruleset'>): CompiledRuleset {
  const hit = byObject.get(campaign.ruleset);
  if (hit) return hit;
  const text = JSON.stringify(campaign.ruleset);
  const cached = byId.get(campaign.rulesetId);
  let compiled: CompiledRuleset;
  if (cached && cached.text === text) compiled = cached.compiled;
  else {
    compiled = compileRuleset(campaign.ruleset);
    if (byId.size >= MAX_CACHED) byId.clear();
    byId.set(campaign.rulesetId, { text, compiled });
  }
  byObject.set(campaign.ruleset, compiled);
  return compiled;
}

interface CampaignOutcome {
  campaign: CampaignInput;
  /** The first fired rule whose condition found couponValid / referralValid true. */
  couponRule?: { ruleIndex: number; ruleName: string };
  referralRule?: { ruleIndex: number; ruleName: string };
  /** Lost to another exclusive campaign. */
  lost?: boolean;
  /** Every effect of the coupon's rule failed. */
  couponEffectsFailed?: boolean;
  effects: Array<RawEffect & { ruleIndex: number; ruleName: string; effectIndex: number }>;
  reasons: RuleFailureReason[];
}

const DISCOUNT_TYPES = new Set(['setDiscount', 'setDiscountPerItem', 'setDiscountPerAdditionalCost']);

/** Evaluates a binding into the roots; a failure is kept and rethrown where the binding is used. */
function bind(name: string, fn: (e: Env) => unknown, e: Env): void {
  try {
    e.roots[name] = fn(e);
  } catch (err) {
    if (!(err instanceof EvalError)) throw err;
    e.roots[name] = new FailedBinding(err);
  }
}

function failure(campaign: CampaignInput, ruleIndex: number, ruleName: string, details: string, effectIndex?: number): RuleFailureReason {
  return {
    campaignId: campaign.id,
    campaignName: campaign.name,
    rulesetId: campaign.rulesetId,
    ruleIndex,
    ruleName,
    ...(effectIndex !== undefined ? { effectIndex } : {}),
    details,
  };
}

const BUDGET = 'evaluation budget exceeded';

const campaignRoots = new WeakMap<CampaignInput, Record<string, unknown>>();
const applicationRoots = new WeakMap<EvaluationInput['application'], Record<string, unknown>>();

/** The Application root; made once per application object (the snapshot hands the same one). */
function applicationRootOf(a: EvaluationInput['application']): Record<string, unknown> {
  let root = applicationRoots.get(a);
  if (!root) {
    root = { Id: a.id, Currency: a.currency, Timezone: a.timezone, Attributes: a.attributes };
    applicationRoots.set(a, root);
  }
  return root;
}

/** The Campaign root; made once per campaign object (the snapshot hands the same objects). */
function campaignRootOf(campaign: CampaignInput): Record<string, unknown> {
  let root = campaignRoots.get(campaign);
  if (!root) {
    root = { Id: campaign.id, Name: campaign.name, Tags: campaign.tags, Attributes: campaign.attributes };
    campaignRoots.set(campaign, root);
  }
  return root;
}

function runCampaign(campaign: CampaignInput, base: Record<string, unknown>, input: EvaluationInput, budget: Budget, serial: { n: number }): CampaignOutcome {
  const outcome: CampaignOutcome = { campaign, effects: [], reasons: [] };
  let compiled: CompiledRuleset;
  try {
    compiled = compiledFor(campaign);
  } catch (e) {
    outcome.reasons.push(failure(campaign, -1, '', `ruleset does not compile: ${(e as Error).message}`));
    return outcome;
  }
  // The roots are shared by every campaign of the evaluation; a ruleset with bindings gets its own
  // copy so that its binding names never reach another campaign.
  const campaignRoot = campaignRootOf(campaign);
  const roots = compiled.bindings.length > 0 ? { ...base, Campaign: campaignRoot } : base;
  if (roots === base) base.Campaign = campaignRoot;
  const ctx: EvalContext = { input, campaign, serial, usedCoupon: false, usedReferral: false };
  const env: Env = { roots, frame: undefined, budget, timezone: input.application.timezone, ctx };
  for (const b of compiled.bindings) bind(b.name, b.fn, env);
  const rules = compiled.rules;
  let couponRuleIndex = -1;
  for (let ruleIndex = 0; ruleIndex < rules.length; ruleIndex++) {
    const rule = rules[ruleIndex]!;
    const ruleName = rule.title;
    let ruleEnv = env;
    if (rule.bindings.length > 0) {
      ruleEnv = { ...env, roots: { ...roots } };
      for (const b of rule.bindings) bind(b.name, b.fn, ruleEnv);
    }
    ctx.usedCoupon = false;
    ctx.usedReferral = false;
    try {
      tick(ruleEnv);
      const fired = rule.condition(ruleEnv);
      if (typeof fired !== 'boolean') throw new EvalError(`the condition must be a boolean, got ${fired === null ? 'null' : typeof fired}`);
      if (!fired) continue;
      if (ctx.usedCoupon && !outcome.couponRule) {
        outcome.couponRule = { ruleIndex, ruleName };
        couponRuleIndex = ruleIndex;
      }
      if (ctx.usedReferral) outcome.referralRule ??= { ruleIndex, ruleName };
    } catch (e) {
      if (!(e instanceof EvalError)) throw e;
      outcome.reasons.push(failure(campaign, ruleIndex, ruleName, e.message));
      if (e.message === BUDGET) return outcome;
      continue;
    }
    let failed = 0;
    for (let effectIndex = 0; effectIndex < rule.effects.length; effectIndex++) {
      const out: RawEffect[] = [];
      try {
        rule.effects[effectIndex]!(ruleEnv, out);
      } catch (e) {
        if (!(e instanceof EvalError)) throw e;
        outcome.reasons.push(failure(campaign, ruleIndex, ruleName, e.message, effectIndex));
        if (e.message === BUDGET) return outcome;
        failed++;
        continue;
      }
      for (const o of out) outcome.effects.push({ effectType: o.effectType, props: o.props, ruleIndex, ruleName, effectIndex });
    }
    // The rule that accepted the coupon could apply none of its effects: the coupon is not used.
    if (ruleIndex === couponRuleIndex && failed > 0 && failed === rule.effects.length) outcome.couponEffectsFailed = true;
  }
  return outcome;
}

const discountSum = (o: CampaignOutcome): number =>
  o.effects.filter((e) => DISCOUNT_TYPES.has(e.effectType)).reduce((s, e) => s + (e.props.value as number), 0);

/** Picks the campaigns whose effects count, by the Application's priority and strategy. */
function select(outcomes: CampaignOutcome[], input: EvaluationInput): CampaignOutcome[] {
  if (input.application.campaignPriority !== 'exclusive') return outcomes;
  const fired = outcomes.filter((o) => o.effects.length > 0);
  if (fired.length === 0) return outcomes;
  let winner = fired[0]!;
  const strategy = input.application.exclusiveCampaignsStrategy;
  if (strategy !== 'listOrder') {
    for (const o of fired.slice(1)) {
      const better = strategy === 'lowestDiscount' ? discountSum(o) < discountSum(winner) : discountSum(o) > discountSum(winner);
      if (better) winner = o;
    }
  }
  // Losing campaigns keep their failure reasons but emit nothing.
  return outcomes.map((o) => (o === winner ? o : { ...o, effects: [], lost: true }));
}

interface Ledger {
  digits: number;
  session: number;
  /** Remaining amount per item position and per additional cost, filled when first needed. */
  items?: Map<number, number>;
  costs?: Map<string, number>;
  input: EvaluationInput;
}

/**
 * Rounds discounts to the currency's minor unit and caps them so that nothing goes negative; a
 * capped effect carries the requested amount as desiredValue. A discount that is negative is an
 * error of the rule, not a surcharge.
 */
function applyMoney(effect: RawEffect, ledger: Ledger, limit = Infinity): Record<string, unknown> {
  const requested = toMinor(effect.props.value as number, ledger.digits);
  if (requested < 0) throw new EvalError('a discount must not be negative');
  let cap = Math.min(ledger.session, limit);
  let item: number | undefined;
  let cost: string | undefined;
  if (effect.effectType === 'setDiscountPerItem') {
    item = effect.props.position as number;
    const left = itemsOf(ledger).get(item);
    if (left === undefined) throw new EvalError(`no cart item at position ${item}`);
    cap = Math.min(cap, left);
  } else if (effect.effectType === 'setDiscountPerAdditionalCost') {
    cost = effect.props.additionalCost as string;
    const left = costsOf(ledger).get(cost);
    if (left === undefined) throw new EvalError(`no additional cost ${JSON.stringify(cost)}`);
    cap = Math.min(cap, left);
  }
  const granted = Math.min(requested, Math.max(0, cap));
  ledger.session -= granted;
  if (item !== undefined) ledger.items!.set(item, ledger.items!.get(item)! - granted);
  if (cost !== undefined) ledger.costs!.set(cost, ledger.costs!.get(cost)! - granted);
  // The props object is this evaluation's own (made by the effect): completed in place, since
  // copying it with a spread is slow for objects of many shapes.
  const props = effect.props;
  props.value = fromMinor(granted, ledger.digits);
  if (granted < requested) props.desiredValue = fromMinor(requested, ledger.digits);
  return props;
}

type SessionAmounts = {
  Total?: number;
  CartItems?: Array<{ Position?: number; Price?: number; Quantity?: number }>;
  AdditionalCosts?: Record<string, { Price?: number }>;
};

function ledgerOf(input: EvaluationInput): Ledger {
  const digits = currencyDigits(input.application.currency);
  return { digits, session: toMinor((input.session as SessionAmounts).Total ?? 0, digits), input };
}

function itemsOf(ledger: Ledger): Map<number, number> {
  if (!ledger.items) {
    ledger.items = new Map();
    for (const [i, it] of ((ledger.input.session as SessionAmounts).CartItems ?? []).entries()) {
      ledger.items.set(it.Position ?? i, toMinor((it.Price ?? 0) * (it.Quantity ?? 1), ledger.digits));
    }
  }
  return ledger.items;
}

function costsOf(ledger: Ledger): Map<string, number> {
  if (!ledger.costs) {
    ledger.costs = new Map();
    for (const [k, v] of Object.entries((ledger.input.session as SessionAmounts).AdditionalCosts ?? {})) ledger.costs.set(k, toMinor(v.Price ?? 0, ledger.digits));
  }
  return ledger.costs;
}

const NO_LIMITS: Array<LimitFact & { left: number }> = [];

/** What is left of the limits in play, consumed as effects are emitted (rules.md 6.4). */
class Limits {
  private readonly left: Array<LimitFact & { left: number }>;
  constructor(facts: readonly LimitFact[] | undefined) {
    this.left = facts && facts.length > 0 ? facts.map((f) => ({ ...f, left: f.remaining })) : NO_LIMITS;
  }

  private of(campaignId: number, action: string, coupon?: string): Array<LimitFact & { left: number }> {
    if (this.left.length === 0) return NO_LIMITS;
    return this.left.filter((l) => l.campaignId === campaignId && l.action === action && (l.couponValue === undefined || l.couponValue === coupon));
  }

  /** The most an amount-limited action may still give (Infinity when no limit applies). */
  room(campaignId: number, action: string, coupon?: string): number {
    return this.of(campaignId, action, coupon).reduce((m, l) => Math.min(m, l.left), Infinity);
  }

  /** The limit an action of `amount` would exceed, if any. */
  blocking(campaignId: number, action: string, amount: number, coupon?: string): (LimitFact & { left: number }) | undefined {
    return this.of(campaignId, action, coupon).find((l) => l.left < amount);
  }

  /** A limit of the action counts per profile, so an anonymous session cannot use it. */
  needsProfile(campaignId: number, action: string, coupon?: string): boolean {
    return this.of(campaignId, action, coupon).some((l) => l.perProfile);
  }

  consume(campaignId: number, action: string, amount: number, coupon?: string): void {
    for (const l of this.of(campaignId, action, coupon)) l.left -= amount;
  }
}

const COUNTED: Record<string, string> = {
  couponCreated: 'createCoupon',
  referralCreated: 'createReferral',
};

/**
 * A limit per profile, of the campaign or of one coupon (whose own limits are per profile), is
 * ProfileLimitReached; other limits of a coupon, its own; of the campaign, CampaignLimitReached.
 */
const limitReason = (l: LimitFact, kind: 'Coupon' | 'Referral' | 'Effect'): string =>
  l.perProfile ? 'ProfileLimitReached' : l.couponValue !== undefined ? (kind === 'Referral' ? 'ReferralLimitReached' : 'CouponLimitReached') : 'CampaignLimitReached';

const profileOf = (input: EvaluationInput): string => String((input.session as { ProfileId?: unknown }).ProfileId ?? '');

const noCoupon = new FailedBinding(new EvalError('the session carries no valid coupon of this campaign'));
const noReferral = new FailedBinding(new EvalError('the session carries no valid referral of this campaign'));

/** Evaluates the candidate campaigns of one session, event or profile update. */
export function evaluate(input: EvaluationInput): EvaluationResult {
  const budget: Budget = { deadline: performance.now() + (input.budgetMs ?? 50), ticks: 0 };
  const base: Record<string, unknown> = {
    Session: input.session,
    Profile: input.profile,
    Event: input.event,
    Application: applicationRootOf(input.application),
    Now: input.now,
  };
  let ids: Set<number> | undefined;
  const candidates = () => (ids ??= new Set(input.campaigns.map((c) => c.id)));
  const coupons = checkCoupons(input, candidates);
  const referral = checkReferral(input, candidates);
  const serial = { n: 0 };
  const outcomes = select(
    input.campaigns.map((c) => {
      const coupon = coupons.byCampaign.get(c.id);
      base.Coupon = coupon ? { Value: coupon.value, Attributes: coupon.attributes, UsageCounter: coupon.usageCounter, UsageLimit: coupon.usageLimit } : noCoupon;
      const r = referral.valid?.campaignId === c.id ? referral.valid : undefined;
      base.Referral = r
        ? { Code: r.code, AdvocateProfileIntegrationId: r.advocateProfileIntegrationId, FriendProfileIntegrationId: r.friendProfileIntegrationId ?? '', Attributes: r.attributes }
        : noReferral;
      return runCampaign(c, base, input, budget, serial);
    }),
    input,
  );
  // Amounts are read only when a discount is to be applied.
  let ledger: Ledger | undefined;
  const effects: Effect[] = [];
  const ruleFailureReasons: RuleFailureReason[] = [];
  const triggered = new Set<number>();
  const codeEffect = (campaignId: number, rulesetId: number, rule: { ruleIndex: number; ruleName: string } | undefined, effectType: string, props: Record<string, unknown>): Effect => ({
    campaignId,
    rulesetId,
    ruleIndex: rule?.ruleIndex ?? 0,
    ruleName: rule?.ruleName ?? '',
    effectType,
    props,
  });
  const reject = (r: Rejection, type: 'rejectCoupon' | 'rejectReferral') =>
    effects.push(codeEffect(r.campaignId, 0, undefined, type, { value: r.value, rejectionReason: r.reason }));
  const limits = new Limits(input.facts?.limits);
  const points = new LoyaltyRoom(input.facts?.loyalty);
  for (const r of coupons.rejections) reject(r, 'rejectCoupon');
  if (referral.rejection) reject(referral.rejection, 'rejectReferral');
  for (const o of outcomes) {
    for (const r of o.reasons) ruleFailureReasons.push(r);
    const c = o.campaign;
    const coupon = coupons.byCampaign.get(c.id);
    if (coupon) {
      if (o.lost) effects.push(codeEffect(c.id, c.rulesetId, undefined, 'rejectCoupon', { value: coupon.value, rejectionReason: CouponReason.notTriggered }));
      else if (o.couponRule) {
        const over = limits.blocking(c.id, 'redeemCoupon', 1, coupon.value);
        const reason = o.couponEffectsFailed
          ? CouponReason.effectFailed
          : limits.needsProfile(c.id, 'redeemCoupon', coupon.value) && profileOf(input) === ''
            ? CouponReason.profileRequired
            : over
              ? limitReason(over, 'Coupon')
              : undefined;
        if (reason) {
          effects.push(codeEffect(c.id, c.rulesetId, o.couponRule, 'rejectCoupon', { value: coupon.value, rejectionReason: reason }));
          o.couponRule = undefined;
          o.effects = [];
        } else {
          limits.consume(c.id, 'redeemCoupon', 1, coupon.value);
          effects.push(codeEffect(c.id, c.rulesetId, o.couponRule, 'acceptCoupon', { value: coupon.value }));
        }
      }
      else effects.push(codeEffect(c.id, c.rulesetId, undefined, 'rejectCoupon', { value: coupon.value, rejectionReason: CouponReason.rejectedByCondition }));
    }
    const ref = referral.valid?.campaignId === c.id ? referral.valid : undefined;
    if (ref) {
      if (o.lost) effects.push(codeEffect(c.id, c.rulesetId, undefined, 'rejectReferral', { value: ref.code, rejectionReason: ReferralReason.notTriggered }));
      else if (o.referralRule) {
        const over = limits.blocking(c.id, 'redeemReferral', 1);
        if (over) {
          effects.push(codeEffect(c.id, c.rulesetId, o.referralRule, 'rejectReferral', { value: ref.code, rejectionReason: limitReason(over, 'Referral') }));
          o.referralRule = undefined;
          o.effects = [];
        } else {
          limits.consume(c.id, 'redeemReferral', 1);
          effects.push(codeEffect(c.id, c.rulesetId, o.referralRule, 'acceptReferral', { value: ref.code }));
        }
      }
      else effects.push(codeEffect(c.id, c.rulesetId, undefined, 'rejectReferral', { value: ref.code, rejectionReason: ReferralReason.rejectedByCondition }));
    }
    // A coupon with a discount limit caps the discounts of its campaign at what remains of it.
    const accepted = coupon && o.couponRule && !o.lost ? coupon : undefined;
    const l0 = accepted?.discountLimit && accepted.discountLimit > 0 ? (ledger ??= ledgerOf(input)) : undefined;
    let remainder = l0 ? toMinor(accepted!.discountLimit! - (accepted!.discountCounter ?? 0), l0.digits) : Infinity;
    const couponValue = accepted?.value;
    for (const e of o.effects) {
      let props = e.props;
      const limitFailure = (l: LimitFact) => {
        ruleFailureReasons.push(failure(o.campaign, e.ruleIndex, e.ruleName, `${limitReason(l, 'Effect')}: limit of ${l.action} reached`, e.effectIndex));
      };
      // Counted effects: one each, or their amount (loyalty points).
      const counted = COUNTED[e.effectType] ?? (e.effectType === 'addLoyaltyPoints' ? 'addLoyaltyPoints' : undefined);
      if (counted) {
        const amount = counted === 'addLoyaltyPoints' ? (e.props.value as number) : 1;
        const over = limits.blocking(c.id, counted, amount, couponValue);
        if (over) {
          limitFailure(over);
          continue;
        }
        limits.consume(c.id, counted, amount, couponValue);
      }
      if (e.effectType === 'deductLoyaltyPoints') {
        const short = points.take(e.props);
        if (short) {
          ruleFailureReasons.push(failure(o.campaign, e.ruleIndex, e.ruleName, short, e.effectIndex));
          continue;
        }
      }
      if (DISCOUNT_TYPES.has(e.effectType)) {
        const overCount = limits.blocking(c.id, 'setDiscountEffect', 1, couponValue);
        if (overCount) {
          limitFailure(overCount);
          continue;
        }
        try {
          const l = (ledger ??= ledgerOf(input));
          // A discount budget (limit action setDiscount) caps like the coupon's discount limit.
          const budgetRoom = limits.room(c.id, 'setDiscount', couponValue);
          const budgetMinor = budgetRoom === Infinity ? Infinity : toMinor(budgetRoom, l.digits);
          if (budgetMinor <= 0) {
            limitFailure(limits.blocking(c.id, 'setDiscount', Number.MIN_VALUE, couponValue)!);
            continue;
          }
          props = applyMoney(e, l, Math.min(remainder, budgetMinor));
          const granted = toMinor(props.value as number, l.digits);
          remainder -= granted;
          limits.consume(c.id, 'setDiscount', props.value as number, couponValue);
          limits.consume(c.id, 'setDiscountEffect', 1, couponValue);
        } catch (err) {
          if (!(err instanceof EvalError)) throw err;
          ruleFailureReasons.push({
            campaignId: o.campaign.id,
            campaignName: o.campaign.name,
            rulesetId: o.campaign.rulesetId,
            ruleIndex: e.ruleIndex,
            ruleName: e.ruleName,
            effectIndex: e.effectIndex,
            details: err.message,
          });
          continue;
        }
      }
      effects.push({ campaignId: o.campaign.id, rulesetId: o.campaign.rulesetId, ruleIndex: e.ruleIndex, ruleName: e.ruleName, effectType: e.effectType, props });
      triggered.add(o.campaign.id);
    }
  }
  return { effects, ruleFailureReasons, triggeredCampaignIds: [...triggered] };
}

/**
 * What is left of each loyalty balance as the deductions of this evaluation take from it, in
 * effect order (as the commit will take them). Additions of the same evaluation are not counted:
 * they may start later, and a deduction must not rest on points that are not there yet.
 */
class LoyaltyRoom {
  private readonly taken = new Map<string, number>();
  constructor(private readonly facts: EvaluationFacts['loyalty']) {}

  /** Takes the deduction's points and returns nothing when they fit, else why they do not. */
  take(props: Record<string, unknown>): string | undefined {
    const fact = this.facts?.[String(props.programId)];
    if (!fact || fact.allowNegative) return undefined;
    const sub = typeof props.subLedgerId === 'string' ? props.subLedgerId : '';
    const key = `${String(props.programId)}|${sub}`;
    const value = props.value as number;
    const before = this.taken.get(key) ?? 0;
    const balance = Math.round(((sub === '' ? fact.balance : (fact.subledgers?.[sub] ?? 0)) - before) * 1e9) / 1e9;
    if (balance < value) {
      return `InsufficientLoyaltyPoints: deducting ${value} points of program ${String(props.programId)} needs an active balance of at least ${value}; it is ${balance}`;
    }
    this.taken.set(key, before + value);
    return undefined;
  }
}

/** Rough cost of an input: rules × cart lines (what makes an evaluation worth a worker thread). */
export function estimateCost(input: EvaluationInput): number {
  const lines = Math.max(1, ((input.session as { CartItems?: unknown[] }).CartItems ?? []).length);
  let rules = 0;
  for (const c of input.campaigns) rules += Array.isArray(c.ruleset?.rules) ? c.ruleset.rules.length : 1;
  return rules * lines;
}
