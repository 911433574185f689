// npm run bench:api — end-to-end throughput and latency of `PUT /v2/customer_sessions/{id}` on one
// node (real PostgreSQL, EVAL_MODE auto, 10 campaigns), beside a bare express endpoint that only
// parses the same JSON and answers a small JSON, driven by the same client at the same
// concurrency. The load generator runs in a child process (this file with BENCH_API_ROLE=load) so
// that it is a separate OS process competing for the cores like a real client on the same host,
// and so that `node --cpu-prof dist/bench/api.js` profiles the server only. Prints a table.
//
// Options (flag or environment): --seconds / BENCH_API_SECONDS (default 20), --warmup /
// BENCH_API_WARMUP (default 3), --connections / BENCH_API_CONNECTIONS (default 64),
// --latency-connections / BENCH_API_LATENCY_CONNECTIONS (default 8; 0 leaves those rows out),
// DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test), EVAL_MODE (default auto),
// DB_POOL_SIZE (default: the node's, 10).
import { fork, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';

interface LoadJob {
  target: string;
  url: string;
  authorization: string;
  connections: number;
  warmupMs: number;
  durationMs: number;
}

interface LoadResult {
  target: string;
  requests: number;
  elapsedMs: number;
  p50: number;
  p99: number;
  p999: number;
  max: number;
  statuses: Record<string, number>;
  sessions: number;
  closed: number;
}

// ---------------------------------------------------------------------------------------------
// Load generator (child process)

const CATEGORIES = ['shoes', 'hats', 'socks', 'bags', 'shirts'];

/** A 5-line cart; `step` changes quantities so that every update differs from the last. */
function cartItems(seed: number, step: number) {
  return Array.from({ length: 5 }, (_, k) => ({
    name: `Item ${(seed + k) % 40}`,
    sku: `SKU-${(seed + k) % 40}`,
    quantity: 1 + ((step + k) % 3),
    price: 4.5 + ((seed * 7 + k * 13) % 60),
    category: CATEGORIES[(seed + k) % CATEGORIES.length]!,
  }));
}

async function runLoad(job: LoadJob, mark: (phase: 'start' | 'end') => void): Promise<LoadResult> {
  const url = new URL(job.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: job.connections, maxFreeSockets: job.connections });
  const runId = Math.random().toString(36).slice(2, 8);
  const send = (path: string, body: string): Promise<number> =>
    new Promise((resolve) => {
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          path,
          method: 'PUT',
          agent,
          headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), Authorization: job.authorization },
        },
        (res) => {
          res.on('data', () => {});
          res.on('end', () => resolve(res.statusCode ?? 0));
          res.on('error', () => resolve(0));
        },
      );
      req.on('error', () => resolve(0));
      req.end(body);
    });

  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let sessions = 0;
  let closed = 0;
  let measuring = false;
  let stop = false;

  // One virtual user per connection: a session gets created, updated, and one update in ten
  // closes it; the next request starts a new session. Each user has its own profiles.
  const user = async (vu: number) => {
    let n = 0;
    let step = 0;
    let sessionId = `${runId}-${vu}-${n}`;
    while (!stop) {
      const closing = step > 0 && Math.random() < 0.1;
      const customerSession: Record<string, unknown> = {
        profileId: `bench-${vu}-${n % 25}`,
        cartItems: cartItems(vu * 31 + n, step),
      };
      if (closing) customerSession.state = 'closed';
      const body = JSON.stringify({ customerSession });
      const t0 = performance.now();
      const status = await send(`/v2/customer_sessions/${sessionId}`, body);
      const ms = performance.now() - t0;
      if (measuring) {
        latencies.push(ms);
        statuses[status] = (statuses[status] ?? 0) + 1;
        if (step === 0) sessions++;
        if (closing) closed++;
      }
      step++;
      if (closing || status === 0) {
        n++;
        step = 0;
        sessionId = `${runId}-${vu}-${n}`;
      }
    }
  };

  const users = Array.from({ length: job.connections }, (_, vu) => user(vu));
  await new Promise((r) => setTimeout(r, job.warmupMs));
  measuring = true;
  mark('start');
  const started = performance.now();
  await new Promise((r) => setTimeout(r, job.durationMs));
  measuring = false;
  mark('end');
  const elapsedMs = performance.now() - started;
  stop = true;
  await Promise.all(users);
  agent.destroy();

  latencies.sort((a, b) => a - b);
  const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? NaN;
  return {
    target: job.target,
    requests: latencies.length,
    elapsedMs,
    p50: at(0.5),
    p99: at(0.99),
    p999: at(0.999),
    max: latencies[latencies.length - 1] ?? NaN,
    statuses,
    sessions,
    closed,
  };
}


// ---------------------------------------------------------------------------------------------
// Server side (this process): the Perkline node and the bare express endpoint

function option(flag: string, env: string, fallback: number, zeroAllowed = false): number {
  const i = process.argv.indexOf(`--${flag}`);
  const raw = i >= 0 ? process.argv[i + 1] : process.env[env];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0 || (n === 0 && !zeroAllowed)) throw new Error(`--${flag} / ${env} must be a positive number, got ${JSON.stringify(raw)}`);
  return n;
}

/** Campaign i of 10: a category deal per item over a price, above a cart total; a bulk bonus. */
function ruleset(i: number) {
  const category = CATEGORIES[i % CATEGORIES.length]!;
  const minPrice = 10 + i * 3;
  const minTotal = 60 + i * 15;
  const pct = 5 + (i % 3) * 5;
  const items = ['.', 'Session', 'CartItems'];
  const ofCategory = [['Item'], ['=', ['.', 'Item', 'Category'], category]];
  return {
    activate: true,
    bindings: [],
    rules: [
      {
        title: `${pct}% off ${category} over ${minPrice}`,
        condition: [
          'and',
          ['exists', items, [['Item'], ['and', ['=', ['.', 'Item', 'Category'], category], ['>', ['.', 'Item', 'Price'], minPrice]]]],
          ['>', ['.', 'Session', 'Total'], minTotal],
        ],
        effects: [['forEach', ['filter', items, ofCategory], [['Item'], ['setDiscountPerItem', `${category} deal`, ['*', ['.', 'Item', 'Price'], pct / 100]]]]],
      },
      {
        title: 'bulk bonus',
        condition: ['>', ['sum', items, [['Item'], ['.', 'Item', 'Quantity']]], 8 + (i % 4)],
        effects: [['setDiscount', `bulk ${i}`, 2 + (i % 3)]],
      },
    ],
  };
}

async function main(): Promise<void> {
  const seconds = option('seconds', 'BENCH_API_SECONDS', 20);
  const warmup = option('warmup', 'BENCH_API_WARMUP', 3);
  const connections = Math.round(option('connections', 'BENCH_API_CONNECTIONS', 64));
  // A second pair of rows at low concurrency: with closed-loop clients latency is concurrency /
  // throughput (Little's law), so 64 connections alone say little about latency at moderate load.
  const latencyConnections = Math.round(option('latency-connections', 'BENCH_API_LATENCY_CONNECTIONS', 8, true));
  const databaseUrl = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
  const evalMode = (process.env.EVAL_MODE || 'auto') as 'inline' | 'pool' | 'auto';
  const schema = `bench_api_${process.pid}_${Date.now().toString(36)}`;

  const { default: express } = await import('express');
  const { createPostgresDb } = await import('../services/store/index.js');
  const { startNode } = await import('../cluster/index.js');
  const { login, unwrap } = await import('../sdk/index.js');

  let child: ChildProcess | undefined;
  let bare: http.Server | undefined;
  let node: Awaited<ReturnType<typeof startNode>> | undefined;
  const dropSchema = async () => {
    const db = await createPostgresDb(databaseUrl, { maxConnections: 1 });
    await db.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).finally(() => db.close());
  };
  // Ctrl-C: still leave no schema behind.
  process.once('SIGINT', () => {
    child?.kill();
    void dropSchema().finally(() => process.exit(130));
  });
  try {
    // The bare endpoint: same path and body as the Perkline call, JSON parsed, a small JSON back.
    const app = express();
    app.disable('x-powered-by');
    app.put('/v2/customer_sessions/:id', express.json({ limit: '10mb' }), (req, res) => {
      res.json({ effects: [], createdCoupons: [], createdReferrals: [], lines: (req.body?.customerSession?.cartItems ?? []).length });
    });
    bare = http.createServer(app);
    bare.keepAliveTimeout = 65_000;
    await new Promise<void>((r) => bare!.listen(0, '127.0.0.1', r));
    const bareUrl = `http://127.0.0.1:${(bare.address() as AddressInfo).port}`;

    node = await startNode({
      httpPort: 0,
      grpcPort: 0,
      host: '127.0.0.1',
      databaseUrl,
      dbSchema: schema,
      adminEmail: 'bench@perkline.local',
      adminPassword: 'bench-password',
      evaluator: { mode: evalMode },
      ...(process.env.DB_POOL_SIZE ? { dbPoolSize: Number(process.env.DB_POOL_SIZE) } : {}),
      // Measured (every request takes a token) but never refusing: one key sends far more than
      // the default 1000/s here.
      rateLimit: { ratePerSecond: 1_000_000, burst: 1_000_000 },
      logLevel: 'warn',
    });
    const { client: admin } = await login({ baseUrl: node.httpUrl, email: 'bench@perkline.local', password: 'bench-password', retries: 0 });
    const application = unwrap(await admin.POST('/v1/applications', { body: { name: 'Bench shop', timezone: 'Europe/Berlin', currency: 'EUR' } as never }));
    const key = unwrap(
      await admin.POST('/v1/applications/{applicationId}/api_keys', {
        params: { path: { applicationId: application.id } },
        body: { title: 'bench', expires: new Date(Date.now() + 24 * 3600 * 1000).toISOString() },
      }),
    );
    for (let i = 0; i < 10; i++) {
      const campaign = unwrap(
        await admin.POST('/v1/applications/{applicationId}/campaigns', {
          params: { path: { applicationId: application.id } },
          body: { name: `Campaign ${i}`, state: 'enabled', tags: [], features: [], limits: [] } as never,
        }),
      );
      unwrap(
        await admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets', {
          params: { path: { applicationId: application.id, campaignId: campaign.id } },
          body: ruleset(i) as never,
        }),
      );
    }

    child = fork(fileURLToPath(import.meta.url), [], { env: { ...process.env, BENCH_API_ROLE: 'load' }, execArgv: [], stdio: 'inherit' });
    const cpu = new Map<string, CpuUse>();
    const load = (job: LoadJob) =>
      new Promise<LoadResult>((resolve, reject) => {
        let first: CpuSample | undefined;
        const onMessage = (m: { phase?: 'start' | 'end'; result?: LoadResult }) => {
          if (m.phase === 'start') first = cpuSample(child!.pid!);
          else if (m.phase === 'end' && first) cpu.set(job.target, cpuUse(first, cpuSample(child!.pid!)));
          else if (m.result) {
            child!.off('message', onMessage);
            resolve(m.result);
          }
        };
        child!.on('message', onMessage);
        child!.once('exit', (code) => reject(new Error(`load generator exited with ${code}`)));
        child!.send(job);
      });

    const common = { warmupMs: warmup * 1000, durationMs: seconds * 1000 };
    const levels = latencyConnections > 0 && latencyConnections !== connections ? [connections, latencyConnections] : [connections];
    console.log(
      `bench:api — node:http keep-alive clients in a child process, ${levels.join(' and ')} connections, ${warmup} s warm-up + ${seconds} s per row, ` +
        `${availableParallelism()} cores, Node ${process.version}, EVAL_MODE ${evalMode}, PostgreSQL ${new URL(databaseUrl).host}`,
    );
    console.log('Workload: PUT /v2/customer_sessions/{id}, 5-line carts, 10 enabled campaigns (20 rules); new sessions, updates, 1 in 10 updates closes the session.');
    const runs: Array<{ bare: LoadResult; ours: LoadResult; connections: number }> = [];
    for (const c of levels) {
      const bareResult = await load({ ...common, connections: c, target: `bare express, ${c} connections`, url: bareUrl, authorization: 'ApiKey-v1 x' });
      const ours = await load({ ...common, connections: c, target: `Perkline, ${c} connections`, url: node.httpUrl, authorization: `ApiKey-v1 ${key.key}` });
      runs.push({ bare: bareResult, ours, connections: c });
    }

    const rps = (r: LoadResult) => r.requests / (r.elapsedMs / 1000);
    const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
    const ms = (n: number) => n.toFixed(2);
    const errors = (r: LoadResult) =>
      Object.entries(r.statuses)
        .filter(([s]) => s !== '200')
        .map(([s, c]) => `${s === '0' ? 'network' : s}: ${c}`)
        .join(', ') || 'none';
    const rows = runs.flatMap((r) => [r.bare, r.ours]);
    console.log('');
    console.log('target | requests/s | p50 ms | p99 ms | p99.9 ms | max ms | requests | errors by status | Perkline/bare');
    console.log('---|---|---|---|---|---|---|---|---');
    for (const r of runs) {
      for (const x of [r.bare, r.ours]) {
        const ratio = x === r.ours ? `${(rps(r.ours) / rps(r.bare)).toFixed(2)}x` : '';
        console.log([x.target, fmt(rps(x)), ms(x.p50), ms(x.p99), ms(x.p999), ms(x.max), fmt(x.requests), errors(x), ratio].join(' | '));
      }
    }
    console.log('');
    // CPU time per request does not depend much on what else runs on the machine; the shares do.
    console.log(`CPU during each window: % of one core (${availableParallelism()} cores = ${availableParallelism() * 100}%) and CPU ms per request (Linux /proc)`);
    console.log('target | server process | load generator | postgres | other processes | iowait');
    console.log('---|---|---|---|---|---');
    for (const r of rows) {
      const c = cpu.get(r.target);
      if (!c) continue;
      const perRequest = (pct: number) => `${pct.toFixed(0)}% (${(((pct / 100) * 1000) / rps(r)).toFixed(3)} ms)`;
      console.log([r.target, perRequest(c.server), perRequest(c.load), perRequest(c.postgres), `${c.other.toFixed(0)}%`, `${c.iowait.toFixed(0)}%`].join(' | '));
    }
    console.log('');
    const headline = runs[0]!;
    const ratio = rps(headline.ours) / rps(headline.bare);
    console.log(`Perkline sessions at ${headline.connections} connections: ${fmt(headline.ours.sessions)} started, ${fmt(headline.ours.closed)} closed in the measured window`);
    console.log(
      `Targets: throughput >= 0.30x bare at ${headline.connections} connections: ${ratio.toFixed(2)}x ${ratio >= 0.3 ? 'met' : 'MISSED'}; ` +
        runs.map((r) => `p99 < 25 ms at ${r.connections} connections: ${ms(r.ours.p99)} ms ${r.ours.p99 < 25 ? 'met' : 'MISSED'}`).join('; '),
    );
  } finally {
    child?.removeAllListeners('exit');
    child?.kill();
    if (bare) {
      bare.closeAllConnections();
      await new Promise<void>((r) => bare!.close(() => r()));
    }
    await node?.stop();
    await dropSchema();
  }
}

// ---------------------------------------------------------------------------------------------
// Where the CPU went during a window: this process, the load generator, PostgreSQL's processes,
// everything else on the machine (other work competing for the same cores), and iowait.

interface CpuSample {
  at: number;
  server: number;
  load: number;
  postgres: Map<number, number>;
  busy: number;
  iowait: number;
}

interface CpuUse {
  server: number;
  load: number;
  postgres: number;
  other: number;
  iowait: number;
}

const TICK_S = 0.01; // USER_HZ is 100 on every Linux this runs on

function procTicks(pid: number | string): { comm: string; ticks: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = stat.lastIndexOf(')');
    const fields = stat.slice(close + 2).split(' ');
    return { comm: stat.slice(stat.indexOf('(') + 1, close), ticks: Number(fields[11]) + Number(fields[12]) };
  } catch {
    return undefined;
  }
}

function cpuSample(loadPid: number): CpuSample {
  const postgres = new Map<number, number>();
  let busy = 0;
  let iowait = 0;
  try {
    for (const pid of readdirSync('/proc')) {
      if (!/^[0-9]+$/.test(pid)) continue;
      const t = procTicks(pid);
      if (t?.comm === 'postgres') postgres.set(Number(pid), t.ticks);
    }
    // cpu  user nice system idle iowait irq softirq steal
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    busy = f[0]! + f[1]! + f[2]! + f[5]! + f[6]! + f[7]!;
    iowait = f[4]!;
  } catch {
    // not Linux: only this process is measured
  }
  const u = process.cpuUsage();
  return { at: performance.now(), server: (u.user + u.system) / 1e6, load: (procTicks(loadPid)?.ticks ?? 0) * TICK_S, postgres, busy, iowait };
}

function cpuUse(a: CpuSample, b: CpuSample): CpuUse {
  const wall = (b.at - a.at) / 1000;
  let pg = 0;
  for (const [pid, ticks] of b.postgres) pg += (ticks - (a.postgres.get(pid) ?? 0)) * TICK_S;
  const server = b.server - a.server;
  const load = b.load - a.load;
  const busy = (b.busy - a.busy) * TICK_S;
  const pct = (s: number) => (100 * s) / wall;
  return { server: pct(server), load: pct(load), postgres: pct(pg), other: pct(Math.max(0, busy - server - load - pg)), iowait: pct((b.iowait - a.iowait) * TICK_S) };
}

// Last, so that every declaration above is initialised.
if (process.env.BENCH_API_ROLE === 'load') {
  process.on('message', (job: LoadJob) => {
    void runLoad(job, (phase) => process.send!({ phase })).then((r) => process.send!({ result: r }));
  });
} else {
  await main();
}
