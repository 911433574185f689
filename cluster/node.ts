import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { setFlagsFromString } from 'node:v8';
import { connect, type NatsConnection } from 'nats';
import { ActorHost, createLocalIntegrationPort, integrationActorHandlers } from '../services/actors/index.js';
import { createEdgeApp, loadOperations, RateLimiter, rateLimited, type RateLimitOptions, type Readiness } from '../services/edge/index.js';
import { createEvaluator, type EvaluatorOptions } from '../services/engine/index.js';
import { startGrpcServer, type RunningGrpcServer } from '../services/grpc/index.js';
import {
  AchievementService,
  AudienceService,
  CatalogService,
  EventService,
  LoyaltyService,
  ProfileService,
  settleDueLedgers,
  ReferralService,
  ReservationService,
  SessionService,
  SnapshotCache,
  StrikethroughJobRunner,
  type StrikethroughJobRunnerOptions,
} from '../services/integration/index.js';
import {
  AccessLogWriter,
  ApiKeyResolver,
  bootstrapAdmin,
  CouponJobRunner,
  type AccessLogWriterOptions,
  type BootstrapResult,
  type CouponJobRunnerOptions,
  type ManagementContext,
} from '../services/management/index.js';
import { loggedTransport, MailDispatcher, OutboxDispatcher, parseSmtpUrl, smtpTransport, type MailTransport, type OutboxDispatcherOptions } from '../services/notify/index.js';
import {
  createLocalConfigEvents,
  createLogger,
  systemClock,
  uuid,
  type Clock,
  type ConfigEvents,
  type Logger,
  type LogLevel,
} from '../services/shared/index.js';
import { foldCampaignStats, migrate, openDb, type Db } from '../services/store/index.js';
import { createNatsConfigEvents } from './config-bus.js';
import { Router } from './router.js';
import { ShardLeases } from './shard-leases.js';
import { LocalShardMap, type ShardMap } from './shard-map.js';

export interface NodeOptions {
  /** Unique per node; default `<hostname>-<random>`. */
  nodeId?: string;
  /** Interface to listen on (default 0.0.0.0). */
  host?: string;
  /** HTTP port (default 8080; 0 picks a free one). */
  httpPort?: number;
  /** gRPC port (default 9090; 0 picks a free one). */
  grpcPort?: number;
  /** Host other nodes reach this node's gRPC port at (default 127.0.0.1). */
  advertiseHost?: string;
  /** postgres:// URL; without it the embedded PGlite database in dataDir is used. */
  databaseUrl?: string;
  /** PGlite data directory (default ./data). */
  dataDir?: string;
  /** Postgres schema (default: the server's search_path). */
  dbSchema?: string;
  dbPoolSize?: number;
  /** With a NATS URL the node joins a cluster; without, it owns every shard itself. */
  natsUrl?: string;
  /** Prefix of the cluster's NATS buckets and subjects (default perkline). */
  clusterName?: string;
  shardCount?: number;
  leaseTtlMs?: number;
  heartbeatMs?: number;
  adminEmail?: string;
  adminPassword?: string;
  /** Lifetime of Management API tokens (default 7 days). */
  tokenTtlMs?: number;
  evaluator?: EvaluatorOptions;
  eventPrefix?: string;
  logLevel?: LogLevel;
  logger?: Logger;
  clock?: Clock;
  /**
   * How often the loyalty scheduler runs (ms; default 5000): expired points written off, debts
   * paid, LoyaltyPointsExpiring announcements, tier changes of points that became active or expired.
   */
  loyaltySchedulerMs?: number;
  /** Integration API token bucket per API key (default 1000/s, burst 2000; ratePerSecond 0 disables). */
  rateLimit?: RateLimitOptions;
  /** How often appended campaign statistics are folded into the campaigns (default 1000 ms). */
  statsFoldMs?: number;
  /** `smtp://user:pass@host:port` of the relay for invite and password mails; without it mails are only logged (recipient and subject). */
  smtpUrl?: string;
  /** Sender of those mails (default `perkline@localhost`). */
  mailFrom?: string;
  /** How often the mail outbox is polled (default 1000 ms). */
  mailPollMs?: number;
  /** Attempts before a mail is marked failed (default 5). */
  mailMaxAttempts?: number;
  /** First retry delay of a mail, doubled each attempt (default 1000 ms). */
  mailBackoffMs?: number;
  /** Test hook: a transport used instead of SMTP or the log. */
  mailTransport?: MailTransport;
  /**
   * Delivery of rule-triggered webhooks and notifications (see OutboxDispatcherOptions: pollMs,
   * maxAttempts, backoffMs, maxBackoffMs, timeoutMs, leaseMarginMs, batchSize, concurrency).
   */
  outbox?: Omit<OutboxDispatcherOptions, 'db' | 'clock' | 'logger' | 'userAgent'>;
  /** Asynchronous coupon creation (see CouponJobRunnerOptions: pollMs, chunkSize, leaseMs, maxAttempts, backoffMs). */
  couponJobs?: Omit<CouponJobRunnerOptions, 'ctx' | 'nodeId'>;
  /** Strikethrough pricing jobs (see StrikethroughJobRunnerOptions: pollMs, leaseMs, maxAttempts, backoffMs, batchSize). */
  strikethroughJobs?: Pick<StrikethroughJobRunnerOptions, 'pollMs' | 'leaseMs' | 'maxAttempts' | 'backoffMs' | 'batchSize'>;
  /** Access log batching (see AccessLogWriterOptions); false: API requests are not logged. */
  accessLog?: Omit<AccessLogWriterOptions, 'db' | 'logger'> | false;
  /** Test hook, see ActorHostOptions.beforeRun. */
  actorBeforeRun?: (key: string) => Promise<void>;
  /**
   * Most bytes of a request's line and headers (default 1 MiB). Session IDs have no length limit
   * and travel in the path, percent-encoded (up to 12 bytes a character): node's 16 KiB default
   * refused (431) IDs past about 1,300 four-byte characters.
   */
  maxHeaderBytes?: number;
}

const DEFAULT_MAX_HEADER_BYTES = 1024 * 1024;

export interface RunningNode {
  nodeId: string;
  httpUrl: string;
  grpcAddress: string;
  db: Db;
  shards: ShardMap;
  bootstrap: BootstrapResult;
  /** graceful (default): hand shards over and drain; false: vanish as a crashed node would. */
  stop(options?: { graceful?: boolean }): Promise<void>;
}

/**
 * Two V8 settings of a node's process: allocation-site pretenuring is off, and the old generation
 * grows by a fixed factor between full collections.
 *
 * Pretenuring: V8 counts, at each young-generation collection, how many objects of each allocation
 * site (an object literal, an array, a parse) are still alive, and from a site whose objects mostly
 * are it allocates straight in the old generation. Under a steady stream of requests the objects of
 * a request in flight are all alive at a collection that comes while it waits on the database, so
 * sites of the request path were pretenured (and reset by the next full collection, and pretenured
 * again: hundreds of decisions a minute, `node --trace-pretenuring-statistics`), and objects that
 * die within milliseconds filled the old generation, which a full collection, with its pause and
 * its marking on both cores, then had to clear. A pretenured object also keeps the young objects it
 * points to alive until that full collection. Switched off, what reaches the old generation in the
 * open-loop row of `npm run bench:api` at 1,700 requests/s fell from about 24 to 12.5 MB/s (what
 * young collections promote, from 14.5 to 6 MB/s; `node --trace-gc-nvp`, two runs each).
 *
 * Growth: the old generation may grow to four times what a full collection left before the next one
 * starts. V8 chooses that factor after each full collection from how fast the program allocated in
 * the old generation against how fast it collected (`node --trace-gc-verbose`, "[HeapController]
 * factor"): 4 while requests promote a lot, but when little was promoted for a while it fell to 2.5
 * and lower, and full collections then came every 1.5-3 s at a heap of 50-60 MB instead of every
 * 10 s or more at about 150 MB. With the factor held at 4 (`--heap-growing-percent=300`), three
 * interleaved runs each of the open-loop row of `npm run bench:api` at 0.3x bare had 1, 2 and 1
 * full collections in 15 s against 3, 3 and 2 (p99 16.7, 44.5 and 34.2 ms against 37.1, 42.9 and
 * 25.8 ms), and at 0.25x bare 1, 1 and 2 against 4, 5 and 1 (p99 24.4, 38.9 and 15.1 against 30.7,
 * 54.3 and 21.1 ms). The live heap of a node is some 35 MB, so that is about 140 MB before a
 * collection; `--max-old-space-size` still bounds it.
 *
 * V8 flags are process-wide: they also hold for the rule workers, which start later.
 */
function tuneGarbageCollector(): void {
  setFlagsFromString('--no-allocation-site-pretenuring');
  setFlagsFromString('--heap-growing-percent=300');
}

/** Wires every part of a node together; the only place that knows them all. */
export async function startNode(options: NodeOptions = {}): Promise<RunningNode> {
  tuneGarbageCollector();
  const nodeId = options.nodeId ?? `${hostname()}-${uuid().slice(0, 8)}`;
  const logger = options.logger ?? createLogger({ level: options.logLevel ?? 'info', base: { node: nodeId } });
  const clock = options.clock ?? systemClock;
  const host = options.host ?? '0.0.0.0';
  const advertiseHost = options.advertiseHost ?? '127.0.0.1';
  const cleanups: Array<() => Promise<void> | void> = [];
  const cleanup = async () => {
    for (const fn of cleanups.reverse()) await Promise.resolve(fn()).catch(() => undefined);
  };

  try {
    const db = await openDb({
      databaseUrl: options.databaseUrl,
      dataDir: options.dataDir,
      schema: options.dbSchema,
      maxConnections: options.dbPoolSize,
      logger,
    });
    cleanups.push(() => db.close());
    await migrate(db);
    // Campaign statistics that commits appended are folded into the campaigns every second.
    const folding = setInterval(() => {
      foldCampaignStats(db).catch((e: unknown) => logger.debug('campaign statistics fold failed', { error: String(e) }));
    }, options.statsFoldMs ?? 1000);
    folding.unref();
    cleanups.push(() => clearInterval(folding));
    let nc: NatsConnection | undefined;
    let events: ConfigEvents;
    const prefix = options.clusterName ?? 'perkline';
    if (options.natsUrl) {
      nc = await connect({ servers: options.natsUrl, name: nodeId, maxReconnectAttempts: -1, reconnectTimeWait: 500 });
      const conn = nc;
      cleanups.push(() => conn.close());
      const bus = createNatsConfigEvents(nc, nodeId, `${prefix}.config`);
      cleanups.push(() => bus.close());
      events = bus;
    } else {
      events = createLocalConfigEvents();
    }

    const mailTransport =
      options.mailTransport ??
      (options.smtpUrl ? smtpTransport(parseSmtpUrl(options.smtpUrl), options.mailFrom ?? 'perkline@localhost') : loggedTransport(logger));
    const mailer = new MailDispatcher({
      db,
      transport: mailTransport,
      clock,
      logger,
      pollMs: options.mailPollMs,
      maxAttempts: options.mailMaxAttempts,
      backoffMs: options.mailBackoffMs,
    });
    mailer.start();
    cleanups.push(() => mailer.stop());
    // Every node sends due webhook calls and notifications; a use case that wrote some wakes the
    // local dispatcher so that they leave at once rather than at the next poll.
    const outbox = new OutboxDispatcher({ db, clock, logger, userAgent: `Perkline (node ${nodeId})`, ...options.outbox });
    outbox.start();
    cleanups.push(() => outbox.stop());
    const outboundWritten = () => outbox.wake();
    // The loyalty scheduler (issue 6, area J; issue 7): expired points are written off, and the
    // notifications that time alone causes (expiring points, tiers) written, without a request.
    const settling = setInterval(() => {
      settleDueLedgers(db, clock.now(), { outboundWritten }).catch((e: unknown) => logger.debug('loyalty scheduler round failed', { error: String(e) }));
    }, options.loyaltySchedulerMs ?? 5000);
    settling.unref();
    cleanups.push(() => clearInterval(settling));
    const management: ManagementContext = {
      db,
      events,
      clock,
      logger,
      tokenTtlMs: options.tokenTtlMs ?? 7 * 24 * 3600 * 1000,
      mail: { wake: () => mailer.wake() },
      outbound: { wake: outboundWritten },
      couponJobs: { wake: () => couponJobs.wake() },
    };
    // Every node works the asynchronous coupon creations; the one that queued a job starts it at once.
    const couponJobs = new CouponJobRunner({ ctx: management, nodeId, ...options.couponJobs });
    couponJobs.start();
    cleanups.push(() => couponJobs.stop());
    const bootstrap = await bootstrapAdmin(management, {
      email: options.adminEmail ?? 'admin@perkline.local',
      password: options.adminPassword,
    });

    const evaluator = createEvaluator(options.evaluator);
    cleanups.push(() => evaluator.close());
    const snapshots = new SnapshotCache({ db, events });
    cleanups.push(() => snapshots.close());
    // Every node works the strikethrough jobs; the node of a sync wakes its runner, and a campaign
    // change wakes the runner of every node that hears of it.
    const strikethrough = new StrikethroughJobRunner({ db, clock, logger, nodeId, snapshots, evaluator, eventPrefix: options.eventPrefix, outboundWritten, ...options.strikethroughJobs });
    strikethrough.start();
    cleanups.push(() => strikethrough.stop());
    cleanups.push(
      events.subscribe((change) => {
        if (change.kind === 'campaigns') strikethrough.wake();
      }),
    );
    const sessions = new SessionService({ db, snapshots, evaluator, clock, eventPrefix: options.eventPrefix, logger, outboundWritten });
    const actors = new ActorHost({
      beforeRun: options.actorBeforeRun,
      entity: (key) => (key.startsWith('p:') ? 'profile' : 'session'),
    });
    const dropSessions = events.subscribe((change) => {
      if (change.kind !== 'sessions') return;
      if (change.sessionIds === undefined) actors.dropCachedWhere((key) => key.startsWith(`s:${change.applicationId}:`));
      else for (const id of change.sessionIds) actors.dropCached(`s:${change.applicationId}:${id}`);
    });
    cleanups.push(dropSessions);
    const apiKeys = new ApiKeyResolver(management);
    cleanups.push(() => apiKeys.close());
    // One bucket per API key for REST and gRPC alike.
    const rateLimiter = new RateLimiter(options.rateLimit);

    // gRPC first: other nodes may forward to us as soon as we hold a shard.
    let router: Router | undefined;
    const operations = new Map(loadOperations().map((op) => [op.operationId, op]));
    const grpc: RunningGrpcServer = await startGrpcServer(
      {
        port: { invoke: (op, c) => router!.invoke(op, c) },
        authenticate: async (a) => {
          const key = await apiKeys.resolveKey(a);
          const wait = rateLimiter.take(key.keyId);
          if (wait > 0) throw rateLimited(wait);
          return key.app;
        },
        validateBody: (operationId, body) => operations.get(operationId)?.validateBody(body),
        actorInvoke: (call) => router!.serveForwarded(call),
        logger,
      },
      `${host}:${options.grpcPort ?? 9090}`,
    );
    cleanups.push(() => grpc.stop());
    const grpcAddress = `${advertiseHost}:${grpc.port}`;

    let leases: ShardLeases | undefined;
    if (nc) {
      leases = new ShardLeases({
        nats: nc,
        nodeId,
        address: grpcAddress,
        shardCount: options.shardCount,
        prefix,
        leaseTtlMs: options.leaseTtlMs,
        heartbeatMs: options.heartbeatMs,
        drain: (shard: number) => actors.drain((key) => leases!.shardOf(key) === shard),
        logger,
      });
      leases.onChange((shard: number) => actors.dropShard(shard));
    }
    const shardMap: ShardMap = leases ?? new LocalShardMap({ nodeId, address: grpcAddress }, options.shardCount ?? 256);
    const local = createLocalIntegrationPort({
      host: actors,
      handlers: integrationActorHandlers({
        sessions,
        referrals: new ReferralService(db, clock),
        profiles: new ProfileService({
          db,
          snapshots,
          evaluator,
          clock,
          eventPrefix: options.eventPrefix,
          logger,
          outboundWritten,
          // Customer data deletion changed these sessions: every node's cached copies go.
          onSessionsChanged: (changed) => {
            const byApp = new Map<number, string[]>();
            for (const s of changed) byApp.set(s.applicationId, [...(byApp.get(s.applicationId) ?? []), s.integrationId]);
            for (const [applicationId, sessionIds] of byApp) events.publish({ kind: 'sessions', applicationId, sessionIds });
          },
        }),
        events: new EventService({ db, snapshots, evaluator, clock, eventPrefix: options.eventPrefix, logger, outboundWritten }),
        reservations: new ReservationService(db, clock),
        achievements: new AchievementService(db, clock),
        loyalty: new LoyaltyService(db, clock),
        audiences: new AudienceService(db, clock),
        catalogs: new CatalogService(db, clock, () => strikethrough.wake()),
      }),
      nodeId,
      shardOf: (k) => shardMap.shardOf(k),
    });
    router = new Router({ nodeId, shards: shardMap, local, logger });
    cleanups.push(() => router!.close());
    if (leases) await leases.start();

    const readiness = async (): Promise<Readiness> => {
      const checks: Record<string, boolean> = {};
      checks.database = await db.query('SELECT 1').then(() => true, () => false);
      if (nc) {
        checks.nats = !nc.isClosed();
        checks.shards = shardMap.isReady();
      }
      return { ready: Object.values(checks).every(Boolean), checks };
    };
    // Closed after the HTTP server (cleanups run in reverse): the last requests' entries are written.
    const accessLog = options.accessLog === false ? undefined : new AccessLogWriter({ db, logger, ...options.accessLog });
    if (accessLog) cleanups.push(() => accessLog.close());
    const { handle } = createEdgeApp({
      port: router,
      management,
      apiKeys,
      readiness,
      logger,
      rateLimit: rateLimiter,
      accessLog,
      gauges: {
        actorQueueDepth: () => actors.queueDepth,
        actorActive: () => actors.activeCount,
        poolUtilization: () => evaluator.utilization?.() ?? 0,
        ownedShards: () => shardMap.ownedShards().length,
        accessLogQueued: () => accessLog?.stats().queued ?? 0,
        accessLogDropped: () => accessLog?.stats().dropped ?? 0,
      },
    });
    const server: Server = createServer({ maxHeaderSize: options.maxHeaderBytes ?? DEFAULT_MAX_HEADER_BYTES }, handle);
    server.keepAliveTimeout = 65_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.httpPort ?? 8080, host, () => resolve());
    });
    cleanups.push(
      () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        }),
    );
    const httpPort = (server.address() as AddressInfo).port;
    const httpUrl = `http://${advertiseHost}:${httpPort}`;
    logger.info('node started', { httpUrl, grpcAddress, cluster: Boolean(nc), database: db.kind });

    let stopped = false;
    return {
      nodeId,
      httpUrl,
      grpcAddress,
      db,
      shards: shardMap,
      bootstrap,
      stop: async ({ graceful = true } = {}) => {
        if (stopped) return;
        stopped = true;
        if (leases) await leases.stop({ graceful });
        await cleanup();
        logger.info('node stopped', { graceful });
      },
    };
  } catch (e) {
    await cleanup();
    throw e;
  }
}
