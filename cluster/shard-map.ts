import { fnv1a } from '../services/shared/index.js';

export interface ShardOwner {
  nodeId: string;
  address: string;
}

/** What the router needs to know about shard ownership; ShardLeases (NATS) and LocalShardMap provide it. */
export interface ShardMap {
  readonly shardCount: number;
  shardOf(key: string): number;
  ownerOf(shard: number): ShardOwner | undefined;
  owns(shard: number): boolean;
  ownedShards(): number[];
  isReady(): boolean;
  waitForOwner(shard: number, timeoutMs: number): Promise<ShardOwner>;
}

/** Without NATS: this node owns every shard, in-process. */
export class LocalShardMap implements ShardMap {
  constructor(private readonly self: ShardOwner, readonly shardCount = 256) {}
  shardOf(key: string): number {
    return fnv1a(key) % this.shardCount;
  }
  ownerOf(): ShardOwner {
    return this.self;
  }
  owns(): boolean {
    return true;
  }
  ownedShards(): number[] {
    return Array.from({ length: this.shardCount }, (_, i) => i);
  }
  isReady(): boolean {
    return true;
  }
  async waitForOwner(): Promise<ShardOwner> {
    return this.self;
  }
}
