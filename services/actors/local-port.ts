import type { ActorHost } from './actor-host.js';
import {
  actorKeyOf,
  READ_OPERATIONS,
  type IntegrationPort,
  type JsonObject,
  type PortCalls,
  type PortOperation,
  type PortResult,
} from './port.js';

/** What a handler may do with the state its actor keeps. */
export interface ActorState {
  get<T>(): T | undefined;
  set(value: unknown): void;
  drop(): void;
}

/** The use case behind each operation, run inside the actor of the call's key. */
export type ActorHandlers = { [O in PortOperation]: (call: PortCalls[O], state: ActorState) => Promise<JsonObject> };

export interface LocalPortOptions {
  host: ActorHost;
  handlers: ActorHandlers;
  nodeId: string;
  /** The shard of an actor key (for dropping caches when a shard moves). */
  shardOf: (key: string) => number;
}

/**
 * The IntegrationPort of this node's own actors: every write runs in the actor of its key, which
 * keeps the state it committed; reads do not queue behind writes.
 */
export function createLocalIntegrationPort(options: LocalPortOptions): IntegrationPort {
  const { host, handlers, nodeId, shardOf } = options;
  const stateOf = (key: string): ActorState => ({
    get: <T>() => host.getCached<T>(key),
    set: (value) => host.setCached(key, shardOf(key), value),
    drop: () => host.dropCached(key),
  });

  return {
    async invoke<O extends PortOperation>(operation: O, call: PortCalls[O]): Promise<PortResult<JsonObject>> {
      const handler = handlers[operation] as (c: PortCalls[O], s: ActorState) => Promise<JsonObject>;
      if (!handler) throw new Error(`unknown operation ${String(operation)}`);
      const key = actorKeyOf(operation, call);
      const state = stateOf(key);
      if (READ_OPERATIONS.has(operation)) return { value: await handler(call, state), servedBy: nodeId };
      return host.run(key, async () => {
        try {
          return { value: await handler(call, state), servedBy: nodeId };
        } catch (e) {
          // A failed commit may leave the cache behind Postgres: read it again next time.
          state.drop();
          throw e;
        }
      });
    },
  };
}
