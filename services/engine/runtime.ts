// What compiled expressions run against: the roots, the block parameters in scope, and the budget.
import { EvalError, type CampaignInput, type EvaluationInput } from './types.js';

/** The evaluation a campaign runs in: what domain operators and effects read. */
export interface EvalContext {
  input: EvaluationInput;
  campaign: CampaignInput;
  /** Counts generated codes and transaction ids within the evaluation. */
  serial: { n: number };
  /** Set when couponValid / referralValid answered true in the rule being evaluated. */
  usedCoupon: boolean;
  usedReferral: boolean;
}

export interface Frame {
  name: string;
  value: unknown;
  parent: Frame | undefined;
}

export interface Budget {
  /** performance.now() after which evaluation stops. */
  deadline: number;
  ticks: number;
}

export interface Env {
  roots: Record<string, unknown>;
  frame: Frame | undefined;
  budget: Budget;
  /** Currency digits and timezone of the Application, for operators that need them. */
  timezone: string;
  ctx?: EvalContext;
}

export type Fn = (env: Env) => unknown;

export interface Block {
  param: string;
  body: Fn;
  /**
   * Set when the body is, or starts with (inside `and`), `["=", [".", param, key], literal]`:
   * an element whose key holds another value makes the body false without running it.
   */
  guard?: { key: string; value: string | number | boolean | null };
}

/** True when the guard proves the block's body false for this element (no error possible). */
export function guardRejects(guard: Block['guard'], x: unknown): boolean {
  if (!guard || x === null || typeof x !== 'object' || Array.isArray(x)) return false;
  const v = (x as Record<string, unknown>)[guard.key];
  return v !== undefined && v !== guard.value;
}

/** Counts work and stops a runaway evaluation; the clock is read every 256 ticks only. */
export function tick(env: Env): void {
  if ((++env.budget.ticks & 255) === 0 && performance.now() > env.budget.deadline) {
    throw new EvalError('evaluation budget exceeded');
  }
}

/** A block being applied to the elements of a list: one frame whose value changes per element. */
export interface BlockRun {
  body: Fn;
  guard: Block['guard'];
  frame: Frame;
  inner: Env;
  outer: Env;
}

/**
 * Starts applying a block. Safe to reuse one frame because evaluation is synchronous and no block
 * outlives the operator that applies it; no closure is made per application.
 */
export function startBlock(block: Block, env: Env): BlockRun {
  const frame: Frame = { name: block.param, value: undefined, parent: env.frame };
  return { body: block.body, guard: block.guard, frame, inner: { roots: env.roots, frame, budget: env.budget, timezone: env.timezone, ctx: env.ctx }, outer: env };
}

export function applyTo(run: BlockRun, value: unknown): unknown {
  tick(run.outer);
  if (run.guard !== undefined && guardRejects(run.guard, value)) return false;
  run.frame.value = value;
  return run.body(run.inner);
}

/** A binding whose expression failed: using it fails the same way. */
export class FailedBinding {
  constructor(readonly error: EvalError) {}
}
