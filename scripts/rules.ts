// The rule evaluator for authors:
//   npm run --silent rules -- eval --expr '<json>' --context '<json>'   (each also as @file.json)
//   npm run --silent rules -- check @ruleset.json
// `eval` prints {"value": ...} or {"error": {"kind": "compile"|"eval", "message", "pointer"}};
// `check` prints {"errors": [...]} (empty when the ruleset compiles). Both exit 1 on an error.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { checkRuleset, compileExpression, EvalError, RuleCompileError, type RulesetSpec } from '../services/engine/index.js';
import type { Env } from '../services/engine/runtime.js';

const [command, ...rest] = process.argv.slice(2);
const { values, positionals } = parseArgs({
  args: rest,
  allowPositionals: true,
  options: { expr: { type: 'string' }, context: { type: 'string' }, 'budget-ms': { type: 'string' } },
});

const print = (v: unknown, failed: boolean): never => {
  process.stdout.write(JSON.stringify(v) + '\n');
  process.exit(failed ? 1 : 0);
};

function readJson(arg: string | undefined, what: string): unknown {
  if (arg === undefined) return print({ error: { kind: 'usage', message: `missing ${what}` } }, true);
  try {
    const text = arg.startsWith('@') ? readFileSync(arg.slice(1), 'utf8') : arg;
    return JSON.parse(text);
  } catch (e) {
    return print({ error: { kind: 'usage', message: `${what}: ${(e as Error).message}` } }, true);
  }
}

if (command === 'eval') {
  const expr = readJson(values.expr, '--expr');
  const context = (values.context === undefined ? {} : readJson(values.context, '--context')) as Record<string, unknown>;
  let fn;
  try {
    fn = compileExpression(expr, [], { trace: true });
  } catch (e) {
    if (!(e instanceof RuleCompileError)) throw e;
    const first = e.errors[0]!;
    print({ error: { kind: 'compile', message: first.message, pointer: first.pointer } }, true);
  }
  const timezone = (context.Application as { Timezone?: string } | undefined)?.Timezone ?? 'UTC';
  const budget = Number(values['budget-ms'] ?? 50);
  const env: Env = { roots: context, frame: undefined, budget: { deadline: performance.now() + budget, ticks: 0 }, timezone };
  try {
    print({ value: fn!(env) }, false);
  } catch (e) {
    if (!(e instanceof EvalError)) throw e;
    print({ error: { kind: 'eval', message: e.message, pointer: e.pointer ?? '' } }, true);
  }
} else if (command === 'check') {
  const ruleset = readJson(positionals[0], 'a ruleset (@file.json or JSON)') as RulesetSpec;
  const errors = checkRuleset(ruleset);
  print({ errors }, errors.length > 0);
} else {
  print({ error: { kind: 'usage', message: 'usage: rules eval --expr <json|@file> [--context <json|@file>] | rules check <json|@file>' } }, true);
}
