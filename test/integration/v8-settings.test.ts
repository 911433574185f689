import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';

// A node switches V8's allocation-site pretenuring off for its process and holds the old
// generation's growing factor at 4 (cluster/node.ts says why). The probe
// (test/helpers/v8-settings-probe.ts) does the same things before and after a node starts in its
// process, under V8 traces that print each pretenuring decision ("... => tenure" when V8 starts
// allocating a site's objects in the old generation) and each new old-generation limit with the
// factor it was computed with. Before, V8's defaults must show what the settings change (so the
// probe can see it); after, never.
const probe = fileURLToPath(new URL('../helpers/v8-settings-probe.ts', import.meta.url));

describe('V8 settings of a node process', () => {
  let before = '';
  let after = '';
  beforeAll(async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--trace-pretenuring-statistics', '--trace-gc-verbose', '--expose-gc', '--import', 'tsx', probe], {
      maxBuffer: 256 * 1024 * 1024,
      timeout: 60_000,
    });
    const started = stdout.indexOf('probe: node started');
    expect(started).toBeGreaterThan(0);
    expect(stdout).toMatch(/probe: trained 800000 with the node/);
    before = stdout.slice(0, started);
    after = stdout.slice(started);
  }, 70_000);

  it('takes no pretenuring decision once a node runs', () => {
    const tenured = (text: string) => text.split('\n').filter((l) => l.includes('pretenuring:') && l.includes('=> tenure')).length;
    expect(tenured(before)).toBeGreaterThan(0);
    expect(tenured(after)).toBe(0);
  });

  it('lets the old generation grow fourfold between full collections once a node runs, however slowly it grew', () => {
    // "[HeapController] factor 1.3 based on mu=0.970, ..." (what V8 would choose), then
    // "[HeapController] Limit: old size: 32673 KB, new limit: 146801 KB (4.0)" (what it took).
    const chosen = (text: string) => [...text.matchAll(/\[HeapController\] factor ([0-9.]+) based on/g)].map((m) => Number(m[1]));
    const taken = (text: string) => [...text.matchAll(/\[HeapController\] Limit: .*\(([0-9.]+)\)/g)].map((m) => Number(m[1]));
    expect(taken(before).some((f) => f < 4)).toBe(true);
    expect(chosen(after).some((f) => f < 4)).toBe(true);
    expect(taken(after).length).toBeGreaterThan(2);
    expect(taken(after).every((f) => f === 4)).toBe(true);
  });
});
