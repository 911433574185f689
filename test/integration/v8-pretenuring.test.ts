import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

// A node switches V8's allocation-site pretenuring off for its process (cluster/node.ts says why).
// The probe (test/helpers/pretenuring-probe.ts) runs with `--trace-pretenuring-statistics`, which
// prints every decision V8 takes about a site ("... => tenure" when it starts allocating the
// site's objects in the old generation), and trains a site the same way before and after a node
// starts. Before, V8's default must show decisions (so the probe can see them); after, none may
// be taken, as V8 no longer even collects the feedback they are made from.
const probe = fileURLToPath(new URL('../helpers/pretenuring-probe.ts', import.meta.url));

describe('V8 pretenuring in a node process', () => {
  it('is taken before a node starts, and never once it runs', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--trace-pretenuring-statistics', '--import', 'tsx', probe], {
      maxBuffer: 64 * 1024 * 1024,
      timeout: 60_000,
    });
    const started = stdout.indexOf('probe: node started');
    expect(started).toBeGreaterThan(0);
    expect(stdout).toMatch(/probe: trained 800000 with the node/);
    const tenured = (text: string) => text.split('\n').filter((l) => l.includes('pretenuring:') && l.includes('=> tenure')).length;
    expect(tenured(stdout.slice(0, started))).toBeGreaterThan(0);
    expect(tenured(stdout.slice(started))).toBe(0);
  });
});
