// Configuration changes (Applications, campaigns, rulesets, API keys) are announced so that every
// cache built from them is dropped. In one process this is a plain listener list; in a cluster the
// node entry wraps it so that changes also travel over NATS to every other node.

export interface ConfigChange {
  /** `sessions`: stored sessions changed outside their actors (customer data deletion). */
  kind: 'application' | 'campaigns' | 'api_keys' | 'sessions';
  applicationId: number;
  /**
   * For `sessions`: the integration IDs of the sessions whose cached copies must go; absent, every
   * session of the Application (what a change names when its IDs are too long to send).
   */
  sessionIds?: string[];
}

/** A change that invalidates what is built from an Application's configuration. */
export const isConfigurationChange = (change: ConfigChange): boolean => change.kind !== 'sessions';

export interface ConfigEvents {
  publish(change: ConfigChange): void;
  subscribe(listener: (change: ConfigChange) => void): () => void;
}

export function createLocalConfigEvents(): ConfigEvents & { deliver(change: ConfigChange): void } {
  const listeners = new Set<(change: ConfigChange) => void>();
  const deliver = (change: ConfigChange): void => {
    for (const l of listeners) l(change);
  };
  return {
    publish: deliver,
    deliver,
    subscribe: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}
