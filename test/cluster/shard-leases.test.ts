import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from 'nats';
import { ShardLeases } from '../../cluster/shard-leases.js';
import { natsUp, TEST_NATS_URL, uniqueName } from '../helpers/services.js';

const SHARDS = 256;
const until = async (cond: () => boolean, timeoutMs: number) => {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > timeoutMs) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return Date.now() - start;
};

describe.runIf(natsUp)('ShardLeases on NATS JetStream', () => {
  let nc: NatsConnection;
  let prefix: string;
  let running: ShardLeases[] = [];
  const drained: Array<{ node: string; shard: number }> = [];

  const node = (id: string) => {
    const l = new ShardLeases({
      nats: nc,
      nodeId: id,
      address: `${id}:9090`,
      prefix,
      leaseTtlMs: 3000,
      heartbeatMs: 500,
      drain: async (shard) => {
        drained.push({ node: id, shard });
      },
    });
    running.push(l);
    return l;
  };

  /** Every shard has exactly one owner that says it owns it, and every view agrees. */
  const consistent = (nodes: ShardLeases[], ids: string[]) => {
    for (let s = 0; s < SHARDS; s++) {
      const owners = nodes.filter((n) => n.owns(s));
      if (owners.length !== 1) return false;
      const owner = ids[nodes.indexOf(owners[0]!)]!;
      if (!nodes.every((n) => n.ownerOf(s)?.nodeId === owner)) return false;
    }
    return true;
  };

  beforeAll(async () => {
    nc = await connect({ servers: TEST_NATS_URL });
  });
  afterEach(async () => {
    for (const l of running) await l.stop({ graceful: false });
    running = [];
    drained.length = 0;
    const jsm = await nc.jetstreamManager();
    for (const b of ['nodes', 'shards']) await jsm.streams.delete(`KV_${prefix}_${b}`).catch(() => undefined);
  });
  afterAll(async () => {
    await nc?.close();
  });

  it('gives a single node every shard', async () => {
    prefix = uniqueName('sl');
    const a = node('a');
    await a.start();
    expect(a.ownedShards()).toHaveLength(SHARDS);
    expect(a.isReady()).toBe(true);
    expect(a.shardOf('s:1:abc')).toBe(a.shardOf('s:1:abc'));
  });

  it('splits the shards fairly among three nodes that all agree', async () => {
    prefix = uniqueName('sl');
    const nodes = [node('a'), node('b'), node('c')];
    await Promise.all(nodes.map((n) => n.start()));
    // Nodes that start together first race for orphaned shards, then hand them to their
    // rendezvous owners: wait for that to settle.
    const fair = () => nodes.every((n) => n.ownedShards().length > 50 && n.ownedShards().length < 120);
    await until(() => consistent(nodes, ['a', 'b', 'c']) && fair(), 10_000);
    const settled = nodes.map((n) => n.ownedShards());
    await new Promise((r) => setTimeout(r, 1200));
    expect(nodes.map((n) => n.ownedShards())).toEqual(settled);
    for (const n of nodes) expect(n.isReady()).toBe(true);
  });

  it('hands a share to a joining node after draining it, one owner at a time', async () => {
    prefix = uniqueName('sl');
    const nodes = [node('a'), node('b'), node('c')];
    await Promise.all(nodes.map((n) => n.start()));
    await until(() => consistent(nodes, ['a', 'b', 'c']), 10_000);
    const before = new Map(Array.from({ length: SHARDS }, (_, s) => [s, nodes.find((n) => n.owns(s))!] as const));
    let doubleOwned = 0;
    const watcher = setInterval(() => {
      for (let s = 0; s < SHARDS; s++) if ([...nodes, ...running.slice(3)].filter((n) => n.owns(s)).length > 1) doubleOwned++;
    }, 5);
    const d = node('d');
    await d.start();
    const all = [...nodes, d];
    await until(() => consistent(all, ['a', 'b', 'c', 'd']) && d.ownedShards().length > 30, 10_000);
    clearInterval(watcher);
    expect(doubleOwned).toBe(0);
    const moved = d.ownedShards();
    expect(moved.length).toBeGreaterThan(30);
    for (const s of moved) {
      const previous = ['a', 'b', 'c'][nodes.indexOf(before.get(s)!)]!;
      expect(drained).toContainEqual({ node: previous, shard: s });
    }
  });

  it('moves the shards of a crashed node to the survivors within 10 s', async () => {
    prefix = uniqueName('sl');
    const nodes = [node('a'), node('b'), node('c')];
    await Promise.all(nodes.map((n) => n.start()));
    await until(() => consistent(nodes, ['a', 'b', 'c']), 10_000);
    const victim = nodes[1]!;
    const lost = victim.ownedShards();
    await victim.stop({ graceful: false });
    const survivors = [nodes[0]!, nodes[2]!];
    const took = await until(() => consistent(survivors, ['a', 'c']), 10_000);
    console.log(`shards of a crashed node re-owned after ${took} ms`);
    for (const s of lost) expect(survivors.some((n) => n.owns(s))).toBe(true);
  });

  it('hands every shard over at once on a graceful stop', async () => {
    prefix = uniqueName('sl');
    const nodes = [node('a'), node('b')];
    await Promise.all(nodes.map((n) => n.start()));
    await until(() => consistent(nodes, ['a', 'b']), 10_000);
    await nodes[0]!.stop({ graceful: true });
    const took = await until(() => nodes[1]!.ownedShards().length === SHARDS, 10_000);
    expect(took).toBeLessThan(1500);
  });
});
