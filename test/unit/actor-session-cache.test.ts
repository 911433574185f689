import { describe, expect, it } from 'vitest';
import { ActorHost, createLocalIntegrationPort, integrationActorHandlers, type IntegrationServices, type UpdateSessionCall } from '../../services/actors/index.js';

// The session actors keep the session they committed while it is open, and forget it once it
// ended: the cache holds sessions in progress, not every session of the last hours (a large cache
// is live heap that every major garbage collection marks).

const app = { applicationId: 7, accountId: 1 } as UpdateSessionCall['app'];
const call = (id: string): UpdateSessionCall => ({ app, customerSessionId: id, request: { customerSession: {} }, dry: false });

/** Session services whose commits end in the states given, one per call, recording what each call was handed. */
function harness(states: string[]) {
  const seen: Array<unknown> = [];
  let n = 0;
  const next = (cached: unknown) => {
    seen.push(cached);
    const state = states[n++]!;
    return Promise.resolve({ committed: { state, n, profileId: '' }, state: { effects: [] } });
  };
  const sessions = { update: (_c: unknown, cached: unknown) => next(cached), returns: (_c: unknown, cached: unknown) => next(cached), reopen: (_c: unknown, cached: unknown) => next(cached) };
  const host = new ActorHost();
  const port = createLocalIntegrationPort({
    host,
    handlers: integrationActorHandlers({ sessions } as unknown as IntegrationServices),
    nodeId: 'n1',
    shardOf: () => 0,
  });
  return { host, port, seen };
}

describe('session actor cache', () => {
  it('keeps an open session for its next call and forgets it when it closes', async () => {
    const { host, port, seen } = harness(['open', 'open', 'closed', 'cancelled']);
    await port.invoke('updateSession', call('s1'));
    expect(host.cachedCount).toBe(1);
    await port.invoke('updateSession', call('s1'));
    // The second call was handed the session the first committed.
    expect(seen[1]).toMatchObject({ state: 'open', n: 1 });
    await port.invoke('updateSession', call('s1'));
    expect(seen[2]).toMatchObject({ state: 'open', n: 2 });
    expect(host.cachedCount).toBe(0);
    // A call after the close reads the session again (nothing cached is handed over).
    await port.invoke('updateSession', call('s1'));
    expect(seen[3]).toBeUndefined();
    expect(host.cachedCount).toBe(0);
  });

  it('forgets a returned session and keeps a reopened one', async () => {
    const { host, port, seen } = harness(['open', 'partially_returned', 'open']);
    await port.invoke('updateSession', call('s2'));
    expect(host.cachedCount).toBe(1);
    await port.invoke('returnSession', { ...call('s2') } as never);
    expect(host.cachedCount).toBe(0);
    await port.invoke('reopenSession', { ...call('s2') } as never);
    expect(seen[2]).toBeUndefined();
    expect(host.cachedCount).toBe(1);
  });
});
