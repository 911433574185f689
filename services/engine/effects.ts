// Effect calls of a rule (rules.md section 4): compiled like expressions, emitting effect records.
import { compileExpr, type Scope } from './compile.js';
import { applyTo, startBlock, type Env, type Fn } from './runtime.js';
import { EvalError } from './types.js';
import { typeName } from './values.js';

export interface RawEffect {
  effectType: string;
  props: Record<string, unknown>;
}

export type CompiledEffect = (env: Env, out: RawEffect[]) => void;

type ArgKind = 'string' | 'number' | 'any' | 'options';

interface EffectDef {
  /** Kinds of the positional arguments; an 'options' kind must be last and may be omitted. */
  args: ArgKind[];
  optional?: number;
  emit: (values: unknown[], env: Env) => RawEffect | undefined;
}

const str = (v: unknown, what: string): string => {
  if (typeof v !== 'string') throw new EvalError(`${what} must be a string, got ${typeName(v)}`);
  return v;
};
const num = (v: unknown, what: string): number => {
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new EvalError(`${what} must be a number, got ${typeName(v)}`);
  return v;
};

/** The position of the cart item bound by the innermost block, for per-item effects in forEach. */
function boundItemPosition(env: Env): number | undefined {
  for (let f = env.frame; f; f = f.parent) {
    const v = f.value as { Position?: unknown } | null;
    if (v && typeof v === 'object' && typeof v.Position === 'number') return v.Position;
  }
  return undefined;
}

const effects: Record<string, EffectDef> = {
  setDiscount: {
    args: ['string', 'number'],
    emit: ([name, value]) => ({ effectType: 'setDiscount', props: { name: str(name, 'name'), value: num(value, 'value') } }),
  },
  setDiscountPerItem: {
    args: ['string', 'number', 'number'],
    optional: 1,
    emit: ([name, value, position], env) => {
      const p = position === undefined ? boundItemPosition(env) : num(position, 'position');
      if (p === undefined) throw new EvalError('setDiscountPerItem needs a position or a cart item bound by forEach');
      return { effectType: 'setDiscountPerItem', props: { name: str(name, 'name'), value: num(value, 'value'), position: p } };
    },
  },
  setDiscountPerAdditionalCost: {
    args: ['string', 'string', 'number'],
    emit: ([name, cost, value]) => ({
      effectType: 'setDiscountPerAdditionalCost',
      props: { name: str(name, 'name'), additionalCost: str(cost, 'additional cost'), value: num(value, 'value') },
    }),
  },
  addFreeItem: {
    args: ['string', 'string'],
    emit: ([sku, name]) => ({ effectType: 'addFreeItem', props: { sku: str(sku, 'sku'), name: str(name, 'name') } }),
  },
  showNotification: {
    args: ['string', 'string', 'string'],
    emit: ([type, title, body]) => ({
      effectType: 'showNotification',
      props: { notificationType: str(type, 'type'), title: str(title, 'title'), body: str(body, 'body') },
    }),
  },
  customEffect: {
    args: ['string', 'any'],
    emit: ([name, payload]) => ({ effectType: 'customEffect', props: { name: str(name, 'name'), payload } }),
  },
  noop: { args: [], emit: () => undefined },
};

/** Effects of rules.md section 4 that arrive with the domains behind them (coupons, loyalty, ...). */
const LATER = new Set([
  'createCoupon',
  'createReferral',
  'addLoyaltyPoints',
  'deductLoyaltyPoints',
  'increaseAchievementProgress',
  'triggerWebhook',
  'updateAttribute',
  'addToAudience',
  'removeFromAudience',
]);

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

export function compileEffect(node: unknown, pointer: string, scope: Scope): CompiledEffect {
  const fail = (p: string, message: string): CompiledEffect => {
    scope.issues.push({ message, pointer: p, ...(scope.ruleIndex !== undefined ? { ruleIndex: scope.ruleIndex } : {}) });
    return () => {
      throw new EvalError(`not compiled: ${message}`);
    };
  };
  if (!Array.isArray(node) || typeof node[0] !== 'string') return fail(pointer, 'an effect is a call ["effectName", ...]');
  const name = node[0];
  const args = node.slice(1);
  if (name === 'forEach') {
    if (args.length !== 2) return fail(pointer, `forEach takes 2 arguments, got ${args.length}`);
    const listFn = compileExpr(args[0], `${pointer}/1`, scope);
    const blockNode = args[1];
    if (!Array.isArray(blockNode) || !Array.isArray(blockNode[0]) || blockNode.length !== 2) return fail(`${pointer}/2`, 'forEach takes a block [["param"], effect]');
    const params = blockNode[0] as unknown[];
    if (params.length !== 1 || typeof params[0] !== 'string') return fail(`${pointer}/2/0`, `this block takes exactly 1 parameter, got ${params.length}`);
    const param = params[0];
    const inner = compileEffect(blockNode[1], `${pointer}/2/1`, { ...scope, locals: [...scope.locals, param] });
    return (env, out) => {
      const xs = listFn(env);
      if (!Array.isArray(xs)) throw new EvalError(`forEach expects a list, got ${typeName(xs)}`);
      const run = startBlock({ param, body: (e) => (inner(e, out), undefined) }, env);
      for (const x of xs) applyTo(run, x);
    };
  }
  if (LATER.has(name)) return fail(pointer, `effect ${name} is not supported by this version yet`);
  const def = Object.hasOwn(effects, name) ? effects[name] : undefined;
  if (!def) return fail(pointer, `unknown effect ${JSON.stringify(name)}`);
  const max = def.args.length;
  const min = max - (def.optional ?? 0);
  if (args.length < min || args.length > max) {
    return fail(pointer, `${name} takes ${min === max ? min : `${min} to ${max}`} argument${max === 1 ? '' : 's'}, got ${args.length}`);
  }
  let ok = true;
  const compiled: Fn[] = args.map((arg, i) => {
    const kind = def.args[i]!;
    const p = `${pointer}/${i + 1}`;
    if (kind === 'any' && isRecord(arg) && i === args.length - 1) {
      // An option map: its values are expressions.
      const entries = Object.entries(arg).map(([k, v]) => [k, compileExpr(v, `${p}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`, scope)] as const);
      return (env: Env) => Object.fromEntries(entries.map(([k, f]) => [k, f(env)]));
    }
    if (!Array.isArray(arg) && arg !== null && typeof arg !== 'object') {
      if ((kind === 'string' && typeof arg !== 'string') || (kind === 'number' && typeof arg !== 'number')) {
        ok = false;
        scope.issues.push({ message: `${name}: expected a ${kind}, got ${typeName(arg)}`, pointer: p, ...(scope.ruleIndex !== undefined ? { ruleIndex: scope.ruleIndex } : {}) });
      }
    }
    return compileExpr(arg, p, scope);
  });
  if (!ok) return () => { throw new EvalError(`not compiled: ${name}`); };
  return (env, out) => {
    const effect = def.emit(compiled.map((f) => f(env)), env);
    if (effect) out.push(effect);
  };
}
