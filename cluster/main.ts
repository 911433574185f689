// Process entry of one Perkline node: reads the environment, starts the node, prints how to log
// in, and stops gracefully on SIGTERM/SIGINT.
import { nodeOptionsFromEnv } from './config.js';
import { startNode } from './node.js';

const options = nodeOptionsFromEnv(process.env);
const node = await startNode(options);
const email = options.adminEmail ?? 'admin@perkline.local';
const base = `http://localhost:${new URL(node.httpUrl).port}`;
const login = (password: string) =>
  `curl -s -X POST ${base}/v1/sessions -H 'Content-Type: application/json' -d '{"email":"${email}","password":"${password}"}'`;
if (node.bootstrap.generatedPassword) {
  console.log(`\nPerkline is listening on ${base} (gRPC ${node.grpcAddress}).`);
  console.log(`An admin was created: ${email} with the generated password ${node.bootstrap.generatedPassword}`);
  console.log(`It is shown only now. Log in with:\n  ${login(node.bootstrap.generatedPassword)}\n`);
} else {
  console.log(`\nPerkline is listening on ${base} (gRPC ${node.grpcAddress}).`);
  console.log(`Log in as ${email}:\n  ${login(options.adminPassword ?? '<the admin password>')}\n`);
}

let stopping = false;
const stop = (signal: string) => {
  if (stopping) return;
  stopping = true;
  console.log(`received ${signal}, stopping`);
  node.stop({ graceful: true }).then(
    () => process.exit(0),
    (e) => {
      console.error(e);
      process.exit(1);
    },
  );
};
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
