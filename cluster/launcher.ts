// `npm run cluster -- --nodes 3`: starts N local nodes on one Postgres and one NATS, with HTTP
// ports PORT, PORT+1, ... and gRPC ports GRPC_PORT, GRPC_PORT+1, ...; Ctrl-C stops them all.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    nodes: { type: 'string', default: '3' },
    port: { type: 'string', default: process.env.PORT ?? '8080' },
    'grpc-port': { type: 'string', default: process.env.GRPC_PORT ?? '9090' },
  },
});
const count = Number(values.nodes);
if (!Number.isInteger(count) || count < 1) throw new Error('--nodes must be a positive integer');
const env = {
  ...process.env,
  DATABASE_URL: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
  NATS_URL: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
};
const entry = fileURLToPath(new URL('./main.ts', import.meta.url));
const children: ChildProcess[] = [];
for (let i = 0; i < count; i++) {
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    env: { ...env, NODE_ID: `node-${i + 1}`, PORT: String(Number(values.port) + i), GRPC_PORT: String(Number(values['grpc-port']) + i) },
    stdio: 'inherit',
  });
  children.push(child);
}
console.log(`started ${count} nodes on ${env.DATABASE_URL} and ${env.NATS_URL}`);
const stopAll = () => {
  for (const c of children) c.kill('SIGTERM');
};
process.on('SIGINT', stopAll);
process.on('SIGTERM', stopAll);
await Promise.all(children.map((c) => new Promise((r) => c.once('exit', r))));
