import { describe, expect, it } from 'vitest';
import { checkRuleset, compileRuleset, evaluate, type EvaluationInput } from '../../services/engine/index.js';

const input = (condition: unknown, items: unknown[]): EvaluationInput => ({
  version: 1,
  application: { id: 1, currency: 'EUR', timezone: 'UTC', attributes: {}, campaignPriority: 'universal', exclusiveCampaignsStrategy: 'listOrder' },
  campaigns: [{ id: 1, name: 'c', tags: [], attributes: {}, rulesetId: 77001, ruleset: { bindings: [], rules: [{ title: 'r', condition, effects: [['setDiscount', 'd', 1]] }] } }],
  session: { Total: 10, CartItems: items, Attributes: {}, AdditionalCosts: {} },
  profile: { Attributes: {} },
  event: { Type: 'x', Attributes: {} },
  now: '2026-03-01T10:00:00Z',
});

describe('shared compilation', () => {
  it('shares the closure of an identical subexpression between rulesets', () => {
    const tier = ['in', ['.', 'Profile', 'Attributes', 'tier'], ['list', 'gold', 'platinum']];
    const a = compileRuleset({ bindings: [], rules: [{ title: 'a', condition: tier, effects: [] }] });
    const b = compileRuleset({ bindings: [], rules: [{ title: 'b', condition: tier, effects: [] }] });
    expect(a.rules[0]!.condition).toBe(b.rules[0]!.condition);
  });

  it('never lends a binding name to a ruleset that does not have it', () => {
    const withBinding = { bindings: [{ name: 'Big', expression: true }], rules: [{ title: 'a', condition: ['.', 'Big'], effects: [] }] };
    expect(checkRuleset(withBinding)).toEqual([]);
    expect(checkRuleset({ bindings: [], rules: [{ title: 'b', condition: ['.', 'Big'], effects: [] }] })).toEqual([
      expect.objectContaining({ pointer: '/rules/0/condition/1', message: 'unknown root "Big"' }),
    ]);
  });
});

describe('cart-item filter guard', () => {
  const filter = ['exists', ['.', 'Session', 'CartItems'], [['Item'], ['and', ['=', ['.', 'Item', 'Category'], 'shoes'], ['>', ['.', 'Item', 'Price'], 5]]]];

  it('skips items of another category and still evaluates the rest of the body', () => {
    expect(evaluate(input(filter, [{ Category: 'hats', Price: 50 }, { Category: 'shoes', Price: 9 }])).effects).toHaveLength(1);
    expect(evaluate(input(filter, [{ Category: 'hats', Price: 50 }, { Category: 'shoes', Price: 1 }])).effects).toHaveLength(0);
  });

  it('still reports an item without the key, and a bad operand after a matching key', () => {
    const missing = evaluate(input(filter, [{ Price: 50 }]));
    expect(missing.ruleFailureReasons).toEqual([expect.objectContaining({ details: 'Item has no "Category"' })]);
    const badPrice = evaluate(input(filter, [{ Category: 'shoes', Price: 'cheap' }]));
    expect(badPrice.ruleFailureReasons).toEqual([expect.objectContaining({ details: '> compares two numbers or two times, got string and number' })]);
  });
});
