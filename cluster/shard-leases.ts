import type { KV, KvEntry, NatsConnection, QueuedIterator } from 'nats';
import { fnv1a, silentLogger, type Logger } from '../services/shared/index.js';
import type { ShardMap, ShardOwner } from './shard-map.js';

export type { ShardOwner } from './shard-map.js';

export interface ShardLeasesOptions {
  nats: NatsConnection;
  nodeId: string;
  /** host:port of this node's gRPC server, for other nodes to forward to. */
  address: string;
  shardCount?: number;
  /** Prefix of the two KV buckets (default perkline). */
  prefix?: string;
  /** A node whose liveness key is older than this is dead (default 6000 ms). */
  leaseTtlMs?: number;
  /** Liveness renewal and rebalancing interval (default 1000 ms). */
  heartbeatMs?: number;
  /** Awaited before a shard is handed to another node: lets in-flight actor calls finish. */
  drain?: (shard: number) => Promise<void>;
  logger?: Logger;
}

interface ShardEntry extends ShardOwner {
  revision: number;
  epoch: number;
}

type Listener = (shard: number, owner: ShardOwner | undefined, previous: ShardOwner | undefined) => void;

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const encode = (v: unknown) => encoder.encode(JSON.stringify(v));

export const shardOf = (key: string, shardCount: number): number => fnv1a(key) % shardCount;

/**
 * murmur3's finaliser: FNV-1a of strings that differ only in their last characters stays
 * correlated (one node of "a", "b", "c" would win half the shards); mixing spreads the scores.
 */
function mix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * Shard ownership of a cluster, kept in two NATS JetStream KV buckets.
 *
 * - `<prefix>_nodes` (bucket TTL = lease TTL): each node puts `node.<id>` every heartbeat. Every
 *   node watches the bucket and counts a node alive while its last put is younger than the TTL
 *   (the TTL also removes the keys of dead nodes from the bucket).
 * - `<prefix>_shards` (no TTL): `shard.<n>` = {nodeId, address, epoch}, changed only by revision
 *   compare-and-set, so two nodes never both win a shard.
 *
 * The owner a shard should have is chosen by rendezvous hashing over the live nodes (fair and
 * stable: a joining or leaving node moves only its share). A live owner hands a shard over itself
 * after draining it; a dead owner's shards are taken by their new desired owners (or, after a
 * grace period, by any live node). A node that cannot renew its own liveness key for longer than
 * the TTL minus one heartbeat fences itself: it serves nothing until renewals succeed again.
 */
export class ShardLeases implements ShardMap {
  readonly shardCount: number;
  private readonly nodeId: string;
  private readonly address: string;
  private readonly prefix: string;
  private readonly ttl: number;
  private readonly heartbeat: number;
  private readonly drain: (shard: number) => Promise<void>;
  private readonly logger: Logger;
  private readonly nc: NatsConnection;

  private nodesKv?: KV;
  private shardsKv?: KV;
  private readonly shards = new Map<number, ShardEntry>();
  private readonly nodes = new Map<string, { address: string; seen: number }>();
  private readonly releasing = new Set<number>();
  private readonly orphanedSince = new Map<number, number>();
  private readonly listeners = new Set<Listener>();
  private readonly waiters = new Set<() => void>();
  private watchers: QueuedIterator<KvEntry>[] = [];
  private timer?: NodeJS.Timeout;
  private lastRenewed = 0;
  private started = false;
  private stopping = false;
  private round?: Promise<void>;

  constructor(options: ShardLeasesOptions) {
    this.nc = options.nats;
    this.nodeId = options.nodeId;
    this.address = options.address;
    this.shardCount = options.shardCount ?? 256;
    this.prefix = options.prefix ?? 'perkline';
    this.ttl = options.leaseTtlMs ?? 6000;
    this.heartbeat = options.heartbeatMs ?? 1000;
    this.drain = options.drain ?? (async () => {});
    this.logger = options.logger ?? silentLogger;
    if (this.heartbeat * 2 >= this.ttl) throw new Error('leaseTtlMs must be more than twice heartbeatMs');
  }

  shardOf(key: string): number {
    return shardOf(key, this.shardCount);
  }

  ownerOf(shard: number): ShardOwner | undefined {
    const e = this.shards.get(shard);
    return e ? { nodeId: e.nodeId, address: e.address } : undefined;
  }

  owns(shard: number): boolean {
    return this.started && !this.stopping && !this.fenced() && !this.releasing.has(shard) && this.shards.get(shard)?.nodeId === this.nodeId;
  }

  ownedShards(): number[] {
    const out: number[] = [];
    for (let s = 0; s < this.shardCount; s++) if (this.owns(s)) out.push(s);
    return out;
  }

  isReady(): boolean {
    if (!this.started || this.stopping || this.fenced()) return false;
    for (let s = 0; s < this.shardCount; s++) {
      const e = this.shards.get(s);
      if (!e || !this.alive(e.nodeId)) return false;
    }
    return true;
  }

  waitForOwner(shard: number, timeoutMs: number): Promise<ShardOwner> {
    const now = this.ownerOf(shard);
    if (now) return Promise.resolve(now);
    return new Promise((resolve, reject) => {
      const check = () => {
        const o = this.ownerOf(shard);
        if (!o) return;
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve(o);
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`no owner for shard ${shard} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.add(check);
    });
  }

  onChange(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async start(): Promise<void> {
    const js = this.nc.jetstream();
    this.nodesKv = await js.views.kv(`${this.prefix}_nodes`, { ttl: this.ttl, history: 1 });
    this.shardsKv = await js.views.kv(`${this.prefix}_shards`, { history: 1 });
    await this.renew();
    await Promise.all([this.watch(this.nodesKv, (e) => this.onNode(e)), this.watch(this.shardsKv, (e) => this.onShard(e))]);
    this.started = true;
    await this.rebalance();
    this.schedule();
    this.logger.info('shard leases started', { owned: this.ownedShards().length, nodes: this.aliveNodes().length });
  }

  async stop(options: { graceful?: boolean } = {}): Promise<void> {
    if (this.stopping) return;
    const graceful = options.graceful ?? true;
    if (this.timer) clearTimeout(this.timer);
    await this.round?.catch(() => undefined);
    if (graceful && this.started) {
      const mine = [...this.shards.entries()].filter(([, e]) => e.nodeId === this.nodeId).map(([s]) => s);
      for (const s of mine) this.releasing.add(s);
      this.stopping = true;
      const others = this.aliveNodes().filter((n) => n !== this.nodeId);
      await Promise.all(
        mine.map(async (s) => {
          await this.drain(s).catch(() => undefined);
          const to = this.desiredOwner(s, others);
          await this.handOver(s, to).catch((e) => this.logger.warn('shard release failed', { shard: s, error: String(e) }));
        }),
      );
      await this.nodesKv?.delete(`node.${this.nodeId}`).catch(() => undefined);
    }
    this.stopping = true;
    for (const w of this.watchers) w.stop();
    this.watchers = [];
    this.started = false;
  }

  // --- internals ---

  private fenced(): boolean {
    return Date.now() - this.lastRenewed > this.ttl - this.heartbeat;
  }

  private alive(nodeId: string): boolean {
    if (nodeId === this.nodeId) return !this.fenced() && !this.stopping;
    const n = this.nodes.get(nodeId);
    return n !== undefined && Date.now() - n.seen < this.ttl;
  }

  private aliveNodes(): string[] {
    const out = [...this.nodes.keys()].filter((n) => this.alive(n));
    if (!out.includes(this.nodeId) && this.alive(this.nodeId)) out.push(this.nodeId);
    return out.sort();
  }

  private desiredOwner(shard: number, nodes: string[]): string | undefined {
    let best: string | undefined;
    let bestScore = -1;
    for (const n of nodes) {
      const score = mix32(fnv1a(`${shard}:${n}`));
      if (score > bestScore || (score === bestScore && best !== undefined && n < best)) {
        best = n;
        bestScore = score;
      }
    }
    return best;
  }

  private async renew(): Promise<void> {
    const before = Date.now();
    await this.nodesKv!.put(`node.${this.nodeId}`, encode({ nodeId: this.nodeId, address: this.address, at: before }));
    this.lastRenewed = before;
  }

  private async watch(kv: KV, handle: (e: KvEntry) => void): Promise<void> {
    let initialized!: () => void;
    const ready = new Promise<void>((r) => (initialized = r));
    const it = await kv.watch({ initializedFn: () => initialized() });
    this.watchers.push(it);
    void (async () => {
      try {
        for await (const e of it) handle(e);
      } catch (err) {
        if (!this.stopping) this.logger.warn('kv watch ended', { error: String(err) });
      }
    })();
    await ready;
  }

  private onNode(e: KvEntry): void {
    const id = e.key.slice('node.'.length);
    if (e.operation !== 'PUT') {
      this.nodes.delete(id);
      return;
    }
    const v = JSON.parse(decoder.decode(e.value)) as { address: string };
    this.nodes.set(id, { address: v.address, seen: Math.min(Date.now(), e.created.getTime()) });
  }

  private onShard(e: KvEntry): void {
    const shard = Number(e.key.slice('shard.'.length));
    if (!Number.isInteger(shard)) return;
    const prev = this.shards.get(shard);
    if (prev && prev.revision >= e.revision) return;
    if (e.operation !== 'PUT') {
      this.shards.delete(shard);
      if (prev) this.emit(shard, undefined, prev);
      return;
    }
    const v = JSON.parse(decoder.decode(e.value)) as { nodeId: string; address: string; epoch: number };
    this.setShard(shard, { nodeId: v.nodeId, address: v.address, epoch: v.epoch, revision: e.revision });
  }

  private setShard(shard: number, next: ShardEntry): void {
    const prev = this.shards.get(shard);
    if (prev && prev.revision >= next.revision) return;
    this.shards.set(shard, next);
    if (!prev || prev.nodeId !== next.nodeId) this.emit(shard, next, prev);
  }

  private emit(shard: number, owner: ShardOwner | undefined, previous: ShardOwner | undefined): void {
    const o = owner && { nodeId: owner.nodeId, address: owner.address };
    const p = previous && { nodeId: previous.nodeId, address: previous.address };
    for (const l of this.listeners) {
      try {
        l(shard, o, p);
      } catch (err) {
        this.logger.warn('shard listener failed', { error: String(err) });
      }
    }
    for (const w of [...this.waiters]) w();
  }

  private schedule(): void {
    if (this.stopping) return;
    this.timer = setTimeout(() => {
      this.round = this.tick().finally(() => this.schedule());
    }, this.heartbeat);
    this.timer.unref?.();
  }

  private async tick(): Promise<void> {
    try {
      await this.renew();
    } catch (err) {
      this.logger.warn('lease renewal failed', { error: String(err), fenced: this.fenced() });
      return;
    }
    await this.rebalance().catch((err) => this.logger.warn('rebalance failed', { error: String(err) }));
  }

  /** One pass over every shard: claim what is ours and orphaned, hand over what is another's. */
  private async rebalance(): Promise<void> {
    if (this.stopping || this.fenced()) return;
    const nodes = this.aliveNodes();
    const now = Date.now();
    const claims: Array<Promise<void>> = [];
    const handovers: number[] = [];
    for (let s = 0; s < this.shardCount; s++) {
      const cur = this.shards.get(s);
      const desired = this.desiredOwner(s, nodes);
      if (cur?.nodeId === this.nodeId) {
        if (desired && desired !== this.nodeId && !this.releasing.has(s)) handovers.push(s);
        continue;
      }
      if (cur && this.alive(cur.nodeId)) {
        this.orphanedSince.delete(s);
        continue;
      }
      const since = this.orphanedSince.get(s) ?? now;
      this.orphanedSince.set(s, since);
      // The desired owner claims at once; anyone may after a grace period, so no shard stays orphaned.
      if (desired === this.nodeId || now - since > 3 * this.heartbeat) claims.push(this.claim(s, cur));
    }
    await Promise.all(claims);
    for (const s of handovers) {
      if (this.stopping) return;
      this.releasing.add(s);
      try {
        await this.drain(s);
        await this.handOver(s, this.desiredOwner(s, this.aliveNodes()));
      } catch (err) {
        this.logger.warn('shard handover failed', { shard: s, error: String(err) });
      } finally {
        this.releasing.delete(s);
      }
    }
  }

  private async claim(shard: number, cur: ShardEntry | undefined): Promise<void> {
    const value = { nodeId: this.nodeId, address: this.address, epoch: (cur?.epoch ?? 0) + 1 };
    try {
      const revision = cur ? await this.shardsKv!.update(`shard.${shard}`, encode(value), cur.revision) : await this.shardsKv!.create(`shard.${shard}`, encode(value));
      this.orphanedSince.delete(shard);
      this.setShard(shard, { ...value, revision });
    } catch {
      // Another node won the compare-and-set; the watch brings its entry.
    }
  }

  /** Gives a shard this node owns to another live node, or frees it when there is none. */
  private async handOver(shard: number, to: string | undefined): Promise<void> {
    const cur = this.shards.get(shard);
    if (!cur || cur.nodeId !== this.nodeId) return;
    const target = to && to !== this.nodeId ? this.nodes.get(to) : undefined;
    if (to && target && to !== this.nodeId) {
      const value = { nodeId: to, address: target.address, epoch: cur.epoch + 1 };
      const revision = await this.shardsKv!.update(`shard.${shard}`, encode(value), cur.revision);
      this.setShard(shard, { ...value, revision });
    } else {
      await this.shardsKv!.delete(`shard.${shard}`, { previousSeq: cur.revision });
      this.shards.delete(shard);
      this.emit(shard, undefined, cur);
    }
  }
}
