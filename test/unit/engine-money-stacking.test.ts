import { describe, expect, it } from 'vitest';
import { checkRuleset, evaluate, type EvaluationInput, type RulesetSpec } from '../../services/engine/index.js';

const rule = (condition: unknown, effects: unknown[], title = 'r') => ({ title, condition, effects });
const ruleset = (...rules: ReturnType<typeof rule>[]): RulesetSpec => ({ rules, bindings: [] });

const input = (overrides: Partial<EvaluationInput> = {}, session: Record<string, unknown> = {}): EvaluationInput => ({
  version: 1,
  application: { id: 1, currency: 'EUR', timezone: 'UTC', attributes: {}, campaignPriority: 'universal', exclusiveCampaignsStrategy: 'listOrder' },
  campaigns: [],
  session: { Total: 120, CartItems: [{ Sku: 'A', Price: 120, Quantity: 1, Position: 0 }], AdditionalCosts: {}, Attributes: {}, ...session },
  profile: { IntegrationId: 'p', Attributes: {} },
  event: { Type: 'service_session_updated', Attributes: {} },
  now: '2026-03-01T10:00:00Z',
  ...overrides,
});

let nextId = 1;
const campaign = (rs: RulesetSpec) => {
  const id = nextId++;
  return { id, name: `c${id}`, tags: [], attributes: {}, rulesetId: 5000 + id, ruleset: rs };
};

describe('money', () => {
  it('rounds 10% of 9.99 (three items of 3.33) to 1.00', () => {
    const c = campaign(ruleset(rule(true, [['setDiscount', 'd', ['*', ['.', 'Session', 'Total'], 0.1]]])));
    const r = evaluate(input({ campaigns: [c] }, { Total: 9.99, CartItems: [{ Sku: 'A', Price: 3.33, Quantity: 3, Position: 0 }] }));
    expect(r.effects[0]!.props).toEqual({ name: 'd', value: 1 });
  });

  it('rounds JPY to whole yen', () => {
    const c = campaign(ruleset(rule(true, [['setDiscount', 'd', ['*', ['.', 'Session', 'Total'], 0.15]]])));
    const r = evaluate(input({ campaigns: [c], application: { ...input().application, currency: 'JPY' } }, { Total: 1234, CartItems: [] }));
    expect(r.effects[0]!.props).toEqual({ name: 'd', value: 185 });
  });
});

describe('campaign stacking', () => {
  it('lets exactly one exclusive campaign win by strategy, and runs all when universal', () => {
    const small = campaign(ruleset(rule(true, [['setDiscount', 's', 5]])));
    const big = campaign(ruleset(rule(true, [['setDiscount', 'b', 30]])));
    const base = input().application;
    const pick = (strategy: 'listOrder' | 'lowestDiscount' | 'highestDiscount') =>
      evaluate(input({ campaigns: [small, big], application: { ...base, campaignPriority: 'exclusive', exclusiveCampaignsStrategy: strategy } })).effects.map((e) => e.props.name);
    expect(pick('listOrder')).toEqual(['s']);
    expect(pick('lowestDiscount')).toEqual(['s']);
    expect(pick('highestDiscount')).toEqual(['b']);
    expect(evaluate(input({ campaigns: [small, big] })).effects.map((e) => e.props.name)).toEqual(['s', 'b']);
    const stackable = { ...base, campaignPriority: 'stackable' as const };
    expect(evaluate(input({ campaigns: [small, big], application: stackable })).effects.map((e) => e.props.name)).toEqual(['s', 'b']);
  });
});

describe('operator lookup', () => {
  it('does not take Object.prototype names for operators or effects', () => {
    expect(checkRuleset(ruleset(rule(['constructor'], [['hasOwnProperty']])))).toHaveLength(2);
  });
});
