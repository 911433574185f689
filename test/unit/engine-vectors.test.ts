import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { compileExpression, EvalError, RuleCompileError } from '../../services/engine/index.js';
import type { Env } from '../../services/engine/runtime.js';

interface Vector {
  name: string;
  context: Record<string, unknown>;
  expr: unknown;
  expect?: unknown;
  error?: 'compile' | 'eval';
}

const { vectors } = JSON.parse(readFileSync(new URL('../fixtures/rule-vectors.json', import.meta.url), 'utf8')) as { vectors: Vector[] };

function run(v: Vector): { value?: unknown; error?: 'compile' | 'eval' } {
  let fn;
  try {
    fn = compileExpression(v.expr);
  } catch (e) {
    if (e instanceof RuleCompileError) return { error: 'compile' };
    throw e;
  }
  const timezone = (v.context.Application as { Timezone?: string } | undefined)?.Timezone ?? 'UTC';
  const env: Env = { roots: v.context, frame: undefined, budget: { deadline: performance.now() + 1000, ticks: 0 }, timezone };
  try {
    return { value: fn(env) };
  } catch (e) {
    if (e instanceof EvalError) return { error: 'eval' };
    throw e;
  }
}

describe('rule vectors', () => {
  it('loads the conformance vectors of rules.md', () => {
    expect(vectors.length).toBeGreaterThanOrEqual(155);
  });

  it.each(vectors.map((v) => [v.name, v] as const))('%s', (_name, v) => {
    const r = run(v);
    if (v.error) expect(r).toEqual({ error: v.error });
    else expect(r).toEqual({ value: v.expect });
  });
});
