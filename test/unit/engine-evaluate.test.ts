import { describe, expect, it } from 'vitest';
import { evaluate, type CampaignInput, type EvaluationInput, type RuleSpec } from '../../services/engine/index.js';

const tenPercent: RuleSpec = {
  title: '10% off',
  condition: ['>', ['.', 'Session', 'Total'], 100],
  effects: [['setDiscount', '10% off', ['*', ['.', 'Session', 'Total'], 0.1]]],
};

const cartItem = (overrides: Record<string, unknown> = {}) => ({ Name: 'Shoe', Sku: 'A', Quantity: 2, Price: 25, Category: 'shoes', Position: 0, Attributes: {}, ...overrides });

const campaign = (overrides: Partial<CampaignInput> = {}): CampaignInput => ({
  id: 1,
  name: 'Spring',
  tags: ['spring'],
  attributes: { region: 'north' },
  rulesetId: 10,
  ruleset: { rules: [tenPercent], bindings: [] },
  ...overrides,
});

const input = (overrides: Partial<EvaluationInput> = {}): EvaluationInput => ({
  version: 1,
  application: { id: 1, currency: 'EUR', timezone: 'UTC', attributes: {}, campaignPriority: 'universal', exclusiveCampaignsStrategy: 'listOrder' },
  campaigns: [campaign()],
  session: {
    IntegrationId: 's1',
    State: 'open',
    Total: 120,
    CartItemTotal: 110,
    Attributes: {},
    CartItems: [cartItem(), cartItem({ Name: 'Hat', Sku: 'B', Quantity: 1, Price: 10, Category: 'hats', Position: 1 })],
    AdditionalCosts: { shipping: { Price: 10 } },
  },
  profile: { IntegrationId: 'p1', Attributes: {} },
  event: { Type: 'service_session_updated', Attributes: {} },
  now: '2026-03-01T10:00:00Z',
  ...overrides,
});

const withRules = (rules: RuleSpec[], overrides: Partial<EvaluationInput> = {}, rulesetId = 10) =>
  input({ campaigns: [campaign({ rulesetId, ruleset: { rules, bindings: [] } })], ...overrides });
const withTotal = (Total: number, extra: Partial<EvaluationInput> = {}) => ({ session: { ...input().session, Total }, ...extra });
const discount = (name: string, value: unknown): RuleSpec => ({ title: name, condition: true, effects: [['setDiscount', name, value]] });

describe('evaluate', () => {
  it('gives 10% off when Session.Total > 100', () => {
    const result = evaluate(input());
    expect(result).toEqual({
      effects: [{ campaignId: 1, rulesetId: 10, ruleIndex: 0, ruleName: '10% off', effectType: 'setDiscount', props: { name: '10% off', value: 12 } }],
      ruleFailureReasons: [],
      triggeredCampaignIds: [1],
    });
  });

  it('emits nothing when the condition is false', () => {
    expect(evaluate(input(withTotal(90)))).toEqual({ effects: [], ruleFailureReasons: [], triggeredCampaignIds: [] });
  });

  it('rounds a discount half away from zero to the currency minor unit', () => {
    expect(evaluate(input(withTotal(123.45))).effects[0]!.props.value).toBe(12.35);
    const jpy = { ...input().application, currency: 'JPY' };
    expect(evaluate(input(withTotal(1235, { application: jpy }))).effects[0]!.props.value).toBe(124);
  });

  it('caps discounts so the session total never goes negative', () => {
    const result = evaluate(withRules([discount('a', 100), discount('b', 50), discount('c', 5)]));
    expect(result.effects.map((e) => e.props)).toEqual([
      { name: 'a', value: 100 },
      { name: 'b', value: 20, desiredValue: 50 },
      { name: 'c', value: 0, desiredValue: 5 },
    ]);
  });

  it('caps across campaigns in list order', () => {
    const result = evaluate(
      input({
        campaigns: [
          campaign({ id: 1, rulesetId: 11, ruleset: { rules: [discount('first', 80)], bindings: [] } }),
          campaign({ id: 2, rulesetId: 12, ruleset: { rules: [discount('second', 80)], bindings: [] } }),
        ],
      }),
    );
    expect(result.effects.map((e) => [e.campaignId, e.props.value, e.props.desiredValue])).toEqual([
      [1, 80, undefined],
      [2, 40, 80],
    ]);
    expect(result.triggeredCampaignIds).toEqual([1, 2]);
  });

  it('emits a per-item discount for each item of forEach, capped at the item', () => {
    const rule: RuleSpec = {
      title: 'half off shoes',
      condition: ['exists', ['.', 'Session', 'CartItems'], [['Item'], ['=', ['.', 'Item', 'Category'], 'shoes']]],
      effects: [
        ['forEach', ['cartItemsMatching', [['Item'], ['=', ['.', 'Item', 'Category'], 'shoes']]], [['Item'], ['setDiscountPerItem', 'half', ['*', ['.', 'Item', 'Price'], ['.', 'Item', 'Quantity'], 0.5]]]],
        ['setDiscountPerItem', 'hat', 15, 1],
        ['noop'],
      ],
    };
    expect(evaluate(withRules([rule])).effects.map((e) => [e.effectType, e.props])).toEqual([
      ['setDiscountPerItem', { name: 'half', value: 25, position: 0 }],
      ['setDiscountPerItem', { name: 'hat', value: 10, position: 1, desiredValue: 15 }],
    ]);
  });

  it('runs rules top to bottom and effects in order', () => {
    const result = evaluate(withRules([discount('one', 1), { title: 'two', condition: true, effects: [['setDiscount', 'two-a', 2], ['setDiscount', 'two-b', 3]] }]));
    expect(result.effects.map((e) => [e.ruleIndex, e.props.name])).toEqual([
      [0, 'one'],
      [1, 'two-a'],
      [1, 'two-b'],
    ]);
  });

  it('records a condition error and goes on with the next rule', () => {
    const result = evaluate(withRules([{ title: 'broken', condition: ['>', ['.', 'Session', 'Attributes', 'missing'], 1], effects: [] }, discount('ok', 1)]));
    expect(result.ruleFailureReasons).toEqual([
      { campaignId: 1, campaignName: 'Spring', rulesetId: 10, ruleIndex: 0, ruleName: 'broken', details: expect.stringContaining('missing') },
    ]);
    expect(result.effects.map((e) => e.props.name)).toEqual(['ok']);
  });

  it('records a condition that is not a boolean', () => {
    const result = evaluate(withRules([{ title: 'number', condition: ['.', 'Session', 'Total'], effects: [['setDiscount', 'x', 1]] }]));
    expect(result.effects).toEqual([]);
    expect(result.ruleFailureReasons).toHaveLength(1);
  });

  it('drops a failing effect with its index and keeps the others', () => {
    const result = evaluate(withRules([{ title: 'mixed', condition: true, effects: [['setDiscount', 'bad', ['/', 1, 0]], ['setDiscount', 'good', 1]] }]));
    expect(result.effects.map((e) => e.props.name)).toEqual(['good']);
    expect(result.ruleFailureReasons).toEqual([
      { campaignId: 1, campaignName: 'Spring', rulesetId: 10, ruleIndex: 0, ruleName: 'mixed', effectIndex: 0, details: 'division by zero' },
    ]);
  });

  it('refuses a negative discount as a failure of that effect', () => {
    const result = evaluate(withRules([{ title: 'neg', condition: true, effects: [['setDiscount', 'ok', 1], ['setDiscount', 'neg', -5]] }]));
    expect(result.effects.map((e) => e.props.name)).toEqual(['ok']);
    expect(result.ruleFailureReasons).toMatchObject([{ ruleIndex: 0, effectIndex: 1 }]);
  });

  it('evaluates ruleset bindings before the rules', () => {
    const ruleset = {
      bindings: [
        { name: 'threshold', expression: 100 },
        { name: 'big', expression: ['>', ['.', 'Session', 'Total'], ['.', 'threshold']] },
      ],
      rules: [{ title: 'b', condition: ['.', 'big'], effects: [['setDiscount', 'b', ['.', 'threshold']]] }],
    };
    expect(evaluate(input({ campaigns: [campaign({ rulesetId: 13, ruleset })] })).effects[0]!.props).toEqual({ name: 'b', value: 100 });
  });

  it('fails only the rules that use a failed binding', () => {
    const ruleset = {
      bindings: [{ name: 'broken', expression: ['.', 'Session', 'Attributes', 'missing'] }],
      rules: [
        { title: 'uses', condition: ['=', ['.', 'broken'], 1], effects: [['setDiscount', 'never', 1]] },
        { title: 'ignores', condition: true, effects: [['setDiscount', 'always', 1]] },
      ],
    };
    const result = evaluate(input({ campaigns: [campaign({ rulesetId: 14, ruleset })] }));
    expect(result.effects.map((e) => e.props.name)).toEqual(['always']);
    expect(result.ruleFailureReasons).toMatchObject([{ ruleIndex: 0, ruleName: 'uses' }]);
  });

  it('exposes the campaign, application, profile and event as roots', () => {
    const rule: RuleSpec = {
      title: 'roots',
      condition: ['and', ['=', ['.', 'Campaign', 'Tags'], ['list', 'spring']], ['=', ['.', 'Application', 'Currency'], 'EUR'], ['=', ['.', 'Event', 'Type'], 'service_session_updated'], ['=', ['.', 'Profile', 'IntegrationId'], 'p1']],
      effects: [['setDiscount', ['.', 'Campaign', 'Name'], ['.', 'Campaign', 'Id']]],
    };
    expect(evaluate(withRules([rule])).effects[0]!.props).toEqual({ name: 'Spring', value: 1 });
  });

  it('reports a ruleset that does not compile without evaluating it', () => {
    const result = evaluate(withRules([{ title: 'bad', condition: ['nope'], effects: [] }], {}, 15));
    expect(result.effects).toEqual([]);
    expect(result.ruleFailureReasons).toMatchObject([{ campaignId: 1, details: expect.stringContaining('does not compile') }]);
  });

  it('never uses a stale compiled ruleset when a ruleset id is reused with new content', () => {
    expect(evaluate(withRules([discount('v1', 1)], {}, 99)).effects[0]!.props).toEqual({ name: 'v1', value: 1 });
    expect(evaluate(withRules([discount('v2', 2)], {}, 99)).effects[0]!.props).toEqual({ name: 'v2', value: 2 });
  });

  it('cuts off a runaway ruleset with an evaluation error within the budget', () => {
    const big = Array.from({ length: 2000 }, (_, i) => i);
    const all = ['.', 'Session', 'Attributes', 'big'];
    const cubic = ['exists', all, [['a'], ['exists', all, [['b'], ['exists', all, [['c'], ['<', ['.', 'c'], 0]]]]]]];
    const started = performance.now();
    const result = evaluate(withRules([{ title: 'runaway', condition: cubic, effects: [] }], { budgetMs: 20, session: { Total: 10, Attributes: { big }, CartItems: [] } }, 16));
    expect(performance.now() - started).toBeLessThan(1000);
    expect(result.ruleFailureReasons).toMatchObject([{ ruleName: 'runaway', details: expect.stringContaining('budget') }]);
  });

  it('does not let catch swallow the budget', () => {
    const big = Array.from({ length: 2000 }, (_, i) => i);
    const all = ['.', 'Session', 'Attributes', 'big'];
    const cubic = ['catch', true, ['exists', all, [['a'], ['exists', all, [['b'], ['exists', all, [['c'], ['<', ['.', 'c'], 0]]]]]]]];
    const result = evaluate(withRules([{ title: 'runaway', condition: cubic, effects: [['setDiscount', 'x', 1]] }], { budgetMs: 20, session: { Total: 10, Attributes: { big }, CartItems: [] } }, 17));
    expect(result.effects).toEqual([]);
    expect(result.ruleFailureReasons).toMatchObject([{ details: expect.stringContaining('budget') }]);
  });

  it('does not change its input', () => {
    const i = input();
    const copy = structuredClone(i);
    evaluate(i);
    expect(i).toEqual(copy);
  });
});
