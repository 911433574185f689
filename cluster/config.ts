import type { LogLevel } from '../services/shared/index.js';
import type { NodeOptions } from './node.js';

/** Every environment variable a node reads, with its default (see README, Configuration). */
export function nodeOptionsFromEnv(env: NodeJS.ProcessEnv): NodeOptions {
  const int = (name: string): number | undefined => {
    const v = env[name];
    if (v === undefined || v === '') return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(v)}`);
    return n;
  };
  const str = (name: string): string | undefined => (env[name] === undefined || env[name] === '' ? undefined : env[name]);
  const mode = str('EVAL_MODE');
  if (mode !== undefined && !['inline', 'pool', 'auto'].includes(mode)) throw new Error(`EVAL_MODE must be inline, pool or auto`);
  const level = str('LOG_LEVEL');
  if (level !== undefined && !['debug', 'info', 'warn', 'error', 'silent'].includes(level)) throw new Error('LOG_LEVEL must be debug, info, warn, error or silent');
  const tokenHours = int('TOKEN_TTL_HOURS');
  const rps = int('RATE_LIMIT_RPS');
  const burst = int('RATE_LIMIT_BURST');
  const opts: NodeOptions = {
    nodeId: str('NODE_ID'),
    host: str('HOST'),
    httpPort: int('PORT') ?? 8080,
    grpcPort: int('GRPC_PORT') ?? 9090,
    advertiseHost: str('ADVERTISE_HOST'),
    databaseUrl: str('DATABASE_URL'),
    dataDir: str('DATA_DIR') ?? './data',
    dbSchema: str('DB_SCHEMA'),
    dbPoolSize: int('DB_POOL_SIZE'),
    natsUrl: str('NATS_URL'),
    clusterName: str('CLUSTER_NAME'),
    shardCount: int('SHARD_COUNT'),
    leaseTtlMs: int('LEASE_TTL_MS'),
    heartbeatMs: int('HEARTBEAT_MS'),
    adminEmail: str('ADMIN_EMAIL'),
    adminPassword: str('ADMIN_PASSWORD'),
    tokenTtlMs: tokenHours === undefined ? undefined : tokenHours * 3600 * 1000,
    evaluator: {
      mode: mode as 'inline' | 'pool' | 'auto' | undefined,
      costThreshold: int('EVAL_POOL_THRESHOLD'),
      poolSize: int('EVAL_POOL_SIZE'),
    },
    eventPrefix: str('EVENT_PREFIX'),
    rateLimit: rps === undefined && burst === undefined ? undefined : { ...(rps !== undefined && { ratePerSecond: rps }), ...(burst !== undefined && { burst }) },
    logLevel: level as LogLevel | undefined,
    smtpUrl: str('SMTP_URL'),
    mailFrom: str('MAIL_FROM'),
    maxHeaderBytes: int('MAX_HEADER_BYTES'),
    outbox: {
      pollMs: int('OUTBOX_POLL_MS'),
      maxAttempts: int('OUTBOX_MAX_ATTEMPTS'),
      backoffMs: int('OUTBOX_BACKOFF_MS'),
      maxBackoffMs: int('OUTBOX_MAX_BACKOFF_MS'),
      timeoutMs: int('OUTBOX_TIMEOUT_MS'),
      leaseMarginMs: int('OUTBOX_LEASE_MARGIN_MS'),
      concurrency: int('OUTBOX_CONCURRENCY'),
    },
    couponJobs: {
      pollMs: int('COUPON_JOB_POLL_MS'),
      chunkSize: int('COUPON_JOB_CHUNK_SIZE'),
      leaseMs: int('COUPON_JOB_LEASE_MS'),
    },
    strikethroughJobs: {
      pollMs: int('STRIKETHROUGH_JOB_POLL_MS'),
      leaseMs: int('STRIKETHROUGH_JOB_LEASE_MS'),
    },
  };
  // Leave unset options out so each component's documented default applies.
  for (const o of [opts, opts.evaluator, opts.outbox, opts.couponJobs, opts.strikethroughJobs]) withoutUndefined(o as Record<string, unknown>);
  return opts;
}

/** Deletes the properties whose value is undefined (in place). */
function withoutUndefined(o: Record<string, unknown>): void {
  for (const k of Object.keys(o)) if (o[k] === undefined) delete o[k];
}
