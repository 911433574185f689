import { describe, expect, it } from 'vitest';
import { checkRuleset, evaluate, type CouponFact, type EvaluationInput, type ReferralFact, type RulesetSpec } from '../../services/engine/index.js';

const rule = (condition: unknown, effects: unknown[], title = 'r') => ({ title, condition, effects });
const ruleset = (...rules: ReturnType<typeof rule>[]): RulesetSpec => ({ rules, bindings: [] });
let nextId = 100;
const campaign = (rs: RulesetSpec, extra: Record<string, unknown> = {}) => {
  const id = nextId++;
  return { id, name: `c${id}`, tags: [], attributes: {}, rulesetId: 9000 + id, ruleset: rs, ...extra };
};

const input = (overrides: Partial<EvaluationInput> = {}, session: Record<string, unknown> = {}): EvaluationInput => ({
  version: 1,
  application: { id: 1, currency: 'EUR', timezone: 'Europe/Berlin', attributes: {}, campaignPriority: 'universal', exclusiveCampaignsStrategy: 'listOrder' },
  campaigns: [],
  session: { IntegrationId: 's1', ProfileId: 'alice', Total: 100, CartItems: [{ Sku: 'A', Price: 100, Quantity: 1, Position: 0 }], CouponCodes: [], ReferralCode: '', Attributes: {}, AdditionalCosts: {}, ...session },
  profile: { IntegrationId: 'alice', Attributes: {}, Audiences: [7] },
  event: { Type: 'service_session_updated', Attributes: {} },
  now: '2026-03-01T10:00:00Z',
  facts: { seed: 'seed-1' },
  ...overrides,
});

const coupon = (campaignId: number, overrides: Partial<CouponFact> = {}): CouponFact => ({
  id: 1,
  value: 'SAVE10',
  campaignId,
  usageCounter: 0,
  usageLimit: 1,
  attributes: { kind: 'welcome' },
  ...overrides,
});

const couponCampaign = () => campaign(ruleset(rule(['couponValid'], [['setDiscount', 'coupon', 10]], 'with coupon')));

describe('effects of rules.md section 4', () => {
  it('emits every effect with its props', () => {
    const c = campaign(
      ruleset(
        rule(true, [
          ['createCoupon', { usageLimit: 2, discountLimit: 50, expiryDuration: '30D' }],
          ['createReferral', { friendProfileIntegrationId: 'bob' }],
          ['addLoyaltyPoints', 3, 25, { name: 'purchase', subledgerId: 'sub', pendingDuration: '7D', expiryDuration: '1Y' }],
          ['deductLoyaltyPoints', 3, 5, { name: 'burn' }],
          ['increaseAchievementProgress', 11, 2],
          ['triggerWebhook', 5, { amount: ['.', 'Session', 'Total'] }],
          ['updateAttribute', 'Profile.Attributes.vip', true],
          ['addToAudience', 7],
          ['removeFromAudience', 8],
          ['showNotification', 'info', 'Hi', 'Welcome'],
          ['addFreeItem', 'GIFT', 'Gift'],
          ['customEffect', 'banner', { text: 'x' }],
        ]),
      ),
      { couponSettings: { couponPattern: 'WELCOME-###', validCharacters: ['A', 'B'] } },
    );
    const facts = {
      seed: 'seed-1',
      achievements: { '11': { name: 'Five orders', target: 5, progress: 4 } },
      webhooks: { '5': { name: 'CRM' } },
      audiences: { '7': { name: 'VIP' }, '8': { name: 'Churned' } },
    };
    const r = evaluate(input({ campaigns: [c], facts }));
    expect(r.ruleFailureReasons).toEqual([]);
    const byType = Object.fromEntries(r.effects.map((e) => [e.effectType, e.props]));
    expect(byType.couponCreated).toEqual({ value: expect.stringMatching(/^WELCOME-[AB]{3}$/), profileId: 'alice', usageLimit: 2, discountLimit: 50, expiryDate: '2026-03-31T09:00:00Z' }); // 30 calendar days in Berlin cross the switch to summer time
    expect(byType.referralCreated).toEqual({ value: expect.stringMatching(/^[A-Z0-9]{4}-[A-Z0-9]{4}$/), advocateProfileIntegrationId: 'alice', friendProfileIntegrationId: 'bob' });
    expect(byType.addLoyaltyPoints).toEqual({
      programId: 3,
      subLedgerId: 'sub',
      value: 25,
      recipientIntegrationId: 'alice',
      transactionUUID: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/),
      startDate: '2026-03-08T10:00:00Z',
      expiryDate: '2027-03-01T10:00:00Z',
      name: 'purchase',
    });
    expect(byType.deductLoyaltyPoints).toEqual({ programId: 3, subLedgerId: '', value: 5, transactionUUID: expect.any(String), name: 'burn' });
    expect(byType.increaseAchievementProgress).toEqual({ achievementId: 11, achievementName: 'Five orders', delta: 2, value: 6, target: 5, isJustCompleted: true });
    expect(byType.triggerWebhook).toEqual({ webhookId: 5, webhookName: 'CRM', params: { amount: 100 } });
    expect(byType.updateAttribute).toEqual({ path: 'Profile.Attributes.vip', value: true });
    expect(byType.addToAudience).toEqual({ audienceId: 7, audienceName: 'VIP', profileIntegrationId: 'alice' });
    expect(byType.removeFromAudience).toEqual({ audienceId: 8, audienceName: 'Churned', profileIntegrationId: 'alice' });
    expect(byType.showNotification).toEqual({ notificationType: 'info', title: 'Hi', body: 'Welcome' });
    expect(byType.addFreeItem).toEqual({ sku: 'GIFT', name: 'Gift' });
    expect(byType.customEffect).toEqual({ name: 'banner', payload: { text: 'x' } });
  });

  it('makes the same codes and ids for the same seed, and others for another', () => {
    const c = campaign(ruleset(rule(true, [['createCoupon', {}], ['createCoupon', {}], ['addLoyaltyPoints', 1, 1]])));
    const a = evaluate(input({ campaigns: [c] })).effects.map((e) => e.props.value ?? e.props.transactionUUID);
    const b = evaluate(input({ campaigns: [c] })).effects.map((e) => e.props.value ?? e.props.transactionUUID);
    const other = evaluate(input({ campaigns: [c], facts: { seed: 'seed-2' } })).effects.map((e) => e.props.value);
    expect(a).toEqual(b);
    expect(a[0]).not.toBe(a[1]);
    expect(other[0]).not.toBe(a[0]);
  });

  it('records effects whose facts are missing as failures', () => {
    const c = campaign(ruleset(rule(true, [['increaseAchievementProgress', 99, 1], ['triggerWebhook', 98], ['addToAudience', 97], ['addLoyaltyPoints', 1, -5]])));
    const r = evaluate(input({ campaigns: [c] }));
    expect(r.effects).toEqual([]);
    expect(r.ruleFailureReasons.map((f) => [f.effectIndex, f.details])).toEqual([
      [0, 'unknown achievement 99'],
      [1, 'unknown webhook 98'],
      [2, 'unknown audience 97'],
      [3, 'points must be positive, got -5'],
    ]);
  });

  it('refuses malformed effects when the ruleset is created', () => {
    const issues = checkRuleset(ruleset(rule(true, [['updateAttribute', 'Cart.x', 1], ['createCoupon', 5], ['addLoyaltyPoints', true, 1], ['addLoyaltyPoints', 1, 1, { expiryDuration: '7X' }]])));
    expect(issues.map((i) => i.pointer)).toEqual(['/rules/0/effects/0/1', '/rules/0/effects/1/1', '/rules/0/effects/2/1']);
  });
});

describe('loyalty effects checked against the loyalty facts', () => {
  const loyalty = {
    '1': { balance: 60 },
    '2': { balance: 20, cardBased: true, card: 'CARD-1' },
    '3': { balance: 0, cardBased: true, blockedCard: 'CARD-9' },
    '4': { balance: 0, cardBased: true },
    '5': { balance: -5, allowNegative: true },
  };
  const run = (effects: unknown[], session: Record<string, unknown> = {}) =>
    evaluate(input({ campaigns: [campaign(ruleset(rule(true, effects)))], facts: { seed: 's', loyalty } }, session));
  const why = (r: ReturnType<typeof evaluate>) => r.ruleFailureReasons.map((f) => [f.effectIndex, f.details.split(':')[0]]);

  it('acts on the card of a card-based program, and refuses the program without an active card', () => {
    const r = run([['addLoyaltyPoints', 2, 5], ['addLoyaltyPoints', 3, 5], ['deductLoyaltyPoints', 4, 5], ['addLoyaltyPoints', 9, 5]]);
    expect(r.effects.map((e) => [e.effectType, e.props.programId, e.props.cardIdentifier])).toEqual([['addLoyaltyPoints', 2, 'CARD-1']]);
    expect(why(r)).toEqual([
      [1, 'LoyaltyCardBlocked'],
      [2, 'LoyaltyCardRequired'],
      [3, 'LoyaltyProgramNotFound'],
    ]);
  });

  it('refuses deductions past the balance in effect order, unless the program allows a negative balance', () => {
    const r = run([['deductLoyaltyPoints', 1, 40], ['deductLoyaltyPoints', 1, 30], ['deductLoyaltyPoints', 1, 20], ['deductLoyaltyPoints', 5, 100], ['deductLoyaltyPoints', 2, 25]]);
    expect(r.effects.map((e) => [e.props.programId, e.props.value])).toEqual([
      [1, 40],
      [1, 20],
      [5, 100],
    ]);
    expect(why(r)).toEqual([
      [1, 'InsufficientLoyaltyPoints'],
      [4, 'InsufficientLoyaltyPoints'],
    ]);
  });

  it('refuses a subledger too long to be part of a ledger key', () => {
    const r = run([
      ['addLoyaltyPoints', 1, 5, { subledgerId: 'x'.repeat(1001) }],
      ['deductLoyaltyPoints', 1, 5, { subledgerId: '\u{1F600}'.repeat(501) }],
      ['addLoyaltyPoints', 1, 5, { subledgerId: 'é'.repeat(1000) }],
    ]);
    expect(r.effects.map((e) => (e.props.subLedgerId as string).length)).toEqual([1000]);
    expect(r.ruleFailureReasons.map((f) => [f.effectIndex, f.details])).toEqual([
      [0, expect.stringContaining('subledgerId must be at most 1000 characters and 2000 bytes')],
      [1, expect.stringContaining('subledgerId must be at most 1000 characters and 2000 bytes')],
    ]);
  });

  it('needs a profile for a profile-based program', () => {
    const r = run([['addLoyaltyPoints', 1, 5], ['addLoyaltyPoints', 2, 5]], { ProfileId: '' });
    expect(r.effects.map((e) => e.props.programId)).toEqual([2]);
    expect(why(r)).toEqual([[0, 'ProfileRequired']]);
  });
});

describe('domain operators', () => {
  it('reads audiences and loyalty balances', () => {
    const c = campaign(
      ruleset(
        rule(['inAudience', 7], [['setDiscount', 'vip', 1]], 'vip'),
        rule(['inAudience', 8], [['setDiscount', 'never', 1]], 'other'),
        rule(['>=', ['loyaltyBalance', 3], 100], [['setDiscount', 'rich', 1]], 'balance'),
        rule(['=', ['loyaltyBalance', 3, 'sub'], 40], [['setDiscount', 'sub', 1]], 'subledger'),
        rule(['=', ['loyaltyBalance', 4], 0], [['setDiscount', 'joined later', 1]], 'no program'),
      ),
    );
    const r = evaluate(input({ campaigns: [c], facts: { loyalty: { '3': { balance: 120, subledgers: { sub: 40 } } } } }));
    expect(r.effects.map((e) => e.props.name)).toEqual(['vip', 'rich', 'sub', 'joined later']);
  });
});

describe('coupons', () => {
  const reasonOf = (fact: Partial<CouponFact> | undefined, session: Record<string, unknown> = {}, campaigns = [couponCampaign()]) => {
    const c = campaigns[0]!;
    const facts = fact ? { coupons: [coupon(c.id, fact)] } : { coupons: [] };
    const r = evaluate(input({ campaigns, facts }, { CouponCodes: ['SAVE10'], ...session }));
    return r.effects.filter((e) => e.effectType === 'rejectCoupon' || e.effectType === 'acceptCoupon').map((e) => e.props.rejectionReason ?? e.effectType);
  };

  it('accepts a valid coupon used by a firing rule, before its discount', () => {
    const c = couponCampaign();
    const r = evaluate(input({ campaigns: [c], facts: { coupons: [coupon(c.id)] } }, { CouponCodes: ['SAVE10'] }));
    expect(r.effects.map((e) => [e.effectType, e.props])).toEqual([
      ['acceptCoupon', { value: 'SAVE10' }],
      ['setDiscount', { name: 'coupon', value: 10 }],
    ]);
    expect(r.effects[0]).toMatchObject({ campaignId: c.id, ruleIndex: 0, ruleName: 'with coupon' });
  });

  it('gives each rejection reason', () => {
    expect(reasonOf(undefined)).toEqual(['CouponNotFound']);
    expect(reasonOf({ startDate: '2026-04-01T00:00:00Z' })).toEqual(['CouponStartDateInFuture']);
    expect(reasonOf({ expiryDate: '2026-02-01T00:00:00Z' })).toEqual(['CouponExpired']);
    expect(reasonOf({ usageCounter: 1, usageLimit: 1 })).toEqual(['CouponLimitReached']);
    expect(reasonOf({ usageCounter: 5, usageLimit: 0 })).toEqual(['acceptCoupon']);
    expect(reasonOf({ recipientIntegrationId: 'bob' })).toEqual(['CouponRecipientDoesNotMatch']);
    expect(reasonOf({ reservationRequired: true })).toEqual(['CouponReservationRequired']);
    expect(reasonOf({}, { Total: 5 }, [campaign(ruleset(rule(['and', ['couponValid'], ['>', ['.', 'Session', 'Total'], 50]], [['setDiscount', 'x', 1]])))])).toEqual(['CouponRejectedByCondition']);
    // The coupon's campaign is not a candidate (disabled, archived, outside its window).
    const other = couponCampaign();
    const r = evaluate(input({ campaigns: [other], facts: { coupons: [coupon(other.id + 1000)] } }, { CouponCodes: ['SAVE10'] }));
    expect(r.effects.map((e) => e.props.rejectionReason)).toEqual(['CouponPartOfNotRunningCampaign']);
  });

  it('rejects the coupon of a losing exclusive campaign', () => {
    const first = campaign(ruleset(rule(true, [['setDiscount', 'first', 5]])));
    const withCoupon = couponCampaign();
    const app = { ...input().application, campaignPriority: 'exclusive' as const };
    const r = evaluate(input({ campaigns: [first, withCoupon], application: app, facts: { coupons: [coupon(withCoupon.id)] } }, { CouponCodes: ['SAVE10'] }));
    expect(r.effects.map((e) => [e.effectType, e.props.rejectionReason ?? e.props.name])).toEqual([
      ['setDiscount', 'first'],
      ['rejectCoupon', 'CouponPartOfNotTriggeredCampaign'],
    ]);
  });

  it('caps the discounts of a campaign at what remains of the coupon discount limit', () => {
    const c = campaign(ruleset(rule(['couponValid'], [['setDiscount', 'a', 30], ['setDiscount', 'b', 30]])));
    const r = evaluate(input({ campaigns: [c], facts: { coupons: [coupon(c.id, { discountLimit: 50, discountCounter: 15 })] } }, { CouponCodes: ['SAVE10'] }));
    expect(r.effects.slice(1).map((e) => e.props)).toEqual([
      { name: 'a', value: 30 },
      { name: 'b', value: 5, desiredValue: 30 },
    ]);
  });

  it('makes the Coupon root available only to the campaign of the coupon', () => {
    const c = campaign(ruleset(rule(['=', ['.', 'Coupon', 'Attributes', 'kind'], 'welcome'], [['setDiscount', 'welcome', 1]])));
    const other = campaign(ruleset(rule(['=', ['.', 'Coupon', 'Value'], 'SAVE10'], [['setDiscount', 'leak', 1]])));
    const r = evaluate(input({ campaigns: [c, other], facts: { coupons: [coupon(c.id)] } }, { CouponCodes: ['SAVE10'] }));
    expect(r.effects.filter((e) => e.effectType === 'setDiscount').map((e) => e.props.name)).toEqual(['welcome']);
    expect(r.ruleFailureReasons).toEqual([expect.objectContaining({ campaignId: other.id, details: 'the session carries no valid coupon of this campaign' })]);
  });
});

describe('referrals', () => {
  const referral = (campaignId: number, overrides: Partial<ReferralFact> = {}): ReferralFact => ({
    id: 1,
    code: 'FRIEND1',
    campaignId,
    advocateProfileIntegrationId: 'bob',
    usageCounter: 0,
    usageLimit: 0,
    attributes: {},
    ...overrides,
  });
  const run = (fact: Partial<ReferralFact> | undefined, condition: unknown = ['referralValid']) => {
    const c = campaign(ruleset(rule(condition, [['setDiscount', 'friend', 5]])));
    const r = evaluate(input({ campaigns: [c], facts: fact ? { referral: referral(c.id, fact) } : {} }, { ReferralCode: 'FRIEND1' }));
    return r.effects.filter((e) => e.effectType !== 'setDiscount').map((e) => e.props.rejectionReason ?? e.effectType);
  };

  it('accepts a valid referral and gives each rejection reason', () => {
    expect(run({})).toEqual(['acceptReferral']);
    expect(run(undefined)).toEqual(['ReferralNotFound']);
    expect(run({ expiryDate: '2026-01-01T00:00:00Z' })).toEqual(['ReferralExpired']);
    expect(run({ startDate: '2027-01-01T00:00:00Z' })).toEqual(['ReferralStartDateInFuture']);
    expect(run({ usageCounter: 3, usageLimit: 3 })).toEqual(['ReferralLimitReached']);
    expect(run({ advocateProfileIntegrationId: 'alice' })).toEqual(['ReferralRecipientIdSameAsAdvocate']);
    expect(run({ friendProfileIntegrationId: 'carol' })).toEqual(['ReferralRecipientDoesNotMatch']);
    expect(run({ alreadyReferred: true })).toEqual(['ReferralCustomerAlreadyReferred']);
    expect(run({}, false)).toEqual(['ReferralRejectedByCondition']);
  });
});

describe('limits', () => {
  const limited = (limits: NonNullable<EvaluationInput['facts']>['limits'], effects: unknown[], withCoupon = false) => {
    const c = campaign(ruleset(rule(withCoupon ? ['couponValid'] : true, effects)));
    const ls = limits!.map((l) => ({ ...l, campaignId: c.id }));
    return evaluate(input({ campaigns: [c], facts: { limits: ls, coupons: [coupon(c.id)] } }, withCoupon ? { CouponCodes: ['SAVE10'] } : {}));
  };

  it('caps discounts at the campaign budget and then emits none', () => {
    const r = limited([{ campaignId: 0, action: 'setDiscount', remaining: 25 }], [['setDiscount', 'a', 20], ['setDiscount', 'b', 20], ['setDiscount', 'c', 20]]);
    expect(r.effects.map((e) => e.props)).toEqual([{ name: 'a', value: 20 }, { name: 'b', value: 5, desiredValue: 20 }]);
    expect(r.ruleFailureReasons).toEqual([expect.objectContaining({ effectIndex: 2, details: 'CampaignLimitReached: limit of setDiscount reached' })]);
  });

  it('counts discount effects and created coupons', () => {
    const r = limited(
      [
        { campaignId: 0, action: 'setDiscountEffect', remaining: 1 },
        { campaignId: 0, action: 'createCoupon', remaining: 0, perProfile: true },
      ],
      [['setDiscount', 'a', 1], ['setDiscount', 'b', 1], ['createCoupon', {}]],
    );
    expect(r.effects.map((e) => e.props.name)).toEqual(['a']);
    expect(r.ruleFailureReasons.map((f) => f.details)).toEqual(['CampaignLimitReached: limit of setDiscountEffect reached', 'ProfileLimitReached: limit of createCoupon reached']);
  });

  it('rejects a coupon whose redemptions are used up, by the limit that applies', () => {
    const campaignLimit = limited([{ campaignId: 0, action: 'redeemCoupon', remaining: 0 }], [['setDiscount', 'a', 1]], true);
    expect(campaignLimit.effects.map((e) => [e.effectType, e.props.rejectionReason])).toEqual([['rejectCoupon', 'CampaignLimitReached']]);
    const profileLimit = limited([{ campaignId: 0, action: 'redeemCoupon', remaining: 0, perProfile: true }], [['setDiscount', 'a', 1]], true);
    expect(profileLimit.effects.map((e) => e.props.rejectionReason)).toEqual(['ProfileLimitReached']);
    const fine = limited([{ campaignId: 0, action: 'redeemCoupon', remaining: 1 }], [['setDiscount', 'a', 1]], true);
    expect(fine.effects.map((e) => e.effectType)).toEqual(['acceptCoupon', 'setDiscount']);
  });

  it('refuses loyalty points that would pass the amount left', () => {
    const r = limited([{ campaignId: 0, action: 'addLoyaltyPoints', remaining: 30 }], [['addLoyaltyPoints', 1, 20], ['addLoyaltyPoints', 1, 20]]);
    expect(r.effects.map((e) => e.props.value)).toEqual([20]);
    expect(r.ruleFailureReasons).toHaveLength(1);
  });
});

describe('coupon reasons decided after evaluation', () => {
  it('rejects with ProfileRequired when a per-profile limit meets an anonymous session', () => {
    const c = couponCampaign();
    const facts = { coupons: [coupon(c.id)], limits: [{ campaignId: c.id, action: 'redeemCoupon', remaining: 5, perProfile: true }] };
    const anonymous = evaluate(input({ campaigns: [c], facts }, { CouponCodes: ['SAVE10'], ProfileId: '' }));
    expect(anonymous.effects.map((e) => e.props.rejectionReason ?? e.effectType)).toEqual(['ProfileRequired']);
    const known = evaluate(input({ campaigns: [c], facts }, { CouponCodes: ['SAVE10'] }));
    expect(known.effects.map((e) => e.effectType)).toEqual(['acceptCoupon', 'setDiscount']);
  });

  it('rejects with EffectCouldNotBeApplied when every effect of the coupon rule fails', () => {
    const c = campaign(ruleset(rule(['couponValid'], [['setDiscount', 'x', ['/', 1, 0]]])));
    const r = evaluate(input({ campaigns: [c], facts: { coupons: [coupon(c.id)] } }, { CouponCodes: ['SAVE10'] }));
    expect(r.effects.map((e) => e.props.rejectionReason ?? e.effectType)).toEqual(['EffectCouldNotBeApplied']);
  });
});
