// Run by test/integration/v8-pretenuring.test.ts in a process of its own, with V8's
// `--trace-pretenuring-statistics` (V8 prints each pretenuring decision to stdout). It lets an
// object literal's objects survive young collections (what makes V8 pretenure a site) once before
// a node starts in this process and once after, printing a marker line between the phases.
import { startNode } from '../../cluster/index.js';

function train(make: (i: number) => { a: number }): number {
  let kept: Array<{ a: number }> = [];
  for (let round = 0; round < 40; round++) for (let i = 0; i < 20_000; i++) kept.push(make(i));
  const n = kept.length;
  kept = [];
  return n;
}

console.log(`probe: trained ${train((i) => ({ a: i, b: [i, i + 1], c: `x${i}` }))} before the node`);
const node = await startNode({ httpPort: 0, grpcPort: 0, host: '127.0.0.1', dataDir: 'memory://', logLevel: 'warn', adminEmail: 'probe@test.local', adminPassword: 'probe password 1' });
console.log('probe: node started');
console.log(`probe: trained ${train((i) => ({ a: i, b: [i, i + 1], c: `y${i}` }))} with the node`);
await node.stop();
