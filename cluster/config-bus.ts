import type { NatsConnection, Subscription } from 'nats';
import { JSONCodec } from 'nats';
import { createLocalConfigEvents, type ConfigChange, type ConfigEvents } from '../services/shared/index.js';

const codec = JSONCodec<ConfigChange & { origin: string }>();

/** NATS refuses a message past the server's max_payload (1 MiB by default). */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024;
/** Room for the message's other fields. */
const MESSAGE_MARGIN = 4096;

/**
 * A change as messages of at most `budget` bytes of JSON. Session IDs have no length limit, so the
 * IDs of the sessions of one customer (or of every session holding an attribute) may not fit one
 * message: they are split, and an ID that does not fit a message alone stands for every session
 * of its Application (no `sessionIds`), which receivers all drop.
 */
export function messagesOf(change: ConfigChange, budget: number): ConfigChange[] {
  if (change.kind !== 'sessions' || change.sessionIds === undefined) return [change];
  const out: ConfigChange[] = [];
  let ids: string[] = [];
  // The array's brackets, then each ID as JSON and its comma.
  let size = 2;
  for (const id of change.sessionIds) {
    const bytes = Buffer.byteLength(JSON.stringify(id), 'utf8') + 1;
    if (bytes + 2 > budget) return [{ kind: 'sessions', applicationId: change.applicationId }];
    if (size + bytes > budget) {
      out.push({ kind: 'sessions', applicationId: change.applicationId, sessionIds: ids });
      ids = [];
      size = 2;
    }
    ids.push(id);
    size += bytes;
  }
  if (ids.length > 0 || out.length === 0) out.push({ kind: 'sessions', applicationId: change.applicationId, sessionIds: ids });
  return out;
}

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
      const budget = (nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD) - MESSAGE_MARGIN;
      for (const part of messagesOf(change, budget)) nc.publish(subject, codec.encode({ ...part, origin: nodeId }));
    },
    subscribe: local.subscribe,
    close: () => sub.unsubscribe(),
  };
}
