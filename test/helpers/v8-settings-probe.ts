// Run by test/integration/v8-settings.test.ts in a process of its own, with V8's
// `--trace-pretenuring-statistics` (V8 prints each pretenuring decision to stdout),
// `--trace-gc-verbose` (V8 prints the old generation's growing factor and limit after each full
// collection) and `--expose-gc`. The same two things are done once before a node starts in this
// process and once after, with a marker line between the phases:
// - an object literal's objects survive young collections (what makes V8 pretenure a site);
// - a slow trickle of objects that survive young collections, then a full collection: V8 sees the
//   old generation grow slowly against how fast it collects, and picks a small growing factor.
import { startNode } from '../../cluster/index.js';

function train(make: (i: number) => { a: number }): number {
  let kept: Array<{ a: number }> = [];
  for (let round = 0; round < 40; round++) for (let i = 0; i < 20_000; i++) kept.push(make(i));
  const n = kept.length;
  kept = [];
  return n;
}

async function trickle(): Promise<void> {
  const kept: Array<{ i: number }> = [];
  for (let k = 0; k < 16; k++) {
    for (let step = 0; step < 5; step++) {
      for (let i = 0; i < 500; i++) kept.push({ i });
      await new Promise((r) => setTimeout(r, 20));
    }
    (globalThis as { gc?: () => void }).gc!();
  }
}

console.log(`probe: trained ${train((i) => ({ a: i, b: [i, i + 1], c: `x${i}` }))} before the node`);
await trickle();
const node = await startNode({ httpPort: 0, grpcPort: 0, host: '127.0.0.1', dataDir: 'memory://', logLevel: 'warn', adminEmail: 'probe@test.local', adminPassword: 'probe password 1' });
console.log('probe: node started');
console.log(`probe: trained ${train((i) => ({ a: i, b: [i, i + 1], c: `y${i}` }))} with the node`);
await trickle();
await node.stop();
