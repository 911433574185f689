import type { SessionRecord, SessionService } from '../integration/index.js';
import type { ActorHost } from './actor-host.js';
import { actorKeyOf, type GetSessionCall, type IntegrationPort, type PortResult, type JsonObject, type UpdateSessionCall } from './port.js';

export interface LocalPortOptions {
  host: ActorHost;
  sessions: SessionService;
  nodeId: string;
  /** The shard of an actor key (for dropping caches when a shard moves). */
  shardOf: (key: string) => number;
}

/**
 * The IntegrationPort of this node's own actors: every write runs in the actor of its key, which
 * keeps the state it committed; reads do not queue behind writes.
 */
export function createLocalIntegrationPort(options: LocalPortOptions): IntegrationPort {
  const { host, sessions, nodeId, shardOf } = options;
  const result = <T>(value: T): PortResult<T> => ({ value, servedBy: nodeId });

  return {
    async updateSession(call: UpdateSessionCall): Promise<PortResult<JsonObject>> {
      const key = actorKeyOf('updateSession', call);
      return host.run(key, async () => {
        const cached = host.getCached<SessionRecord>(key);
        try {
          const outcome = await sessions.update(call, cached);
          if (outcome.committed) host.setCached(key, shardOf(key), outcome.committed);
          return result(outcome.state);
        } catch (e) {
          // A failed commit may leave the cache behind Postgres: read it again next time.
          host.dropCached(key);
          throw e;
        }
      });
    },

    async getSession(call: GetSessionCall): Promise<PortResult<JsonObject>> {
      const key = actorKeyOf('getSession', call);
      const { value } = await sessions.get(call, host.getCached<SessionRecord>(key));
      return result(value);
    },
  };
}
