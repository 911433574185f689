import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface EdgeMetrics {
  registry: Registry;
  requests: Counter<'route' | 'method' | 'status'>;
  latency: Histogram<'route' | 'method'>;
}

export interface GaugeSources {
  actorQueueDepth?: () => number;
  actorActive?: () => number;
  poolUtilization?: () => number;
  ownedShards?: () => number;
  accessLogQueued?: () => number;
  accessLogDropped?: () => number;
}

/** One registry per node (several nodes may share a process in tests). */
export function createMetrics(sources: GaugeSources = {}): EdgeMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'perkline_' });
  const requests = new Counter({
    name: 'perkline_http_requests_total',
    help: 'HTTP requests by route template, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'perkline_http_request_duration_seconds',
    help: 'HTTP request latency by route template and method',
    labelNames: ['route', 'method'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  const gauge = (name: string, help: string, read: (() => number) | undefined) =>
    new Gauge({ name, help, registers: [registry], collect() { this.set(read ? read() : 0); } });
  gauge('perkline_actor_queue_depth', 'Calls waiting behind another call of their actor', sources.actorQueueDepth);
  gauge('perkline_actor_active', 'Calls being processed by actors', sources.actorActive);
  gauge('perkline_pool_utilization', 'Rule worker pool utilisation (0..1)', sources.poolUtilization);
  gauge('perkline_owned_shards', 'Shards owned by this node', sources.ownedShards);
  gauge('perkline_access_log_queued', 'Access log entries waiting to be written', sources.accessLogQueued);
  gauge('perkline_access_log_dropped', 'Access log entries dropped since start (queue full or batch failed)', sources.accessLogDropped);
  return { registry, requests, latency };
}
