import type { NatsConnection, Subscription } from 'nats';
import { JSONCodec } from 'nats';
import { createLocalConfigEvents, type ConfigChange, type ConfigEvents } from '../services/shared/index.js';

const codec = JSONCodec<ConfigChange & { origin: string }>();

/**
 * Configuration changes announced on this node are delivered here at once and published on NATS,
 * so every other node drops its caches of that Application too.
 */
export function createNatsConfigEvents(nc: NatsConnection, nodeId: string, subject = 'perkline.config'): ConfigEvents & { close(): void } {
  const local = createLocalConfigEvents();
  const sub: Subscription = nc.subscribe(subject, {
    callback: (err, msg) => {
      if (err) return;
      const change = codec.decode(msg.data);
      if (change.origin !== nodeId) local.deliver({ kind: change.kind, applicationId: change.applicationId });
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
