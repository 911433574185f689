import { credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import { ActorServiceClient, type ActorCall, type ActorReply } from '../proto/gen/perkline/v1/actor.js';
import {
  actorKeyOf,
  PORT_OPERATIONS,
  type IntegrationPort,
  type JsonObject,
  type PortCalls,
  type PortOperation,
  type PortResult,
} from '../services/actors/index.js';
import { fromServiceError, GRPC_MAX_MESSAGE_BYTES } from '../services/grpc/index.js';
import { AppError, type Logger, silentLogger } from '../services/shared/index.js';
import type { ShardMap } from './shard-map.js';

export interface RouterOptions {
  nodeId: string;
  shards: ShardMap;
  /** This node's own actors. */
  local: IntegrationPort;
  /** How long a call waits for a shard without a live owner (default 10 s). */
  ownerWaitMs?: number;
  /** Deadline of a forwarded call (default 30 s). */
  forwardTimeoutMs?: number;
  logger?: Logger;
}

const SHARD_MOVED = 'ShardMoved';

/**
 * The cluster's IntegrationPort: a call goes to the actor of its key, on this node when it owns the
 * key's shard, otherwise to the owner's ActorService over gRPC. While a shard has no live owner
 * (a node died, a shard is moving) the call waits for one, up to ownerWaitMs.
 */
export class Router implements IntegrationPort {
  private readonly clients = new Map<string, ActorServiceClient>();
  private readonly ownerWaitMs: number;
  private readonly forwardTimeoutMs: number;
  private readonly logger: Logger;

  constructor(private readonly options: RouterOptions) {
    this.ownerWaitMs = options.ownerWaitMs ?? 10_000;
    this.forwardTimeoutMs = options.forwardTimeoutMs ?? 30_000;
    this.logger = options.logger ?? silentLogger;
  }

  invoke<O extends PortOperation>(operation: O, call: PortCalls[O]): Promise<PortResult<JsonObject>> {
    return this.dispatch(operation, call);
  }

  /** The receiving side of a forwarded call (internal ActorService.Invoke). */
  async serveForwarded(call: ActorCall): Promise<ActorReply> {
    if (!this.options.shards.owns(call.shard)) {
      throw new AppError('unavailable', `node ${this.options.nodeId} does not own shard ${call.shard}`, [
        { title: SHARD_MOVED, details: `shard ${call.shard} is not owned by ${this.options.nodeId}` },
      ]);
    }
    const operation = call.operation as PortOperation;
    if (!PORT_OPERATIONS.includes(operation)) throw new AppError('invalid_argument', `unknown operation ${call.operation}`);
    const r = await this.options.local.invoke(operation, JSON.parse(call.payloadJson) as PortCalls[typeof operation]);
    return { resultJson: JSON.stringify(r.value), servedBy: r.servedBy };
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }

  private async dispatch<O extends PortOperation>(operation: O, payload: PortCalls[O]): Promise<PortResult<JsonObject>> {
    const { shards } = this.options;
    const shard = shards.shardOf(actorKeyOf(operation, payload));
    const deadline = Date.now() + this.ownerWaitMs;
    for (let attempt = 0; ; attempt++) {
      if (shards.owns(shard)) return this.options.local.invoke(operation, payload);
      const remaining = deadline - Date.now();
      if (remaining <= 0) break;
      let owner = shards.ownerOf(shard);
      if (!owner) owner = await shards.waitForOwner(shard, remaining).catch(() => undefined);
      if (!owner) break;
      if (owner.nodeId === this.options.nodeId) {
        // The map names us but we may not serve it yet (fenced or still claiming): wait a little.
        await sleep(Math.min(50 * (attempt + 1), 250));
        continue;
      }
      try {
        const reply = await this.forward(owner.address, { operation, shard, payloadJson: JSON.stringify(payload), originNode: this.options.nodeId });
        return { value: JSON.parse(reply.resultJson) as JsonObject, servedBy: reply.servedBy };
      } catch (e) {
        if (!(e instanceof AppError) || e.kind !== 'unavailable') throw e;
        // The owner died or the shard moved between our look-up and the call: look again.
        this.logger.debug('forward failed, retrying', { shard, owner: owner.nodeId, attempt, error: e.message });
        await sleep(Math.min(50 * (attempt + 1), 500));
      }
    }
    throw new AppError('unavailable', `no live owner for shard ${shard}; retry shortly`, [
      { title: 'Service Unavailable', details: `shard ${shard} has no live owner`, source: { pointer: '' } },
    ]);
  }

  private forward(address: string, call: ActorCall): Promise<ActorReply> {
    let client = this.clients.get(address);
    if (!client) {
      client = new ActorServiceClient(address, credentials.createInsecure(), {
        'grpc.max_receive_message_length': GRPC_MAX_MESSAGE_BYTES,
        'grpc.max_send_message_length': GRPC_MAX_MESSAGE_BYTES,
      });
      this.clients.set(address, client);
    }
    const c = client;
    return new Promise((resolve, reject) => {
      c.invoke(call, new Metadata(), { deadline: Date.now() + this.forwardTimeoutMs }, (err: ServiceError | null, reply?: ActorReply) => {
        if (err) reject(fromServiceError(err));
        else resolve(reply!);
      });
    });
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
