import type { NatsConnection, Subscription } from 'nats';
import { JSONCodec } from 'nats';
import { createLocalConfigEvents, type ConfigChange, type ConfigEvents } from '../services/shared/index.js';

const codec = JSONCodec<ConfigChange & { origin: string }>();

/**
 * Configuration changes announced on this node are delivered here at once and published on NATS,
 * so every other node drops its caches of that Application (or of those sessions) too.
 */
export function createNatsConfigEvents(nc: NatsConnection, nodeId: string, subject = 'perkline.config'): ConfigEvents & { close(): void } {
  const local = createLocalConfigEvents();
  const sub: Subscription = nc.subscribe(subject, {
    callback: (err, msg) => {
      if (err) return;
      const change = codec.decode(msg.data);
      if (change.origin === nodeId) return;
      local.deliver({ kind: change.kind, applicationId: change.applicationId, ...(change.sessionIds ? { sessionIds: change.sessionIds } : {}) });
    },
  });
  return {
    publish: (change) => {
      local.deliver(change);
      nc.publish(subject, codec.encode({ ...change, origin: nodeId }));
    },
    subscribe: local.subscribe,
    close: () => sub.unsubscribe(),
  };
}
