// Where the real services of integration tests live, and what happens when one is missing:
// under CI=true a missing service fails the run; elsewhere the test file is skipped with a reason.
import net from 'node:net';

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const TEST_NATS_URL = process.env.TEST_NATS_URL ?? 'nats://127.0.0.1:4222';
export const inCI = process.env.CI === 'true';

function reachable(url: string, defaultPort: number): Promise<boolean> {
  const u = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect({ host: u.hostname, port: Number(u.port || defaultPort) });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(2000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/**
 * Resolves true when the service is there. When it is not: throws under CI (the run must fail
 * loudly), returns false elsewhere so the caller can skip.
 */
export async function serviceAvailable(name: 'postgres' | 'nats'): Promise<boolean> {
  const ok = name === 'postgres' ? await reachable(TEST_DATABASE_URL, 5432) : await reachable(TEST_NATS_URL, 4222);
  if (!ok && inCI) throw new Error(`${name} is required under CI=true but is not reachable`);
  if (!ok) console.warn(`[test] ${name} not reachable: skipping tests that need it`);
  return ok;
}

export const postgresUp = await serviceAvailable('postgres');
export const natsUp = await serviceAvailable('nats');

/** A unique, valid schema or bucket suffix for one test file or test. */
export const uniqueName = (prefix: string): string =>
  `${prefix}_${process.pid}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
