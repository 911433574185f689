import { describe, expect, it } from 'vitest';
import { checkRuleset, compileRuleset, readsFirstSession, readsProfile, RuleCompileError, type RuleSpec, type RulesetSpec } from '../../services/engine/index.js';

const rule = (overrides: Partial<RuleSpec> = {}): RuleSpec => ({
  title: 'rule',
  condition: true,
  effects: [['setDiscount', 'd', 1]],
  ...overrides,
});
const ruleset = (overrides: Partial<RulesetSpec> = {}): RulesetSpec => ({ rules: [rule()], bindings: [], ...overrides });

/** The one issue of a ruleset whose second rule has this condition. */
const conditionIssue = (condition: unknown) => {
  const issues = checkRuleset(ruleset({ rules: [rule(), rule({ condition })] }));
  expect(issues).toHaveLength(1);
  return issues[0]!;
};

describe('compileRuleset', () => {
  it('compiles a valid ruleset and reports no issues', () => {
    const spec = ruleset({ bindings: [{ name: 'big', expression: ['>', ['.', 'Session', 'Total'], 100] }], rules: [rule({ condition: ['.', 'big'] })] });
    expect(checkRuleset(spec)).toEqual([]);
    expect(compileRuleset(spec).rules).toHaveLength(1);
  });

  it('throws RuleCompileError carrying every issue', () => {
    const spec = ruleset({ rules: [rule({ condition: ['nope'] }), rule({ effects: [['setDiscount', 1, 1]] })] });
    let error: unknown;
    try {
      compileRuleset(spec);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(RuleCompileError);
    expect(error).toBeInstanceOf(Error);
    expect((error as RuleCompileError).errors.map((e) => [e.ruleIndex, e.pointer])).toEqual([
      [0, '/rules/0/condition'],
      [1, '/rules/1/effects/0/1'],
    ]);
  });

  it('reports an unknown operator with its pointer and rule index', () => {
    expect(conditionIssue(['and', true, ['not', ['frobnicate', 1]]])).toMatchObject({ ruleIndex: 1, pointer: '/rules/1/condition/2/1', message: expect.stringContaining('unknown operator') });
  });

  it('treats operator names as case-sensitive', () => {
    expect(conditionIssue(['AND', true])).toMatchObject({ pointer: '/rules/1/condition' });
  });

  it('reports a wrong arity', () => {
    expect(conditionIssue(['not', true, false])).toMatchObject({ ruleIndex: 1, pointer: '/rules/1/condition', message: expect.stringContaining('takes 1 argument') });
    expect(conditionIssue(['and'])).toMatchObject({ pointer: '/rules/1/condition' });
    expect(conditionIssue(['if', true, 1])).toMatchObject({ pointer: '/rules/1/condition' });
  });

  it('reports a literal of the wrong type at the literal', () => {
    expect(conditionIssue(['and', true, ['>', ['.', 'Session', 'Total'], 'a hundred']])).toMatchObject({ ruleIndex: 1, pointer: '/rules/1/condition/2/2' });
    expect(conditionIssue(['=', ['+', 1, 'x'], 2])).toMatchObject({ pointer: '/rules/1/condition/1/2' });
    expect(conditionIssue(['if', 1, true, false])).toMatchObject({ pointer: '/rules/1/condition/1' });
    expect(conditionIssue(['>', ['count', 3], 0])).toMatchObject({ pointer: '/rules/1/condition/1/1' });
    expect(conditionIssue(['<', '2026-02-30T00:00:00Z', ['.', 'Now']])).toMatchObject({ pointer: '/rules/1/condition/1' });
  });

  it('reports an unknown root at the root name', () => {
    expect(conditionIssue(['>', ['.', 'Sesion', 'Total'], 1])).toMatchObject({ ruleIndex: 1, pointer: '/rules/1/condition/1/1', message: expect.stringContaining('unknown root') });
    expect(conditionIssue(['>', ['.|', 'Basket', 'Total', 0], 1])).toMatchObject({ pointer: '/rules/1/condition/1/1' });
  });

  it('accepts binding names and block parameters as roots', () => {
    const spec = ruleset({
      bindings: [{ name: 'Threshold', expression: 20 }],
      rules: [rule({ condition: ['exists', ['.', 'Session', 'CartItems'], [['line'], ['>', ['.', 'line', 'Price'], ['.', 'Threshold']]]] })],
    });
    expect(checkRuleset(spec)).toEqual([]);
  });

  it('does not let a block parameter escape its block', () => {
    expect(conditionIssue(['and', ['exists', ['list', 1], [['x'], true]], ['=', ['.', 'x'], 1]])).toMatchObject({ pointer: '/rules/1/condition/2/1/1' });
  });

  it('reports a block with the wrong number of parameters', () => {
    expect(conditionIssue(['exists', ['.', 'Session', 'CartItems'], [['a', 'b'], true]])).toMatchObject({ ruleIndex: 1, pointer: '/rules/1/condition/2/0' });
    expect(conditionIssue(['exists', ['.', 'Session', 'CartItems'], [[], true]])).toMatchObject({ pointer: '/rules/1/condition/2/0' });
  });

  it('reports a value where a block is required', () => {
    expect(conditionIssue(['exists', ['.', 'Session', 'CartItems'], true])).toMatchObject({ pointer: '/rules/1/condition/2' });
  });

  it('reports a bare array that is not a call, a block or a list', () => {
    expect(conditionIssue(['=', [1, 2], ['list', 1, 2]])).toMatchObject({ ruleIndex: 1, pointer: '/rules/1/condition/1' });
    expect(conditionIssue(['=', [], ['list']])).toMatchObject({ pointer: '/rules/1/condition/1' });
    expect(conditionIssue([['x'], true])).toMatchObject({ pointer: '/rules/1/condition' });
  });

  it('reports issues in effects with the effect pointer', () => {
    const issues = checkRuleset(
      ruleset({
        rules: [
          rule({
            effects: [
              ['setDiscount', 'd'],
              ['bogusEffect', 1],
              ['forEach', ['.', 'Session', 'CartItems'], [['a', 'b'], ['noop']]],
              ['forEach', ['.', 'Session', 'CartItems'], [['Item'], ['setDiscountPerItem', 'x', ['*', ['.', 'Item', 'Price'], 'half']]]],
            ],
          }),
        ],
      }),
    );
    expect(issues.map((i) => [i.ruleIndex, i.pointer])).toEqual([
      [0, '/rules/0/effects/0'],
      [0, '/rules/0/effects/1'],
      [0, '/rules/0/effects/2/2/0'],
      [0, '/rules/0/effects/3/2/1/2/2'],
    ]);
  });

  it('reports issues of ruleset bindings by binding pointer without a rule index', () => {
    const issues = checkRuleset(ruleset({ bindings: [{ name: 'ok', expression: 1 }, { name: 'bad', expression: ['.', 'Nowhere'] }] }));
    expect(issues).toEqual([{ message: expect.any(String), pointer: '/bindings/1/expression/1' }]);
  });

  it('reports issues of rule bindings with the rule index', () => {
    const issues = checkRuleset(ruleset({ rules: [rule(), rule({ bindings: [{ name: 'x', expression: ['nope'] }] })] }));
    expect(issues).toEqual([{ message: expect.any(String), pointer: '/rules/1/bindings/0/expression', ruleIndex: 1 }]);
  });

  it('lets a binding see only the bindings before it', () => {
    const issues = checkRuleset(ruleset({ bindings: [{ name: 'a', expression: ['.', 'b'] }, { name: 'b', expression: 1 }] }));
    expect(issues).toMatchObject([{ pointer: '/bindings/0/expression/1' }]);
  });

  it('collects every issue of a ruleset in one pass', () => {
    const issues = checkRuleset(ruleset({ rules: [rule({ condition: ['x'] }), rule({ condition: ['.', 'Y'] }), rule({ condition: [1] })] }));
    expect(issues.map((i) => i.ruleIndex)).toEqual([0, 1, 2]);
  });
});

describe('readsProfile', () => {
  const spec = (condition: unknown, bindings: unknown[] = []): RulesetSpec => ({ rules: [{ title: 't', condition, effects: [] }], bindings: bindings as RulesetSpec['bindings'] });

  it('finds Profile paths, fallbacks and audiences anywhere in rules and bindings', () => {
    expect(readsProfile(spec(['=', ['.', 'Profile', 'Attributes', 'tier'], 'gold']))).toBe(true);
    expect(readsProfile(spec(['and', true, ['>', ['.|', 'Profile', 'ClosedSessions', 0], 3]]))).toBe(true);
    expect(readsProfile(spec(['inAudience', 7]))).toBe(true);
    expect(readsProfile(spec(true, [{ name: 'p', expression: ['.', 'Profile'] }]))).toBe(true);
  });

  it('is false for rules that read only the session and other roots', () => {
    expect(readsProfile(spec(['>', ['.', 'Session', 'Total'], 100]))).toBe(false);
    expect(readsProfile(spec(['=', ['.', 'Session', 'Attributes', 'Profile'], 'Profile']))).toBe(false);
  });
});

describe('readsFirstSession', () => {
  const spec = (condition: unknown, bindings: unknown[] = []): RulesetSpec => ({ rules: [{ title: 't', condition, effects: [] }], bindings: bindings as RulesetSpec['bindings'] });

  it('finds Session.FirstSession and the whole Session, with or without a fallback, in rules and bindings', () => {
    expect(readsFirstSession(spec(['.', 'Session', 'FirstSession']))).toBe(true);
    expect(readsFirstSession(spec(['not', ['.|', 'Session', 'FirstSession', false]]))).toBe(true);
    expect(readsFirstSession(spec(true, [{ name: 's', expression: ['.', 'Session'] }]))).toBe(true);
    expect(readsFirstSession(spec(['=', ['.|', 'Session', null], null]))).toBe(true);
  });

  it('is false for other Session paths and other roots', () => {
    expect(readsFirstSession(spec(['>', ['.', 'Session', 'Total'], 100]))).toBe(false);
    expect(readsFirstSession(spec(['=', ['.', 'Session', 'Attributes', 'FirstSession'], true]))).toBe(false);
    expect(readsFirstSession(spec(['=', ['.', 'Profile', 'FirstSession'], true]))).toBe(false);
  });
});
