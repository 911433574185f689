// The compiler: a ruleset's JSON expressions become closures once; every problem that can be seen
// without data (unknown operator, arity, literal types, unknown root, block shape) is reported
// with the JSON pointer of the offending node.
import { FailedBinding, type Block, type Fn } from './runtime.js';
import { literalFits, operators, type ArgKind } from './operators.js';
import { EvalError, RuleCompileError, type RuleCompileIssue, type RulesetSpec } from './types.js';
import { typeName } from './values.js';
import { compileEffect, type CompiledEffect } from './effects.js';

export const BUILTIN_ROOTS = ['Session', 'Item', 'Profile', 'Event', 'Application', 'Campaign', 'Coupon', 'Referral', 'Now'] as const;

export interface Scope {
  /** Roots and binding names visible here. */
  roots: ReadonlySet<string>;
  /** Block parameters in scope, innermost last. */
  locals: readonly string[];
  issues: RuleCompileIssue[];
  ruleIndex?: number;
  /** Wrap calls so an evaluation error records the pointer of the node that failed (slower). */
  trace?: boolean;
}

function traced(fn: Fn, pointer: string, scope: Scope): Fn {
  if (!scope.trace) return fn;
  return (env) => {
    try {
      return fn(env);
    } catch (e) {
      if (e instanceof EvalError && e.pointer === undefined) e.pointer = pointer;
      throw e;
    }
  };
}

const fail = (scope: Scope, pointer: string, message: string): Fn => {
  scope.issues.push({ message, pointer, ...(scope.ruleIndex !== undefined ? { ruleIndex: scope.ruleIndex } : {}) });
  return () => {
    throw new EvalError(`not compiled: ${message}`);
  };
};

const isBlockForm = (node: unknown): node is [string[], unknown] =>
  Array.isArray(node) && node.length > 0 && Array.isArray(node[0]) && (node[0] as unknown[]).every((p) => typeof p === 'string');

const BUILTIN = new Set<string>(['Session', 'Item', 'Profile', 'Event', 'Application', 'Campaign', 'Coupon', 'Referral', 'Now']);
const shared = new Map<string, Fn>();
const MAX_SHARED = 100_000;

/**
 * Compiles an expression. Identical subexpressions (same JSON, same block parameters and binding
 * names in scope) share one closure across every ruleset: a thousand campaigns that all test
 * `Profile.Attributes.tier` hold one closure for it, which keeps the compiled form small and the
 * call sites that reach it few.
 */
export function compileExpr(node: unknown, pointer: string, scope: Scope): Fn {
  if (scope.trace || !Array.isArray(node)) return compileExprOnce(node, pointer, scope);
  const bindings = [...scope.roots].filter((r) => !BUILTIN.has(r)).sort().join(',');
  const key = `${JSON.stringify(node)}|${scope.locals.join(',')}|${bindings}`;
  const hit = shared.get(key);
  if (hit) return hit;
  const before = scope.issues.length;
  const fn = compileExprOnce(node, pointer, scope);
  if (scope.issues.length === before) {
    if (shared.size >= MAX_SHARED) shared.clear();
    shared.set(key, fn);
  }
  return fn;
}

function compileExprOnce(node: unknown, pointer: string, scope: Scope): Fn {
  if (node === null || typeof node === 'number' || typeof node === 'string' || typeof node === 'boolean') {
    return () => node;
  }
  if (!Array.isArray(node)) {
    return fail(scope, pointer, `a ${typeName(node)} is not an expression (an option map is only allowed as the last argument of an effect)`);
  }
  if (node.length === 0) return fail(scope, pointer, 'an empty array is not an expression; write ["list"] for an empty list');
  const head = node[0];
  if (isBlockForm(node)) return fail(scope, pointer, 'a block is only allowed as an argument of an operator that takes one');
  if (typeof head !== 'string') return fail(scope, pointer, 'an array must be a call ["op", ...], a block or a ["list", ...] form');
  if (head === '.' || head === '.|') return traced(compilePath(node, pointer, scope), pointer, scope);
  const op = Object.hasOwn(operators, head) ? operators[head] : undefined;
  if (!op) return fail(scope, pointer, `unknown operator ${JSON.stringify(head)}`);
  const args = node.slice(1);
  if (args.length < op.min || args.length > op.max) {
    const want = op.max === Infinity ? `at least ${op.min}` : op.min === op.max ? `${op.min}` : `${op.min} to ${op.max}`;
    const plural = op.max === 1 || (op.min === 1 && op.max === Infinity) ? '' : 's';
    return fail(scope, pointer, `${head} takes ${want} argument${plural}, got ${args.length}`);
  }
  let ok = true;
  const compiled = args.map((arg, i): Fn | Block => {
    const kind: ArgKind = op.kind(i, args.length);
    const argPointer = `${pointer}/${i + 1}`;
    if (kind === 'block') {
      const block = compileBlock(arg, argPointer, scope);
      if (!block) ok = false;
      return block ?? { param: '_', body: () => undefined };
    }
    if (!Array.isArray(arg) && (arg === null || typeof arg !== 'object')) {
      const problem = literalFits(kind, arg);
      if (problem) {
        ok = false;
        return fail(scope, argPointer, `${head}: ${problem}`);
      }
    }
    return compileExpr(arg, argPointer, scope);
  });
  if (!ok) return () => { throw new EvalError(`not compiled: ${head}`); };
  return traced(op.build(compiled, args), pointer, scope);
}

export function compileBlock(node: unknown, pointer: string, scope: Scope): Block | undefined {
  if (!isBlockForm(node)) {
    fail(scope, pointer, 'expected a block [["param"], body]');
    return undefined;
  }
  if (node.length !== 2) {
    fail(scope, pointer, 'a block is [["param"], body]');
    return undefined;
  }
  const params = node[0];
  if (params.length !== 1) {
    fail(scope, `${pointer}/0`, `this block takes exactly 1 parameter, got ${params.length}`);
    return undefined;
  }
  const param = params[0]!;
  const body = compileExpr(node[1], `${pointer}/1`, { ...scope, locals: [...scope.locals, param] });
  const guard = guardOf(node[1], param);
  return guard ? { param, body, guard } : { param, body };
}

/**
 * The cart-item filter shape `["=", [".", p, "key"], literal]`, alone or first in an `and`: when
 * an element's key holds another value the body is false, so it need not run (an element without
 * the key still runs the body, which reports the missing key as before).
 */
function guardOf(body: unknown, param: string): Block['guard'] | undefined {
  let eq = body;
  if (Array.isArray(body) && body[0] === 'and' && body.length >= 2) eq = body[1];
  if (!Array.isArray(eq) || eq[0] !== '=' || eq.length !== 3) return undefined;
  const [, path, value] = eq as [string, unknown, unknown];
  if (!(value === null || ['string', 'number', 'boolean'].includes(typeof value))) return undefined;
  if (!Array.isArray(path) || path[0] !== '.' || path.length !== 3 || path[1] !== param) return undefined;
  const key = path[2];
  if (typeof key !== 'string' || key in Object.prototype) return undefined;
  return { key, value: value as string | number | boolean | null };
}

function compilePath(node: unknown[], pointer: string, scope: Scope): Fn {
  const withFallback = node[0] === '.|';
  const min = withFallback ? 3 : 2;
  if (node.length < min) return fail(scope, pointer, withFallback ? '.| takes a root, keys and a fallback' : '. takes a root and keys');
  const root = node[1];
  if (typeof root !== 'string') return fail(scope, `${pointer}/1`, 'a path starts with the name of a root');
  const keys = node.slice(2, withFallback ? -1 : undefined);
  for (const [i, k] of keys.entries()) {
    if (typeof k !== 'string' && !(typeof k === 'number' && Number.isInteger(k) && k >= 0)) {
      return fail(scope, `${pointer}/${i + 2}`, 'a path key is a string or a list index');
    }
  }
  // A block parameter is found by its lexical depth (no name look-up at run time).
  const localIndex = scope.locals.lastIndexOf(root);
  const depth = localIndex < 0 ? -1 : scope.locals.length - 1 - localIndex;
  if (depth < 0 && !scope.roots.has(root)) return fail(scope, `${pointer}/1`, `unknown root ${JSON.stringify(root)}`);
  const fallback = withFallback ? compileExpr(node[node.length - 1], `${pointer}/${node.length - 1}`, scope) : undefined;
  // The error message names the path walked so far; it is built only when a step fails.
  const at = (i: number) => [root, ...keys.slice(0, i)].join('.');
  // Keys that Object.prototype also has must be checked as own properties; any other key can be
  // read directly and checked only when it comes back undefined (JSON has no undefined values).
  const direct = keys.map((k) => typeof k === 'string' && !(k in Object.prototype));
  const step = (value: unknown, i: number): unknown => {
    const k = keys[i] as string | number;
    if (value !== null && typeof value === 'object') {
      if (Array.isArray(value)) {
        if (typeof k === 'number') {
          if (k >= value.length) throw new EvalError(`${at(i)}[${k}] is out of range`);
          return value[k];
        }
      } else if (direct[i]) {
        const v = (value as Record<string, unknown>)[k as string];
        if (v !== undefined || Object.hasOwn(value, k)) return v;
      } else if (Object.hasOwn(value, k)) {
        return (value as Record<string | number, unknown>)[k];
      }
    }
    throw new EvalError(`${at(i)} has no ${JSON.stringify(k)}`);
  };
  const n = keys.length;
  const walkKeys =
    n === 0
      ? (v: unknown) => v
      : n === 1
        ? (v: unknown) => step(v, 0)
        : n === 2
          ? (v: unknown) => step(step(v, 0), 1)
          : (start: unknown): unknown => {
              let value = start;
              for (let i = 0; i < n; i++) value = step(value, i);
              return value;
            };
  const key0 = keys[0];
  const walk: Fn =
    depth === 0 && n === 1 && direct[0]
      ? // The hot shape inside blocks: [".", "Item", "Price"].
        (env) => {
          const v = env.frame!.value;
          if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
            const r = (v as Record<string, unknown>)[key0 as string];
            if (r !== undefined) return r;
          }
          return step(v, 0);
        }
      : depth >= 0
      ? (env) => {
          let f = env.frame!;
          for (let i = 0; i < depth; i++) f = f.parent!;
          return walkKeys(f.value);
        }
      : (env) => {
          const roots = env.roots;
          if (!Object.hasOwn(roots, root)) throw new EvalError(`${root} is not available here`);
          const value = roots[root];
          if (value instanceof FailedBinding) throw value.error;
          return walkKeys(value);
        };
  if (!fallback) return walk;
  return (env) => {
    try {
      return walk(env);
    } catch (e) {
      if (e instanceof EvalError && e.message !== 'evaluation budget exceeded') return fallback(env);
      throw e;
    }
  };
}

export interface CompiledBinding {
  name: string;
  fn: Fn;
}

export interface CompiledRule {
  title: string;
  bindings: CompiledBinding[];
  condition: Fn;
  effects: CompiledEffect[];
}

export interface CompiledRuleset {
  bindings: CompiledBinding[];
  rules: CompiledRule[];
  /** Rules × 1: a rough cost used to pick inline or pooled evaluation. */
  size: number;
}

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Compiles a ruleset, collecting every issue. */
export function compileRulesetCollecting(spec: RulesetSpec): { compiled: CompiledRuleset; issues: RuleCompileIssue[] } {
  const issues: RuleCompileIssue[] = [];
  const roots = new Set<string>(BUILTIN_ROOTS);
  const bindings: CompiledBinding[] = [];
  const bindingList = Array.isArray(spec?.bindings) ? spec.bindings : [];
  if (!Array.isArray(spec?.bindings)) issues.push({ message: 'bindings must be a list', pointer: '/bindings' });
  for (const [i, b] of bindingList.entries()) {
    if (!isRecord(b) || typeof b.name !== 'string' || b.name === '') {
      issues.push({ message: 'a binding is {name, expression}', pointer: `/bindings/${i}` });
      continue;
    }
    const fn = compileExpr(b.expression, `/bindings/${i}/expression`, { roots: new Set(roots), locals: [], issues });
    bindings.push({ name: b.name, fn });
    roots.add(b.name);
  }
  const rules: CompiledRule[] = [];
  const ruleList = Array.isArray(spec?.rules) ? spec.rules : [];
  if (!Array.isArray(spec?.rules)) issues.push({ message: 'rules must be a list', pointer: '/rules' });
  for (const [ri, rule] of ruleList.entries()) {
    const base = `/rules/${ri}`;
    if (!isRecord(rule)) {
      issues.push({ message: 'a rule is {title, condition, effects}', pointer: base, ruleIndex: ri });
      continue;
    }
    const ruleRoots = new Set(roots);
    const ruleBindings: CompiledBinding[] = [];
    for (const [bi, b] of (Array.isArray(rule.bindings) ? rule.bindings : []).entries()) {
      if (!isRecord(b) || typeof b.name !== 'string') {
        issues.push({ message: 'a binding is {name, expression}', pointer: `${base}/bindings/${bi}`, ruleIndex: ri });
        continue;
      }
      ruleBindings.push({ name: b.name, fn: compileExpr(b.expression, `${base}/bindings/${bi}/expression`, { roots: new Set(ruleRoots), locals: [], issues, ruleIndex: ri }) });
      ruleRoots.add(b.name);
    }
    const scope: Scope = { roots: ruleRoots, locals: [], issues, ruleIndex: ri };
    const condition = compileExpr(rule.condition, `${base}/condition`, scope);
    const effects: CompiledEffect[] = [];
    if (!Array.isArray(rule.effects)) issues.push({ message: 'effects must be a list', pointer: `${base}/effects`, ruleIndex: ri });
    else for (const [ei, e] of rule.effects.entries()) effects.push(compileEffect(e, `${base}/effects/${ei}`, scope));
    rules.push({ title: typeof rule.title === 'string' ? rule.title : '', bindings: ruleBindings, condition, effects });
  }
  return { compiled: { bindings, rules, size: Math.max(1, rules.length) }, issues };
}

export function checkRuleset(spec: RulesetSpec): RuleCompileIssue[] {
  return compileRulesetCollecting(spec).issues;
}

export function compileRuleset(spec: RulesetSpec): CompiledRuleset {
  const { compiled, issues } = compileRulesetCollecting(spec);
  if (issues.length > 0) throw new RuleCompileError(issues);
  return compiled;
}

/**
 * Compiles one expression against the roots of rules.md section 2 (the rule evaluator for authors);
 * with `trace`, evaluation errors carry the pointer of the failing node.
 */
export function compileExpression(expr: unknown, extraRoots: readonly string[] = [], options: { trace?: boolean } = {}): Fn {
  const issues: RuleCompileIssue[] = [];
  const fn = compileExpr(expr, '', { roots: new Set([...BUILTIN_ROOTS, ...extraRoots]), locals: [], issues, trace: options.trace ?? false });
  if (issues.length > 0) throw new RuleCompileError(issues);
  return fn;
}

/**
 * Whether a ruleset reads the Profile root (a path from `Profile`, or `inAudience`, which reads its
 * audiences): when none of the candidates does, a session update need not load the profile.
 */
export function readsProfile(spec: RulesetSpec): boolean {
  const visit = (node: unknown): boolean => {
    if (!Array.isArray(node)) return node !== null && typeof node === 'object' && Object.values(node).some(visit);
    const [op, first] = node as unknown[];
    if ((op === '.' || op === '.|') && first === 'Profile') return true;
    if (op === 'inAudience') return true;
    return node.some(visit);
  };
  return visit(spec.rules) || visit(spec.bindings);
}

/**
 * Whether a ruleset reads `Session.FirstSession`, directly or through the whole Session: when none
 * of the candidates does, a new session need not find out before it is evaluated whether it is its
 * profile's first (its commit finds out instead).
 */
export function readsFirstSession(spec: RulesetSpec): boolean {
  const visit = (node: unknown): boolean => {
    if (!Array.isArray(node)) return node !== null && typeof node === 'object' && Object.values(node).some(visit);
    const [op, first] = node as unknown[];
    if ((op === '.' || op === '.|') && first === 'Session') {
      const keys = node.slice(2, op === '.|' ? -1 : undefined);
      if (keys.length === 0 || keys[0] === 'FirstSession') return true;
    }
    return node.some(visit);
  };
  return visit(spec.rules) || visit(spec.bindings);
}
