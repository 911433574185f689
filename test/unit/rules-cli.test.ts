import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const script = fileURLToPath(new URL('../../scripts/rules.ts', import.meta.url));
const rules = (...args: string[]) => {
  const r = spawnSync(process.execPath, ['--import', 'tsx', script, ...args], { encoding: 'utf8' });
  return { code: r.status, out: JSON.parse(r.stdout) as unknown };
};

describe('rules CLI', () => {
  it('evaluates an expression against a context', () => {
    expect(rules('eval', '--expr', '["*", [".", "Session", "Total"], 0.1]', '--context', '{"Session": {"Total": 120}}')).toEqual({ code: 0, out: { value: 12 } });
  });

  it('evaluates calendar operators in the context timezone', () => {
    const ctx = JSON.stringify({ Application: { Timezone: 'Europe/Berlin' } });
    expect(rules('eval', '--expr', '["hour", "2026-07-01T10:30:00Z"]', '--context', ctx)).toEqual({ code: 0, out: { value: 12 } });
  });

  it('reports an evaluation error with the pointer of the failing node and exits 1', () => {
    expect(rules('eval', '--expr', '["+", 1, [".", "Session", "Missing"]]', '--context', '{"Session": {}}')).toEqual({
      code: 1,
      out: { error: { kind: 'eval', message: 'Session has no "Missing"', pointer: '/2' } },
    });
  });

  it('reports a compile error with its pointer and exits 1', () => {
    expect(rules('eval', '--expr', '["and", true, ["pow", 2, 3]]')).toEqual({ code: 1, out: { error: { kind: 'compile', message: 'unknown operator "pow"', pointer: '/2' } } });
  });

  it('reads @file arguments and checks a ruleset', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rules-cli-'));
    const good = join(dir, 'good.json');
    const bad = join(dir, 'bad.json');
    writeFileSync(good, JSON.stringify({ rules: [{ title: 'r', condition: true, effects: [['setDiscount', 'd', 1]] }], bindings: [] }));
    writeFileSync(bad, JSON.stringify({ rules: [{ title: 'r', condition: ['not', 5], effects: [] }], bindings: [] }));
    expect(rules('check', `@${good}`)).toEqual({ code: 0, out: { errors: [] } });
    expect(rules('check', `@${bad}`)).toEqual({ code: 1, out: { errors: [{ message: 'not: expected a boolean, got number', pointer: '/rules/0/condition/1', ruleIndex: 0 }] } });
    expect(rules('eval', '--expr', `@${join(dir, 'missing.json')}`)).toMatchObject({ code: 1, out: { error: { kind: 'usage' } } });
  });
});
