import { describe, expect, it } from 'vitest';
import { compileExpression, EvalError } from '../../services/engine/index.js';
import type { Env } from '../../services/engine/runtime.js';

interface Item {
  Name: string;
  Sku: string;
  Quantity: number;
  Price: number;
  Category: string;
  Position: number;
  Attributes: Record<string, unknown>;
}

const item = (overrides: Partial<Item> = {}): Item => ({ Name: 'Shoe', Sku: 'A', Quantity: 2, Price: 25, Category: 'shoes', Position: 0, Attributes: {}, ...overrides });

const roots = (overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
  Session: {
    Total: 120,
    CartItemTotal: 110,
    Attributes: { channel: 'web', nothing: null, zero: 0, no: false, empty: '', 'a.b': 'dotted', text: '5', when: '2026-03-01T10:00:00Z' },
    CartItems: [item(), item({ Name: 'Hat', Sku: 'B', Quantity: 1, Price: 10, Category: 'hats', Position: 1 }), item({ Name: 'Sock', Sku: 'C', Quantity: 5, Price: 10, Category: 'socks', Position: 2 })],
    AdditionalCosts: { shipping: { Price: 10 } },
  },
  Profile: { Attributes: { tier: 'gold' }, Audiences: [7, 9] },
  Event: { Type: 'service_session_updated', Attributes: {} },
  Application: { Id: 1, Currency: 'EUR', Timezone: 'UTC', Attributes: {} },
  Campaign: { Id: 3, Name: 'Spring', Tags: ['x'], Attributes: {} },
  Now: '2026-03-01T10:00:00Z',
  ...overrides,
});

const run = (expr: unknown, over: Record<string, unknown> = {}): unknown => {
  const env: Env = { roots: roots(over), frame: undefined, budget: { deadline: performance.now() + 1000, ticks: 0 }, timezone: 'UTC' };
  return compileExpression(expr)(env);
};
const value = (expr: unknown, over?: Record<string, unknown>) => expect(run(expr, over));
const evalError = (expr: unknown, over?: Record<string, unknown>) => expect(() => run(expr, over)).toThrow(EvalError);

const S = (...keys: Array<string | number>) => ['.', 'Session', ...keys];
const boom = ['/', 1, 0];

describe('literals and paths', () => {
  it('returns literals as they are', () => {
    for (const v of [1, 2.5, 'x', true, false, null]) value(v).toBe(v);
  });

  it('builds lists from list forms', () => {
    value(['list', 1, ['+', 1, 1], ['list']]).toEqual([1, 2, []]);
  });

  it('walks maps and indexes lists with numeric keys', () => {
    value(S('CartItems', 1, 'Sku')).toBe('B');
    value(S('AdditionalCosts', 'shipping', 'Price')).toBe(10);
    value(['.', 'Campaign', 'Name']).toBe('Spring');
    value(['.', 'Now']).toBe('2026-03-01T10:00:00Z');
  });

  it('treats a key containing a dot as one key', () => {
    value(S('Attributes', 'a.b')).toBe('dotted');
  });

  it('returns null, 0, false and empty strings that are present', () => {
    value(S('Attributes', 'nothing')).toBeNull();
    value(['.|', 'Session', 'Attributes', 'nothing', 'fallback']).toBeNull();
    value(['.|', 'Session', 'Attributes', 'zero', 1]).toBe(0);
    value(['.|', 'Session', 'Attributes', 'no', true]).toBe(false);
    value(['.|', 'Session', 'Attributes', 'empty', 'x']).toBe('');
  });

  it('fails on a missing step and a step into a non-container', () => {
    evalError(S('Attributes', 'missing'));
    evalError(S('CartItems', 3));
    evalError(S('Total', 'Amount'));
    evalError(S('Attributes', 'nothing', 'deeper'));
  });

  it('uses the fallback of .| when any step is missing', () => {
    value(['.|', 'Session', 'Attributes', 'missing', 'x', 42]).toBe(42);
    value(['.|', 'Session', 'CartItems', 9, 'Sku', 'none']).toBe('none');
    value(['.|', 'Session', 'Total', 'Amount', ['+', 1, 1]]).toBe(2);
  });

  it('fails when a root has no value in this evaluation', () => {
    evalError(['.', 'Coupon', 'Value']);
  });
});

describe('logic', () => {
  it('and/or short-circuit and require booleans', () => {
    value(['and', true, true, true]).toBe(true);
    value(['and', true, false, boom]).toBe(false);
    value(['or', false, true, boom]).toBe(true);
    value(['or', false, false]).toBe(false);
    value(['and', true]).toBe(true);
    evalError(['and', true, S('Total')]);
    evalError(['or', false, S('Attributes', 'nothing')]);
  });

  it('not negates a boolean only', () => {
    value(['not', false]).toBe(true);
    evalError(['not', S('Attributes', 'zero')]);
  });

  it('if evaluates only the branch it takes', () => {
    value(['if', true, 1, boom]).toBe(1);
    value(['if', false, boom, 2]).toBe(2);
    evalError(['if', S('Attributes', 'channel'), 1, 2]);
  });

  it('catch yields the fallback instead of an evaluation error', () => {
    value(['catch', -1, boom]).toBe(-1);
    value(['catch', -1, S('Attributes', 'missing')]).toBe(-1);
    value(['catch', -1, 5]).toBe(5);
    evalError(['catch', boom, boom]);
  });
});

describe('compare', () => {
  it('= and != use deep equality and keep types apart', () => {
    value(['=', 1, '1']).toBe(false);
    value(['!=', 1, '1']).toBe(true);
    value(['=', ['list', 1, ['list', 'a']], ['list', 1, ['list', 'a']]]).toBe(true);
    value(['=', ['list', 1, 2], ['list', 2, 1]]).toBe(false);
    value(['=', S('AdditionalCosts'), S('AdditionalCosts')]).toBe(true);
    value(['=', S('Attributes', 'nothing'), null]).toBe(true);
    value(['=', S('Attributes', 'zero'), false]).toBe(false);
  });

  it('orders two numbers', () => {
    value(['<', 1, 2]).toBe(true);
    value(['<=', 2, 2]).toBe(true);
    value(['>', S('Total'), 100]).toBe(true);
    value(['>=', 1, 2]).toBe(false);
  });

  it('orders two RFC 3339 strings as instants', () => {
    value(['<', '2026-01-01T00:00:00Z', '2026-01-01T01:00:00+02:00']).toBe(false);
    value(['>', '2026-01-01T00:00:00Z', '2026-01-01T01:00:00+02:00']).toBe(true);
    value(['<=', S('Attributes', 'when'), ['.', 'Now']]).toBe(true);
  });

  it('fails on anything other than two numbers or two times', () => {
    evalError(['<', 1, S('Attributes', 'text')]);
    evalError(['<', S('Attributes', 'channel'), S('Attributes', 'channel')]);
    evalError(['>', S('Attributes', 'nothing'), 1]);
  });

  it('between is inclusive on numbers and times', () => {
    value(['between', 5, 1, 5]).toBe(true);
    value(['between', 1, 1, 5]).toBe(true);
    value(['between', 6, 1, 5]).toBe(false);
    value(['between', ['.', 'Now'], '2026-03-01T00:00:00Z', '2026-03-02T00:00:00Z']).toBe(true);
    evalError(['between', S('Attributes', 'channel'), 1, 5]);
  });
});

describe('math', () => {
  it('folds variadic arithmetic left to right', () => {
    value(['+', 1, 2, 3]).toBe(6);
    value(['-', 10, 3, 2]).toBe(5);
    value(['*', 2, 3, 4]).toBe(24);
    value(['/', 100, 5, 2]).toBe(10);
  });

  it('computes decimal amounts without binary noise', () => {
    value(['*', 120, 0.1]).toBe(12);
    value(['+', 0.1, 0.2]).toBe(0.3);
    value(['-', S('Total'), S('AdditionalCosts', 'shipping', 'Price')]).toBe(110);
  });

  it('fails on division by zero and on non-numbers from data', () => {
    evalError(['/', 1, 0]);
    evalError(['+', S('Attributes', 'text'), 1]);
    evalError(['*', S('Attributes', 'nothing'), 1]);
  });

  it('fails when a result overflows', () => {
    evalError(['*', 1e308, 10]);
  });

  it('mod takes the sign of the dividend and fails on zero', () => {
    value(['mod', -7, 3]).toBe(-1);
    value(['mod', 7, -3]).toBe(1);
    value(['mod', 7, 3]).toBe(1);
    evalError(['mod', 7, 0]);
  });

  it('abs, floor and ceil work on numbers', () => {
    value(['abs', -2.5]).toBe(2.5);
    value(['floor', -1.5]).toBe(-2);
    value(['ceil', -1.5]).toBe(-1);
    evalError(['abs', S('Attributes', 'text')]);
  });

  it('min and max take numbers or one list', () => {
    value(['min', 3, 1, 2]).toBe(1);
    value(['max', 3, 1, 2]).toBe(3);
    value(['min', 4]).toBe(4);
    value(['max', ['list', 1, 5, 2]]).toBe(5);
    value(['max', ['map', S('CartItems'), [['Item'], ['.', 'Item', 'Price']]]]).toBe(25);
    evalError(['min', ['list']]);
    evalError(['max', ['list', 1, 'x']]);
  });

  it('min of a long list from data does not overflow the stack', () => {
    const big = Array.from({ length: 300_000 }, (_, i) => i + 1);
    value(['min', S('Attributes', 'big')], { Session: { Attributes: { big } } }).toBe(1);
  });

  it('round rounds half away from zero to the given digits', () => {
    value(['round', 2.5]).toBe(3);
    value(['round', -2.5]).toBe(-3);
    value(['round', 7.25]).toBe(7);
    value(['round', 1.125, 2]).toBe(1.13);
    value(['round', -1.125, 2]).toBe(-1.13);
    value(['round', 1.005, 2]).toBe(1.01);
  });
});

describe('blocks and lists', () => {
  const byCategory = (c: string) => [['Item'], ['=', ['.', 'Item', 'Category'], c]];

  it('count counts a list', () => {
    value(['count', S('CartItems')]).toBe(3);
    value(['count', ['list']]).toBe(0);
    evalError(['count', S('Total')]);
  });

  it('sum adds numbers, or the values of a block', () => {
    value(['sum', ['list', 1, 2, 3.5]]).toBe(6.5);
    value(['sum', ['list']]).toBe(0);
    value(['sum', S('CartItems'), [['Item'], ['*', ['.', 'Item', 'Price'], ['.', 'Item', 'Quantity']]]]).toBe(110);
    evalError(['sum', ['list', 1, 'x']]);
  });

  it('filter, exists and every apply a boolean block', () => {
    value(['map', ['filter', S('CartItems'), byCategory('hats')], [['Item'], ['.', 'Item', 'Sku']]]).toEqual(['B']);
    value(['exists', S('CartItems'), byCategory('socks')]).toBe(true);
    value(['exists', S('CartItems'), byCategory('bags')]).toBe(false);
    value(['every', S('CartItems'), [['Item'], ['>', ['.', 'Item', 'Price'], 5]]]).toBe(true);
    value(['every', ['list'], [['x'], false]]).toBe(true);
    value(['exists', ['list'], [['x'], true]]).toBe(false);
    evalError(['filter', ['list', 1], [['x'], ['.', 'x']]]);
  });

  it('map applies a block, the parameter naming the whole value', () => {
    value(['map', ['list', 1, 2, 3], [['x'], ['*', ['.', 'x'], 2]]]).toEqual([2, 4, 6]);
  });

  it('blocks see the parameters of the blocks around them', () => {
    const expr = ['map', S('CartItems'), [['Item'], ['count', ['filter', ['list', 1, 5], [['n'], ['=', ['.', 'n'], ['.', 'Item', 'Quantity']]]]]]];
    value(expr).toEqual([0, 1, 1]);
  });

  it('an inner parameter shadows an outer one of the same name', () => {
    value(['map', ['list', 1], [['x'], ['map', ['list', 'in'], [['x'], ['.', 'x']]]]]).toEqual([['in']]);
  });

  it('a block parameter shadows a root of the same name', () => {
    value(['map', ['list', 7], [['Session'], ['.', 'Session']]]).toEqual([7]);
  });

  it('cartItemsMatching filters Session.CartItems', () => {
    value(['map', ['cartItemsMatching', [['Item'], ['>=', ['.', 'Item', 'Quantity'], 2]]], [['Item'], ['.', 'Item', 'Sku']]]).toEqual(['A', 'C']);
    value(['count', ['cartItemsMatching', byCategory('shoes')]]).toBe(1);
    evalError(['cartItemsMatching', [['Item'], ['.', 'Item', 'Missing']]]);
  });
});
