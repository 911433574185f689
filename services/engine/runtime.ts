// What compiled expressions run against: the roots, the block parameters in scope, and the budget.
import { EvalError } from './types.js';

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
}

export type Fn = (env: Env) => unknown;

export interface Block {
  param: string;
  body: Fn;
}

/** Counts work and stops a runaway evaluation; the clock is read every 256 ticks only. */
export function tick(env: Env): void {
  if ((++env.budget.ticks & 255) === 0 && performance.now() > env.budget.deadline) {
    throw new EvalError('evaluation budget exceeded');
  }
}

export function applyBlock(block: Block, env: Env, value: unknown): unknown {
  tick(env);
  return block.body({ roots: env.roots, frame: { name: block.param, value, parent: env.frame }, budget: env.budget, timezone: env.timezone });
}

/** A binding whose expression failed: using it fails the same way. */
export class FailedBinding {
  constructor(readonly error: EvalError) {}
}
