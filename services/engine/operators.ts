// The operator table: each entry says its arity, what literal type each argument must have (checked
// at compile time) and how to build its closure. New operators are added here and nowhere else.
import { RE2JS } from 're2js';
import { applyTo, FailedBinding, startBlock, type Block, type Env, type Fn } from './runtime.js';
import { addDuration, daysBetween, isDuration, localFields } from './calendar.js';
import { EvalError } from './types.js';
import { clean, deepEqual, formatTime, isTime, parseNumber, roundHalfAway, timeOf, typeName } from './values.js';

export type ArgKind = 'any' | 'number' | 'string' | 'boolean' | 'list' | 'time' | 'regex' | 'numOrTime' | 'block' | 'duration';

export interface OpDef {
  min: number;
  max: number;
  /** The kind of argument i of n. */
  kind: (i: number, n: number) => ArgKind;
  build: (args: Array<Fn | Block>, literals: unknown[]) => Fn;
}

const fns = (args: Array<Fn | Block>) => args as Fn[];
const all = (k: ArgKind) => () => k;
const pos = (...kinds: ArgKind[]) => (i: number) => kinds[i] ?? 'any';

const num = (v: unknown, op: string): number => {
  if (typeof v !== 'number') throw new EvalError(`${op} expects a number, got ${typeName(v)}`);
  return v;
};
const str = (v: unknown, op: string): string => {
  if (typeof v !== 'string') throw new EvalError(`${op} expects a string, got ${typeName(v)}`);
  return v;
};
const bool = (v: unknown, op: string): boolean => {
  if (typeof v !== 'boolean') throw new EvalError(`${op} expects a boolean, got ${typeName(v)}`);
  return v;
};
const list = (v: unknown, op: string): unknown[] => {
  if (!Array.isArray(v)) throw new EvalError(`${op} expects a list, got ${typeName(v)}`);
  return v;
};

/** Two numbers, or two RFC 3339 times as instants; anything else is an error. */
function ordered(a: unknown, b: unknown, op: string): [number, number] {
  if (typeof a === 'number' && typeof b === 'number') return [a, b];
  if (typeof a === 'string' && typeof b === 'string') return [timeOf(a, op), timeOf(b, op)];
  throw new EvalError(`${op} compares two numbers or two times, got ${typeName(a)} and ${typeName(b)}`);
}

const isPrimitive = (v: unknown) => v === null || (typeof v !== 'object' && typeof v !== 'undefined');

/** Deep equality; against a literal scalar it is a plain === (the common case in conditions). */
const equality = (negate: boolean): OpDef => ({
  min: 2,
  max: 2,
  kind: all('any'),
  build: (args, literals) => {
    const [a, b] = fns(args) as [Fn, Fn];
    if (isPrimitive(literals[1])) {
      const lit = literals[1];
      return negate ? (env) => a(env) !== lit : (env) => a(env) === lit;
    }
    if (isPrimitive(literals[0])) {
      const lit = literals[0];
      return negate ? (env) => b(env) !== lit : (env) => b(env) === lit;
    }
    return negate ? (env) => !deepEqual(a(env), b(env)) : (env) => deepEqual(a(env), b(env));
  },
});

const compare = (op: string, test: (x: number, y: number) => boolean): OpDef => ({
  min: 2,
  max: 2,
  kind: all('numOrTime'),
  build: (args) => {
    const [a, b] = fns(args) as [Fn, Fn];
    return (env) => {
      const x = a(env);
      const y = b(env);
      // Numbers are the common case: no tuple is made for them.
      if (typeof x === 'number' && typeof y === 'number') return test(x, y);
      const [tx, ty] = ordered(x, y, op);
      return test(tx, ty);
    };
  },
});

const arithmetic = (op: string, f: (x: number, y: number) => number): OpDef => ({
  min: 1,
  max: Infinity,
  kind: all('number'),
  build: (args) => {
    const a = fns(args);
    return (env) => {
      let acc = num(a[0]!(env), op);
      for (let i = 1; i < a.length; i++) acc = clean(f(acc, num(a[i]!(env), op)));
      // JSON has no Infinity: an overflow would leave the engine as null, so it is an error here.
      if (!Number.isFinite(acc)) throw new EvalError(`${op}: the result is out of range`);
      return acc;
    };
  },
});

/** An operator of one argument: f gets the evaluated argument. */
const unary = (kind: ArgKind, f: (v: unknown) => unknown): OpDef => ({
  min: 1,
  max: 1,
  kind: all(kind),
  build: (args) => {
    const [a] = fns(args) as [Fn];
    return (env) => f(a(env));
  },
});

const unaryNum = (op: string, f: (x: number) => number): OpDef => unary('number', (v) => f(num(v, op)));

const stringPair = (op: string, f: (s: string, t: string) => unknown): OpDef => ({
  min: 2,
  max: 2,
  kind: all('string'),
  build: (args) => {
    const [a, b] = fns(args) as [Fn, Fn];
    return (env) => f(str(a(env), op), str(b(env), op));
  },
});

const minMax = (op: string, pick: (xs: number[]) => number): OpDef => ({
  min: 1,
  max: Infinity,
  kind: (_i, n) => (n === 1 ? 'any' : 'number'),
  build: (args) => {
    const a = fns(args);
    return (env) => {
      let values: unknown[];
      if (a.length === 1) {
        const only = a[0]!(env);
        values = Array.isArray(only) ? only : [only];
      } else values = a.map((f) => f(env));
      if (values.length === 0) throw new EvalError(`${op} of an empty list`);
      return pick(values.map((v) => num(v, op)));
    };
  },
});

const listBlock = (op: string, run: (xs: unknown[], block: Block, env: Env) => unknown): OpDef => ({
  min: 2,
  max: 2,
  kind: pos('list', 'block'),
  build: (args) => {
    const xs = args[0] as Fn;
    const block = args[1] as Block;
    return (env) => run(list(xs(env), op), block, env);
  },
});

const regexCache = new Map<string, RE2JS>();
/** RE2 semantics in linear time (re2js); a malformed pattern throws. */
export function compileRegex(pattern: string): RE2JS {
  let re = regexCache.get(pattern);
  if (!re) {
    re = RE2JS.compile(pattern);
    if (regexCache.size > 1000) regexCache.clear();
    regexCache.set(pattern, re);
  }
  return re;
}

const toStringValue = (v: unknown): string => {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (v === null) return 'null';
  return JSON.stringify(v);
};

const sortBy = (op: string, key: (v: unknown) => number | string): OpDef =>
  listBlock(op, (xs, block, env) => {
    const run = startBlock(block, env);
    return xs
      .map((x, i) => ({ x, i, k: key(applyTo(run, x)) }))
      .sort((a, b) => (a.k < b.k ? -1 : a.k > b.k ? 1 : a.i - b.i))
      .map((e) => e.x);
  });

const shift = (op: string, sign: 1 | -1): OpDef => ({
  min: 2,
  max: 2,
  kind: pos('time', 'duration'),
  build: (args) => {
    const [t, d] = fns(args) as [Fn, Fn];
    return (env) => formatTime(addDuration(timeOf(t(env), op), str(d(env), op), env.timezone, sign));
  },
});

const localField = (op: string, field: 'year' | 'month' | 'day' | 'hour' | 'minute' | 'weekday'): OpDef => ({
  min: 1,
  max: 1,
  kind: all('time'),
  build: (args) => {
    const [t] = fns(args) as [Fn];
    return (env) => localFields(timeOf(t(env), op), env.timezone)[field];
  },
});

export const operators: Record<string, OpDef> = {
  // logic
  and: {
    min: 1,
    max: Infinity,
    kind: all('boolean'),
    build: (args) => {
      const a = fns(args);
      if (a.length === 2) {
        const [x, y] = a as [Fn, Fn];
        return (env) => bool(x(env), 'and') && bool(y(env), 'and');
      }
      return (env) => {
        for (const f of a) if (!bool(f(env), 'and')) return false;
        return true;
      };
    },
  },
  or: {
    min: 1,
    max: Infinity,
    kind: all('boolean'),
    build: (args) => {
      const a = fns(args);
      if (a.length === 2) {
        const [x, y] = a as [Fn, Fn];
        return (env) => bool(x(env), 'or') || bool(y(env), 'or');
      }
      return (env) => {
        for (const f of a) if (bool(f(env), 'or')) return true;
        return false;
      };
    },
  },
  not: unary('boolean', (v) => !bool(v, 'not')),
  if: {
    min: 3,
    max: 3,
    kind: pos('boolean', 'any', 'any'),
    build: (args) => {
      const [c, t, e] = fns(args) as [Fn, Fn, Fn];
      return (env) => (bool(c(env), 'if') ? t(env) : e(env));
    },
  },
  catch: {
    min: 2,
    max: 2,
    kind: all('any'),
    build: (args) => {
      const [fallback, expr] = fns(args) as [Fn, Fn];
      return (env) => {
        try {
          return expr(env);
        } catch (e) {
          if (e instanceof EvalError && e.message !== 'evaluation budget exceeded') return fallback(env);
          throw e;
        }
      };
    },
  },
  // compare
  '=': equality(false),
  '!=': equality(true),
  '<': compare('<', (x, y) => x < y),
  '<=': compare('<=', (x, y) => x <= y),
  '>': compare('>', (x, y) => x > y),
  '>=': compare('>=', (x, y) => x >= y),
  between: {
    min: 3,
    max: 3,
    kind: all('numOrTime'),
    build: (args) => {
      const [x, lo, hi] = fns(args) as [Fn, Fn, Fn];
      return (env) => {
        const v = x(env);
        const [a, l] = ordered(v, lo(env), 'between');
        const [, h] = ordered(v, hi(env), 'between');
        return a >= l && a <= h;
      };
    },
  },
  // math
  '+': arithmetic('+', (x, y) => x + y),
  '-': arithmetic('-', (x, y) => x - y),
  '*': arithmetic('*', (x, y) => x * y),
  '/': arithmetic('/', (x, y) => {
    if (y === 0) throw new EvalError('division by zero');
    return x / y;
  }),
  mod: {
    min: 2,
    max: 2,
    kind: all('number'),
    build: (args) => {
      const [a, b] = fns(args) as [Fn, Fn];
      return (env) => {
        const x = num(a(env), 'mod');
        const y = num(b(env), 'mod');
        if (y === 0) throw new EvalError('mod by zero');
        return clean(x % y);
      };
    },
  },
  abs: unaryNum('abs', Math.abs),
  floor: unaryNum('floor', Math.floor),
  ceil: unaryNum('ceil', Math.ceil),
  // A loop, not Math.min(...xs): spreading a long list from request data overflows the stack.
  min: minMax('min', (xs) => xs.reduce((m, x) => (x < m ? x : m))),
  max: minMax('max', (xs) => xs.reduce((m, x) => (x > m ? x : m))),
  round: {
    min: 1,
    max: 2,
    kind: all('number'),
    build: (args) => {
      const [x, d] = fns(args) as [Fn, Fn | undefined];
      return (env) => {
        const digits = d ? num(d(env), 'round') : 0;
        if (!Number.isInteger(digits) || digits < 0 || digits > 15) throw new EvalError('round digits must be an integer from 0 to 15');
        return roundHalfAway(num(x(env), 'round'), digits);
      };
    },
  },
  // string
  concat: {
    min: 1,
    max: Infinity,
    kind: all('string'),
    build: (args) => {
      const a = fns(args);
      return (env) => a.map((f) => str(f(env), 'concat')).join('');
    },
  },
  lower: unary('string', (v) => str(v, 'lower').toLowerCase()),
  upper: unary('string', (v) => str(v, 'upper').toUpperCase()),
  length: unary('string', (v) => [...str(v, 'length')].length),
  contains: stringPair('contains', (s, t) => s.includes(t)),
  notContains: stringPair('notContains', (s, t) => !s.includes(t)),
  startsWith: stringPair('startsWith', (s, t) => s.startsWith(t)),
  endsWith: stringPair('endsWith', (s, t) => s.endsWith(t)),
  '~': {
    min: 2,
    max: 2,
    kind: pos('string', 'regex'),
    build: (args) => {
      const [s, p] = fns(args) as [Fn, Fn];
      return (env) => {
        const pattern = str(p(env), '~');
        let re: RE2JS;
        try {
          re = compileRegex(pattern);
        } catch (e) {
          throw new EvalError(`malformed regular expression: ${(e as Error).message}`);
        }
        return re.matcher(str(s(env), '~')).find();
      };
    },
  },
  split: stringPair('split', (s, sep) => (sep === '' ? [...s] : s.split(sep))),
  join: {
    min: 2,
    max: 2,
    kind: pos('list', 'string'),
    build: (args) => {
      const [xs, sep] = fns(args) as [Fn, Fn];
      return (env) => list(xs(env), 'join').map((v) => str(v, 'join')).join(str(sep(env), 'join'));
    },
  },
  toString: unary('any', toStringValue),
  toNumber: {
    min: 1,
    max: 1,
    kind: all('any'),
    build: (args) => {
      const [a] = fns(args) as [Fn];
      return (env) => {
        const v = a(env);
        if (typeof v === 'number') return v;
        const n = parseNumber(str(v, 'toNumber'));
        if (n === undefined) throw new EvalError(`toNumber cannot read ${JSON.stringify(v)}`);
        return n;
      };
    },
  },
  // list
  list: {
    min: 0,
    max: Infinity,
    kind: all('any'),
    build: (args, literals) => {
      // A list of literals is built once: no operator changes a list it is given.
      if (literals.every((l) => l === null || typeof l !== 'object')) {
        const constant = Object.freeze([...literals]);
        return () => constant;
      }
      const a = fns(args);
      return (env) => a.map((f) => f(env));
    },
  },
  count: unary('list', (v) => list(v, 'count').length),
  isEmpty: unary('list', (v) => list(v, 'isEmpty').length === 0),
  in: {
    min: 2,
    max: 2,
    kind: pos('any', 'list'),
    build: (args) => {
      const [x, xs] = fns(args) as [Fn, Fn];
      return (env) => {
        const v = x(env);
        const items = list(xs(env), 'in');
        if (isPrimitive(v)) {
          for (let i = 0; i < items.length; i++) if (items[i] === v) return true;
          return false;
        }
        for (let i = 0; i < items.length; i++) if (deepEqual(items[i], v)) return true;
        return false;
      };
    },
  },
  head: {
    min: 1,
    max: 1,
    kind: all('list'),
    build: (args) => {
      const [a] = fns(args) as [Fn];
      return (env) => {
        const xs = list(a(env), 'head');
        if (xs.length === 0) throw new EvalError('head of an empty list');
        return xs[0];
      };
    },
  },
  tail: unary('list', (v) => list(v, 'tail').slice(1)),
  item: {
    min: 2,
    max: 2,
    kind: pos('list', 'number'),
    build: (args) => {
      const [a, i] = fns(args) as [Fn, Fn];
      return (env) => {
        const xs = list(a(env), 'item');
        const index = num(i(env), 'item');
        if (!Number.isInteger(index) || index < 0 || index >= xs.length) throw new EvalError(`item index ${index} is out of range`);
        return xs[index];
      };
    },
  },
  sum: {
    min: 1,
    max: 2,
    kind: pos('list', 'block'),
    build: (args) => {
      const xs = args[0] as Fn;
      const block = args[1] as Block | undefined;
      return (env) => {
        let total = 0;
        const run = block ? startBlock(block, env) : undefined;
        for (const x of list(xs(env), 'sum')) total = clean(total + num(run ? applyTo(run, x) : x, 'sum'));
        return total;
      };
    },
  },
  map: listBlock('map', (xs, b, env) => {
    const run = startBlock(b, env);
    const out = new Array<unknown>(xs.length);
    for (let i = 0; i < xs.length; i++) out[i] = applyTo(run, xs[i]);
    return out;
  }),
  filter: listBlock('filter', (xs, b, env) => {
    const run = startBlock(b, env);
    const out: unknown[] = [];
    for (const x of xs) if (bool(applyTo(run, x), 'filter')) out.push(x);
    return out;
  }),
  exists: listBlock('exists', (xs, b, env) => {
    const run = startBlock(b, env);
    for (const x of xs) if (bool(applyTo(run, x), 'exists')) return true;
    return false;
  }),
  every: listBlock('every', (xs, b, env) => {
    const run = startBlock(b, env);
    for (const x of xs) if (!bool(applyTo(run, x), 'every')) return false;
    return true;
  }),
  sortByNumber: sortBy('sortByNumber', (v) => num(v, 'sortByNumber')),
  sortByString: listBlock('sortByString', (xs, block, env) => {
    const run = startBlock(block, env);
    return xs
      .map((x, i) => ({ x, i, k: [...str(applyTo(run, x), 'sortByString')].map((c) => c.codePointAt(0)!) }))
      .sort((a, b) => {
        for (let j = 0; j < Math.min(a.k.length, b.k.length); j++) if (a.k[j] !== b.k[j]) return a.k[j]! - b.k[j]!;
        return a.k.length - b.k.length || a.i - b.i;
      })
      .map((e) => e.x);
  }),
  reverse: unary('list', (v) => [...list(v, 'reverse')].reverse()),
  append: {
    min: 2,
    max: 2,
    kind: pos('list', 'any'),
    build: (args) => {
      const [a, x] = fns(args) as [Fn, Fn];
      return (env) => [...list(a(env), 'append'), x(env)];
    },
  },
  unique: {
    min: 1,
    max: 1,
    kind: all('list'),
    build: (args) => {
      const [a] = fns(args) as [Fn];
      return (env) => {
        const out: unknown[] = [];
        for (const v of list(a(env), 'unique')) if (!out.some((o) => deepEqual(o, v))) out.push(v);
        return out;
      };
    },
  },
  cartItemsMatching: {
    min: 1,
    max: 1,
    kind: all('block'),
    build: (args) => {
      const block = args[0] as Block;
      return (env) => {
        const session = env.roots.Session as { CartItems?: unknown } | undefined;
        const run = startBlock(block, env);
        const out: unknown[] = [];
        for (const x of list(session?.CartItems, 'cartItemsMatching')) if (bool(applyTo(run, x), 'cartItemsMatching')) out.push(x);
        return out;
      };
    },
  },
  // time
  now: { min: 0, max: 0, kind: all('any'), build: () => (env) => env.roots.Now },
  parseTime: {
    min: 1,
    max: 1,
    kind: all('time'),
    build: (args) => {
      const [a] = fns(args) as [Fn];
      return (env) => formatTime(timeOf(a(env), 'parseTime'));
    },
  },
  after: { min: 2, max: 2, kind: all('time'), build: (args) => { const [a, b] = fns(args) as [Fn, Fn]; return (env) => timeOf(a(env), 'after') > timeOf(b(env), 'after'); } },
  before: { min: 2, max: 2, kind: all('time'), build: (args) => { const [a, b] = fns(args) as [Fn, Fn]; return (env) => timeOf(a(env), 'before') < timeOf(b(env), 'before'); } },
  betweenTimes: {
    min: 3,
    max: 3,
    kind: all('time'),
    build: (args) => {
      const [t, s, e] = fns(args) as [Fn, Fn, Fn];
      return (env) => {
        const x = timeOf(t(env), 'betweenTimes');
        return x >= timeOf(s(env), 'betweenTimes') && x <= timeOf(e(env), 'betweenTimes');
      };
    },
  },
  addDuration: shift('addDuration', 1),
  subDuration: shift('subDuration', -1),
  daysBetween: {
    min: 2,
    max: 2,
    kind: all('time'),
    build: (args) => {
      const [a, b] = fns(args) as [Fn, Fn];
      return (env) => daysBetween(timeOf(a(env), 'daysBetween'), timeOf(b(env), 'daysBetween'), env.timezone);
    },
  },
  hour: localField('hour', 'hour'),
  minute: localField('minute', 'minute'),
  weekday: localField('weekday', 'weekday'),
  monthDay: localField('monthDay', 'day'),
  month: localField('month', 'month'),
  year: localField('year', 'year'),
  // domain
  couponValid: {
    min: 0,
    max: 0,
    kind: all('any'),
    build: () => (env) => {
      const c = env.roots.Coupon;
      const valid = c !== undefined && !(c instanceof FailedBinding);
      if (valid && env.ctx) env.ctx.usedCoupon = true;
      return valid;
    },
  },
  referralValid: {
    min: 0,
    max: 0,
    kind: all('any'),
    build: () => (env) => {
      const r = env.roots.Referral;
      const valid = r !== undefined && !(r instanceof FailedBinding);
      if (valid && env.ctx) env.ctx.usedReferral = true;
      return valid;
    },
  },
  inAudience: {
    min: 1,
    max: 1,
    kind: all('any'),
    build: (args) => {
      const [a] = fns(args) as [Fn];
      return (env) => {
        const id = a(env);
        if (typeof id !== 'number' && typeof id !== 'string') throw new EvalError(`inAudience expects an audience id, got ${typeName(id)}`);
        const audiences = (env.roots.Profile as { Audiences?: unknown } | undefined)?.Audiences;
        return Array.isArray(audiences) && audiences.some((x) => String(x) === String(id));
      };
    },
  },
  loyaltyBalance: {
    min: 1,
    max: 2,
    kind: pos('any', 'string'),
    build: (args) => {
      const [p, sub] = fns(args) as [Fn, Fn | undefined];
      return (env) => {
        const program = p(env);
        if (typeof program !== 'number' && typeof program !== 'string') throw new EvalError(`loyaltyBalance expects a program id, got ${typeName(program)}`);
        // A profile joins a program at its first transaction: no entry is a balance of 0.
        const entry = env.ctx?.input.facts?.loyalty?.[String(program)];
        if (!entry) return 0;
        if (!sub) return entry.balance;
        return entry.subledgers?.[str(sub(env), 'loyaltyBalance')] ?? 0;
      };
    },
  },
  eventType: {
    min: 1,
    max: 1,
    kind: all('string'),
    build: (args) => {
      const [a] = fns(args) as [Fn];
      return (env) => deepEqual((env.roots.Event as { Type?: unknown } | undefined)?.Type, a(env));
    },
  },
};

/** Is the literal acceptable where an argument of this kind is expected? */
export function literalFits(kind: ArgKind, v: unknown): string | undefined {
  switch (kind) {
    case 'any':
      return undefined;
    case 'number':
      return typeof v === 'number' ? undefined : `expected a number, got ${typeName(v)}`;
    case 'string':
      return typeof v === 'string' ? undefined : `expected a string, got ${typeName(v)}`;
    case 'boolean':
      return typeof v === 'boolean' ? undefined : `expected a boolean, got ${typeName(v)}`;
    case 'list':
      return `expected a list, got ${typeName(v)}`;
    case 'block':
      return `expected a block, got ${typeName(v)}`;
    case 'time':
      return isTime(v) ? undefined : `expected an RFC 3339 time, got ${JSON.stringify(v)}`;
    case 'numOrTime':
      return typeof v === 'number' || isTime(v) ? undefined : `expected a number or an RFC 3339 time, got ${JSON.stringify(v)}`;
    case 'duration':
      return isDuration(v) ? undefined : `expected a duration such as 30s, 40m, 1h, 7D, 2W, 1M or 1Y, got ${JSON.stringify(v)}`;
    case 'regex':
      if (typeof v !== 'string') return `expected a regular expression, got ${typeName(v)}`;
      try {
        compileRegex(v);
        return undefined;
      } catch (e) {
        return `malformed regular expression: ${(e as Error).message}`;
      }
  }
}
