// npm run bench:api — end-to-end throughput and latency of `PUT /v2/customer_sessions/{id}` on one
// node (real PostgreSQL, EVAL_MODE auto, 10 campaigns), beside a bare express endpoint that only
// parses the same JSON and answers a small JSON, driven by the same client at the same
// concurrency. The load generator runs in a child process (this file with BENCH_API_ROLE=load) so
// that it is a separate OS process competing for the cores like a real client on the same host,
// and so that `node --cpu-prof dist/bench/api.js` profiles the server only. Prints a table.
//
// Rows: the bare endpoint and Perkline at saturation (closed loop: each connection sends again on
// its answer), the throughput ratio; then both open loop at the throughput target (0.3x the bare
// rate of this run, requests started on a fixed schedule over the same connections, latency
// counted from when each request was due): Perkline's latency at that load, and the bare
// endpoint's, what the client and the machine add on their own.
//
// Options (flag or environment): --seconds / BENCH_API_SECONDS (default 20), --warmup /
// BENCH_API_WARMUP (default 3), --connections / BENCH_API_CONNECTIONS (default 64),
// --rate-share / BENCH_API_RATE_SHARE (default 0.3; 0 leaves the open-loop rows out),
// --rate / BENCH_API_RATE (default 0: the open-loop rows at that many requests per second instead,
// so that runs on a machine whose speed drifts compare at the same load),
// --latency-connections / BENCH_API_LATENCY_CONNECTIONS (default 0: closed-loop rows at that
// lower concurrency, for both endpoints),
// DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test), EVAL_MODE (default auto),
// DB_POOL_SIZE (default: the node's, 10).
//
// Each Perkline row starts from a CHECKPOINT, so that PostgreSQL reuses its WAL segments as under
// steady load instead of creating them while the row runs (see prepareWal); a line after the
// tables says, by row, how that went.
//
// A disk probe (a worker thread writing 8 kB and calling fdatasync every 20 ms, in a file of
// --disk-probe / BENCH_API_DISK_PROBE, default the system's temporary directory; `off` leaves it
// out) reports by row how long one flush took: a commit waits for such a flush of the WAL, and on
// a VM's disk single flushes stall for 50-500 ms at times whatever else runs (see the README). It
// adds about 50 flushes of 8 kB a second to the disk's load.
//
// Each Perkline row also shows what PostgreSQL wrote per request: WAL bytes (pg_current_wal_lsn)
// and write transactions (transaction ids handed out, pg_current_snapshot), each one a commit
// that waits for its WAL to reach the disk. Both count the whole server, so other work on it
// shows too.
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { constants as perfConstants, monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { Queryable } from '../services/store/index.js';

interface LoadJob {
  target: string;
  url: string;
  authorization: string;
  connections: number;
  warmupMs: number;
  durationMs: number;
  /**
   * Open loop: requests start at this fixed rate (per second) whatever the answers, each from an
   * idle virtual user (a new one when all are waiting), and latency counts from the moment a
   * request was due, so that a stalled server is not hidden by clients that stop sending
   * (coordinated omission). Without it, a closed loop: each connection sends again on its answer.
   */
  rate?: number;
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
  /** Open loop: the rate asked for, and requests that could not start (no virtual user left). */
  offered?: number;
  unsent?: number;
}

// ---------------------------------------------------------------------------------------------
// Load generator (child process)

/** The value at quantile `p` (0-1) of numbers sorted in ascending order (NaN when there are none). */
function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN;
}

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

  // A virtual user: a session gets created, updated, and one update in ten closes it; the next
  // request starts a new session. Each user has its own profiles.
  interface User {
    vu: number;
    n: number;
    step: number;
    sessionId: string;
  }
  const newUser = (vu: number): User => ({ vu, n: 0, step: 0, sessionId: `${runId}-${vu}-0` });
  /** One request of a user; `due` is when it should have started (latency counts from there). */
  const request = async (u: User, due: number): Promise<void> => {
    const closing = u.step > 0 && Math.random() < 0.1;
    const customerSession: Record<string, unknown> = {
      profileId: `bench-${u.vu}-${u.n % 25}`,
      cartItems: cartItems(u.vu * 31 + u.n, u.step),
    };
    if (closing) customerSession.state = 'closed';
    const status = await send(`/v2/customer_sessions/${u.sessionId}`, JSON.stringify({ customerSession }));
    if (measuring) {
      latencies.push(performance.now() - due);
      statuses[status] = (statuses[status] ?? 0) + 1;
      if (u.step === 0) sessions++;
      if (closing) closed++;
    }
    u.step++;
    if (closing || status === 0) {
      u.n++;
      u.step = 0;
      u.sessionId = `${runId}-${u.vu}-${u.n}`;
    }
  };

  let users: Array<Promise<void>>;
  let unsent = 0;
  if (job.rate === undefined) {
    // Closed loop: one user per connection, sending again as soon as it has its answer.
    users = Array.from({ length: job.connections }, async (_, vu) => {
      const u = newUser(vu);
      while (!stop) await request(u, performance.now());
    });
  } else {
    // Open loop: a request is due every 1/rate s; an idle user sends it (a new user when none is
    // idle, up to a bound). The agent queues requests beyond `connections` sockets.
    const rate = job.rate;
    const idle: User[] = [];
    const inFlight = new Set<Promise<void>>();
    let created = 0;
    const maxUsers = 20_000;
    const t0 = performance.now();
    let issued = 0;
    users = [
      (async () => {
        while (!stop) {
          const now = performance.now();
          const due = Math.floor(((now - t0) / 1000) * rate);
          for (; issued < due; issued++) {
            const dueAt = t0 + (issued / rate) * 1000;
            const u = idle.pop() ?? (created < maxUsers ? newUser(created++) : undefined);
            if (!u) {
              if (measuring) unsent++;
              continue;
            }
            const p: Promise<void> = request(u, dueAt).then(() => {
              inFlight.delete(p);
              idle.push(u);
            });
            inFlight.add(p);
          }
          await new Promise((r) => setTimeout(r, 1));
        }
        await Promise.all(inFlight);
      })(),
    ];
  }

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
  const at = (p: number) => percentile(latencies, p);
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
    ...(job.rate !== undefined ? { offered: job.rate, unsent } : {}),
  };
}


// ---------------------------------------------------------------------------------------------
// Server side (this process): the Perkline node and the bare express endpoint

/** A whole number with thousands separators, as every figure of the tables is printed. */
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

/** An option as given: `--flag value` on the command line, else the environment variable. */
function rawOption(flag: string, env: string): string | undefined {
  const i = process.argv.indexOf(`--${flag}`);
  return i >= 0 ? process.argv[i + 1] : process.env[env];
}

function option(flag: string, env: string, fallback: number, zeroAllowed = false): number {
  const raw = rawOption(flag, env);
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
  // With closed-loop clients at saturation, latency is connections / throughput (Little's law): it
  // says how long the queue is, not how fast a request is served. Latency is measured instead at
  // the throughput target, open loop: requests arrive at rate-share x the bare endpoint's rate of
  // this run over the same connections (0 leaves the row out).
  const rateShare = option('rate-share', 'BENCH_API_RATE_SHARE', 0.3, true);
  const fixedRate = Math.round(option('rate', 'BENCH_API_RATE', 0, true));
  // Optional pair of closed-loop rows at low concurrency (0, the default, leaves them out).
  const latencyConnections = Math.round(option('latency-connections', 'BENCH_API_LATENCY_CONNECTIONS', 0, true));
  const probeDir = rawOption('disk-probe', 'BENCH_API_DISK_PROBE') || tmpdir();
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
  let statsDb: Awaited<ReturnType<typeof createPostgresDb>> | undefined;
  let probe: DiskProbe | undefined;
  const dropSchema = async () => {
    const db = await createPostgresDb(databaseUrl, { maxConnections: 1 });
    await db.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).finally(() => db.close());
  };
  // Ctrl-C, kill or a closed terminal: still leave no schema (and no probe file) behind. The load
  // generator, stopped with this process, is then no error of the run.
  let interrupted = false;
  const interrupt = (code: number) => () => {
    if (interrupted) return;
    interrupted = true;
    child?.kill();
    void Promise.all([dropSchema(), probe?.stop().catch(() => undefined)]).finally(() => process.exit(code));
  };
  process.once('SIGINT', interrupt(130));
  process.once('SIGTERM', interrupt(143));
  process.once('SIGHUP', interrupt(129));
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

    // Reads the server's WAL position and next transaction id (neither writes nor takes an id).
    statsDb = await createPostgresDb(databaseUrl, { maxConnections: 1 });
    const db = statsDb;
    const pgSample = async (): Promise<PgSample> => {
      const [row] = await db.query<{ wal: string; xid: string }>(
        `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::text AS wal, pg_snapshot_xmax(pg_current_snapshot())::text AS xid`,
      );
      return { wal: Number(row!.wal), xid: Number(row!.xid) };
    };

    if (probeDir !== 'off') probe = new DiskProbe(probeDir, await walDevice(db));
    child = fork(fileURLToPath(import.meta.url), [], { env: { ...process.env, BENCH_API_ROLE: 'load' }, execArgv: [], stdio: 'inherit' });
    /** What was measured over each row's window, by target. */
    const windows = new Map<string, RowWindow>();
    // How long the server's event loop (this process) was late to run what was ready: requests wait
    // that long before any of their code runs.
    const delay = monitorEventLoopDelay({ resolution: 1 });
    // The server's garbage collections (this process): a full one pauses every request in flight,
    // and the backlog it leaves is most of the open-loop row's tail on a small machine.
    const collections: Array<{ at: number; ms: number; full: boolean }> = [];
    const gcObserver = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        const kind = (e as { detail?: { kind?: number } }).detail?.kind;
        if (kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR || kind === perfConstants.NODE_PERFORMANCE_GC_MINOR) {
          collections.push({ at: e.startTime, ms: e.duration, full: kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR });
        }
      }
    });
    gcObserver.observe({ entryTypes: ['gc'] });
    const load = (job: LoadJob) =>
      new Promise<LoadResult>((resolve, reject) => {
        let first: CpuSample | undefined;
        let firstPg: Promise<PgSample> | undefined;
        let from = 0;
        const onMessage = (m: { phase?: 'start' | 'end'; result?: LoadResult }) => {
          if (m.phase === 'start') {
            first = cpuSample(child!.pid!);
            firstPg = pgSample();
            from = performance.now();
            delay.reset();
            delay.enable();
          } else if (m.phase === 'end' && first) {
            const cpu = cpuUse(first, cpuSample(child!.pid!));
            const pg = Promise.all([firstPg!, pgSample()]);
            const to = performance.now();
            delay.disable();
            windows.set(job.target, { from, to, cpu, pg, loopDelay: { p50: delay.percentile(50) / 1e6, p99: delay.percentile(99) / 1e6, max: delay.max / 1e6 } });
          }
          else if (m.result) {
            child!.off('message', onMessage);
            resolve(m.result);
          }
        };
        child!.on('message', onMessage);
        child!.once('exit', (code, signal) => {
          if (!interrupted) reject(new Error(`load generator exited with ${code ?? signal}`));
        });
        child!.send(job);
      });

    const common = { warmupMs: warmup * 1000, durationMs: seconds * 1000 };
    const rps = (r: LoadResult) => r.requests / (r.elapsedMs / 1000);
    const ms = (n: number) => n.toFixed(2);
    const low = latencyConnections > 0 && latencyConnections !== connections ? latencyConnections : 0;
    console.log(
      `bench:api — node:http keep-alive clients in a child process, ${connections} connections${low ? ` (and ${low})` : ''}, ${warmup} s warm-up + ${seconds} s per row, ` +
        `${availableParallelism()} cores, Node ${process.version}, EVAL_MODE ${evalMode}, PostgreSQL ${new URL(databaseUrl).host}`,
    );
    console.log('Workload: PUT /v2/customer_sessions/{id}, 5-line carts, 10 enabled campaigns (20 rules); new sessions, updates, 1 in 10 updates closes the session.');
    const perkline = { url: node.httpUrl, authorization: `ApiKey-v1 ${key.key}` };
    const bareJob = { url: bareUrl, authorization: 'ApiKey-v1 x' };
    // Each row with the bare row it is compared with.
    const rows: Array<{ result: LoadResult; bare?: LoadResult }> = [];
    const bareResult = await load({ ...common, ...bareJob, connections, target: `bare express, ${connections} connections` });
    /** The open-loop rate as a share of this run's bare rate, as the rows and the targets name it. */
    const shareOf = (rate: number) => (fixedRate ? `${(rate / rps(bareResult)).toFixed(2)}x bare, fixed` : `${rateShare}x bare`);
    rows.push({ result: bareResult });
    const rate = rateShare > 0 ? fixedRate || Math.max(1, Math.round(rateShare * rps(bareResult))) : 0;
    // The bare endpoint open loop at the same rate: the latency that the client, the machine and
    // node:http add on their own, under the Perkline open-loop row's.
    let bareOpen: LoadResult | undefined;
    if (rate > 0) {
      bareOpen = await load({ ...common, ...bareJob, connections, rate, target: `bare express, ${fmt(rate)}/s offered (open loop), ${connections} connections` });
      rows.push({ result: bareOpen });
    }
    // Each Perkline row starts from a checkpoint, as on a server that has been taking writes for a
    // while: see prepareWal. What it left ready and what the row wrote, by row.
    const walByRow: RowWal[] = [];
    const perklineRow = async (job: Omit<LoadJob, 'url' | 'authorization'>): Promise<LoadResult> => {
      const wal = await prepareWal(db);
      const from = await pgSample();
      const result = await load({ ...job, ...perkline });
      walByRow.push({ target: job.target, wal, written: (await pgSample()).wal - from.wal });
      return result;
    };
    const saturated = await perklineRow({ ...common, connections, target: `Perkline, ${connections} connections` });
    rows.push({ result: saturated, bare: bareResult });
    let open: LoadResult | undefined;
    if (rate > 0) {
      open = await perklineRow({ ...common, connections, rate, target: `Perkline, ${fmt(rate)}/s offered (${shareOf(rate)}, open loop), ${connections} connections` });
      rows.push({ result: open, bare: bareResult });
    }
    let lowRow: { result: LoadResult; bare: LoadResult } | undefined;
    if (low) {
      const lowBare = await load({ ...common, ...bareJob, connections: low, target: `bare express, ${low} connections` });
      rows.push({ result: lowBare });
      lowRow = { result: await perklineRow({ ...common, connections: low, target: `Perkline, ${low} connections` }), bare: lowBare };
      rows.push(lowRow);
    }

    const errors = (r: LoadResult) =>
      Object.entries(r.statuses)
        .filter(([s]) => s !== '200')
        .map(([s, c]) => `${s === '0' ? 'network' : s}: ${c}`)
        .concat(r.unsent ? [`not sent (no idle client): ${r.unsent}`] : [])
        .join(', ') || 'none';
    console.log('');
    console.log('target | requests/s | p50 ms | p99 ms | p99.9 ms | max ms | requests | errors by status | Perkline/bare');
    console.log('---|---|---|---|---|---|---|---|---');
    for (const { result: x, bare: b } of rows) {
      console.log([x.target, fmt(rps(x)), ms(x.p50), ms(x.p99), ms(x.p999), ms(x.max), fmt(x.requests), errors(x), b ? `${(rps(x) / rps(b)).toFixed(2)}x` : ''].join(' | '));
    }
    console.log('');
    // CPU time per request does not depend much on what else runs on the machine; the shares do.
    console.log(`CPU during each window: % of one core (${availableParallelism()} cores = ${availableParallelism() * 100}%) and CPU ms per request (Linux /proc)`);
    console.log(
      'target | server process | load generator | postgres | other processes | steal (taken by the hypervisor) | iowait | server event-loop delay p50 / p99 / max ms | server full collections: count (longest pause ms) | young collections: count (pauses in all ms) | PostgreSQL writes per request: WAL kB / transactions',
    );
    console.log('---|---|---|---|---|---|---|---|---|---|---');
    // Entries arrive a little after their collection: every one of the run is in by now.
    gcObserver.disconnect();
    for (const { result: r } of rows) {
      const w = windows.get(r.target);
      if (!w) continue;
      const c = w.cpu;
      const perRequest = (pct: number) => `${pct.toFixed(0)}% (${(((pct / 100) * 1000) / rps(r)).toFixed(3)} ms)`;
      const ofPerkline = r.target.startsWith('Perkline');
      const d = w.loopDelay;
      const lag = ofPerkline ? `${ms(d.p50)} / ${ms(d.p99)} / ${ms(d.max)}` : '';
      const inRow = collections.filter((g) => g.at >= w.from && g.at <= w.to);
      const full = inRow.filter((g) => g.full);
      const young = inRow.filter((g) => !g.full);
      const longest = full.reduce((m, g) => Math.max(m, g.ms), 0);
      const [pg0, pg1] = await w.pg;
      const writes = ofPerkline ? `${((pg1.wal - pg0.wal) / 1024 / r.requests).toFixed(2)} / ${((pg1.xid - pg0.xid) / r.requests).toFixed(3)}` : '';
      console.log(
        [
          r.target, perRequest(c.server), perRequest(c.load), perRequest(c.postgres), `${c.other.toFixed(0)}%`, `${c.steal.toFixed(0)}%`, `${c.iowait.toFixed(0)}%`, lag,
          `${full.length}${full.length > 0 ? ` (${ms(longest)})` : ''}`, `${young.length} (${young.reduce((t, g) => t + g.ms, 0).toFixed(0)})`, writes,
        ].join(' | '),
      );
    }
    console.log('');
    const ratio = rps(saturated) / rps(bareResult);
    console.log(`Perkline sessions at ${connections} connections: ${fmt(saturated.sessions)} started, ${fmt(saturated.closed)} closed in the measured window`);
    const targets = [`throughput >= 0.30x bare at ${connections} connections: ${ratio.toFixed(2)}x ${ratio >= 0.3 ? 'met' : 'MISSED'}`];
    if (open) {
      // Sustained: the rate asked for was served (within 2%, all requests sent).
      const sustained = rps(open) >= 0.98 * open.offered! && !open.unsent;
      // A fixed rate (--rate) is the target's only when it is at least 0.3x this run's bare rate.
      const atTarget = !fixedRate || open.offered! >= 0.3 * rps(bareResult);
      const met = sustained && open.p99 < 25;
      const verdict = !atTarget ? `${met ? 'met' : 'missed'} below 0.3x bare, not the target` : met ? 'met' : sustained ? 'MISSED' : 'MISSED (rate not sustained)';
      targets.push(
        `p99 < 25 ms at ${fmt(open.offered!)}/s (${shareOf(open.offered!)}): ${ms(open.p99)} ms, ${fmt(rps(open))}/s served ${verdict}` +
          (bareOpen ? ` (bare express at that rate: p99 ${ms(bareOpen.p99)} ms)` : ''),
      );
    }
    if (lowRow) {
      // Both parts of the target in one closed-loop row at the lower concurrency.
      const lowRatio = rps(lowRow.result) / rps(lowRow.bare);
      const met = lowRatio >= 0.3 && lowRow.result.p99 < 25;
      targets.push(`throughput >= 0.30x bare with p99 < 25 ms, closed loop at ${low} connections: ${lowRatio.toFixed(2)}x, p99 ${ms(lowRow.result.p99)} ms ${met ? 'met' : 'MISSED'}`);
    }
    console.log(`PostgreSQL WAL: ${walByRow.map(walLine).join('; ')}`);
    if (probe) {
      const flushes = await probe.stop().catch((e: Error) => e.message);
      const byRow = rows.flatMap(({ result: r }) => {
        const w = windows.get(r.target);
        if (!w || typeof flushes === 'string') return [];
        return [`${r.target}: ${flushLine(flushes.filter(([at]) => at >= performance.timeOrigin + w.from && at <= performance.timeOrigin + w.to))}`];
      });
      console.log(typeof flushes === 'string' ? `Disk: the probe failed (${flushes})` : `Disk (${probe.describe()}): ${byRow.join('; ')}`);
    }
    console.log(`Targets: ${targets.join('; ')}`);
  } finally {
    child?.removeAllListeners('exit');
    child?.kill();
    if (bare) {
      bare.closeAllConnections();
      await new Promise<void>((r) => bare!.close(() => r()));
    }
    await probe?.stop().catch(() => undefined);
    await node?.stop();
    await statsDb?.close();
    await dropSchema();
  }
}

/** What prepareWal found: segments ready for reuse, their count not known (why), or no checkpoint (why). */
type WalReady = { ready: number; segmentBytes: number } | { unknown: string } | string;

/** A Perkline row's checkpoint and the WAL bytes the row (with its warm-up) wrote. */
interface RowWal {
  target: string;
  wal: WalReady;
  written: number;
}

/** What the checkpoint before a Perkline row left ready, and what the row wrote. */
function walLine({ target, wal, written }: RowWal): string {
  const mb = (bytes: number) => fmt(bytes / 2 ** 20);
  if (typeof wal === 'string') return `${target}: no checkpoint before it (${wal}), wrote ${mb(written)} MB`;
  if ('unknown' in wal) return `${target}: a CHECKPOINT before it, segments ready for reuse not known (${wal.unknown}), wrote ${mb(written)} MB`;
  const created = Math.ceil(written / wal.segmentBytes) - wal.ready;
  return (
    `${target}: a CHECKPOINT before it left ${wal.ready} segments (${mb(wal.ready * wal.segmentBytes)} MB) ready for reuse, it wrote ${mb(written)} MB` +
    (created > 0 ? `, so about ${created} segments were created and zero-filled while it ran, each holding every commit meanwhile` : '')
  );
}

/**
 * A CHECKPOINT, then how many WAL segments are ready for reuse ahead of the one being written.
 * PostgreSQL writes its WAL into segment files (16 MB); when the next one is not there, the commit
 * that needs it creates it and fills it with zeros, and every commit waits meanwhile (56-78 ms on
 * the development VM, where at 1,232 updates/s this came every 2.8 s). A server under steady load
 * reuses the segments behind each checkpoint; one whose WAL was quiet before the bench (or that
 * kept few segments, `min_wal_size`) creates them. The checkpoint also writes out what earlier
 * work on the server left dirty, so that it is not flushed during the row. It needs a superuser
 * or the pg_checkpoint role; without one the row runs as the server is (the reason is returned).
 *
 * It runs before each Perkline row, not once before the first: PostgreSQL recycles segments only
 * at a checkpoint, so the ones a row used are ready again only after the next. On a VM where the
 * saturated row ran at 5,000 updates/s (4.5 kB of WAL each), one checkpoint before both rows left
 * 43 segments; the first row used about 32 of them and the open loop ran out after a few seconds:
 * 12 segments were created while it ran, and its p99 was 109 ms. With a checkpoint before it, 51 ms.
 */
async function prepareWal(db: Queryable): Promise<WalReady> {
  try {
    await db.exec('CHECKPOINT');
  } catch (e) {
    return (e as Error).message;
  }
  try {
    // pg_ls_waldir needs a superuser or the pg_monitor role.
    const [row] = await db.query<{ size: string; ready: number }>(
      `SELECT (SELECT setting FROM pg_settings WHERE name = 'wal_segment_size') AS size,
              (SELECT count(*)::int FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$' AND name > pg_walfile_name(pg_current_wal_lsn())) AS ready`,
    );
    return { ready: row!.ready, segmentBytes: Number(row!.size) };
  } catch (e) {
    return { unknown: (e as Error).message };
  }
}

// ---------------------------------------------------------------------------------------------
// The disk probe: how long one small write and its flush took while the rows ran, as a commit's
// flush of the WAL does. It runs in a thread of its own, so that this process's event loop and
// collections are not in what it measures.

/** One flush of the probe: when it started (ms since the epoch) and how long it took (ms). */
type Flush = [at: number, ms: number];

// The probe's thread (CommonJS, evaluated): 8 kB written round the first MiB of its file and
// flushed (fdatasync) every 20 ms, until told to stop; then it sends what it measured.
const PROBE_THREAD = `
const { parentPort, workerData } = require('node:worker_threads');
const fs = require('node:fs');
const fd = fs.openSync(workerData.file, 'w');
const page = Buffer.alloc(8192, 1);
fs.writeSync(fd, Buffer.alloc(1 << 20));
fs.fdatasyncSync(fd);
const flushes = [];
let offset = 0;
let stop = false;
parentPort.once('message', () => { stop = true; });
const tick = () => {
  if (stop) {
    fs.closeSync(fd);
    parentPort.postMessage(flushes);
    return;
  }
  const start = performance.now();
  fs.writeSync(fd, page, 0, page.length, offset);
  fs.fdatasyncSync(fd);
  flushes.push([performance.timeOrigin + start, performance.now() - start]);
  offset = (offset + page.length) % (1 << 20);
  setTimeout(tick, 20);
};
tick();
`;

class DiskProbe {
  private readonly folder: string;
  private readonly worker: Worker;
  private result: Promise<Flush[]> | undefined;
  private error: Error | undefined;

  /** `wal`: the device of PostgreSQL's WAL, or why it is not known. */
  constructor(
    readonly dir: string,
    private readonly wal: { dev: number } | string,
  ) {
    this.folder = mkdtempSync(join(dir, 'perkline-bench-disk-'));
    this.worker = new Worker(PROBE_THREAD, { eval: true, workerData: { file: join(this.folder, 'probe') } });
    this.worker.on('error', (e) => (this.error = e));
  }

  /** Where it writes, and whether that is where PostgreSQL writes its WAL. */
  describe(): string {
    const where =
      typeof this.wal === 'string'
        ? `the device of PostgreSQL's WAL not known: ${this.wal}`
        : `${statSync(this.dir).dev === this.wal.dev ? '' : 'not '}the device of PostgreSQL's WAL`;
    return `8 kB written and flushed every 20 ms in ${this.dir}, ${where}; the time of one flush`;
  }

  /** Stops it (once) and gives every flush it timed; its file is removed. */
  stop(): Promise<Flush[]> {
    this.result ??= new Promise<Flush[]>((resolve, reject) => {
      if (this.error) return reject(this.error);
      this.worker.once('message', resolve);
      this.worker.once('exit', () => reject(this.error ?? new Error('it stopped before sending its flushes')));
      this.worker.postMessage('stop');
    }).finally(() => {
      void this.worker.terminate();
      rmSync(this.folder, { recursive: true, force: true });
    });
    return this.result;
  }
}

/** The device of PostgreSQL's WAL (its data directory's pg_wal), when it runs on this host. */
async function walDevice(db: Queryable): Promise<{ dev: number } | string> {
  try {
    // data_directory needs a superuser or the pg_read_all_settings role.
    const [row] = await db.query<{ dir: string }>(`SELECT current_setting('data_directory') AS dir`);
    return { dev: statSync(join(row!.dir, 'pg_wal')).dev };
  } catch (e) {
    return (e as Error).message;
  }
}

/** One row's flushes: median, p99 and longest, and how many took over 20 and 50 ms. */
function flushLine(flushes: Flush[]): string {
  if (flushes.length === 0) return 'no flush timed';
  const ms = flushes.map(([, d]) => d).sort((a, b) => a - b);
  const at = (p: number) => percentile(ms, p).toFixed(1);
  const over = (limit: number) => ms.filter((d) => d > limit).length;
  return `${fmt(ms.length)} flushes, p50 ${at(0.5)}, p99 ${at(0.99)}, max ${ms[ms.length - 1]!.toFixed(1)} ms, ${over(20)} over 20 ms, ${over(50)} over 50 ms`;
}

// ---------------------------------------------------------------------------------------------
// Where the CPU went during a window: this process, the load generator, PostgreSQL's processes,
// everything else on the machine (other work competing for the same cores), the time the
// hypervisor gave the VM's cores to someone else (steal), and iowait.

interface CpuSample {
  at: number;
  server: number;
  load: number;
  postgres: Map<number, number>;
  busy: number;
  steal: number;
  iowait: number;
}

/** The PostgreSQL server's WAL position (bytes) and next transaction id. */
interface PgSample {
  wal: number;
  xid: number;
}

/** A row's measured window (performance.now() ms) and what the server side measured over it. */
interface RowWindow {
  from: number;
  to: number;
  cpu: CpuUse;
  /** PostgreSQL at the window's start and end. */
  pg: Promise<[PgSample, PgSample]>;
  /** The server's event-loop delay, ms. */
  loopDelay: { p50: number; p99: number; max: number };
}

interface CpuUse {
  server: number;
  load: number;
  postgres: number;
  other: number;
  steal: number;
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
  let steal = 0;
  let iowait = 0;
  try {
    for (const pid of readdirSync('/proc')) {
      if (!/^[0-9]+$/.test(pid)) continue;
      const t = procTicks(pid);
      if (t?.comm === 'postgres') postgres.set(Number(pid), t.ticks);
    }
    // cpu  user nice system idle iowait irq softirq steal
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    busy = f[0]! + f[1]! + f[2]! + f[5]! + f[6]!;
    steal = f[7]!;
    iowait = f[4]!;
  } catch {
    // not Linux: only this process is measured
  }
  const u = process.cpuUsage();
  return { at: performance.now(), server: (u.user + u.system) / 1e6, load: (procTicks(loadPid)?.ticks ?? 0) * TICK_S, postgres, busy, steal, iowait };
}

function cpuUse(a: CpuSample, b: CpuSample): CpuUse {
  const wall = (b.at - a.at) / 1000;
  let pg = 0;
  for (const [pid, ticks] of b.postgres) pg += (ticks - (a.postgres.get(pid) ?? 0)) * TICK_S;
  const server = b.server - a.server;
  const load = b.load - a.load;
  const busy = (b.busy - a.busy) * TICK_S;
  const pct = (s: number) => (100 * s) / wall;
  return { server: pct(server), load: pct(load), postgres: pct(pg), other: pct(Math.max(0, busy - server - load - pg)), steal: pct((b.steal - a.steal) * TICK_S), iowait: pct((b.iowait - a.iowait) * TICK_S) };
}

// Last, so that every declaration above is initialised.
if (process.env.BENCH_API_ROLE === 'load') {
  process.on('message', (job: LoadJob) => {
    void runLoad(job, (phase) => process.send!({ phase })).then((r) => process.send!({ result: r }));
  });
} else {
  await main();
}
