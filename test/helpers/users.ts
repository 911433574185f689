// Users for Management API tests: another account with its own admin, users of a given policy
// inserted directly (fast, for tests that are not about invites), and tokens read out of mails.
import { login, type ManagementClient } from '../../sdk/index.js';
import { hashPassword } from '../../services/management/passwords.js';
import type { Db } from '../../services/store/index.js';

export interface TestUser {
  id: number;
  email: string;
  password: string;
  client: ManagementClient;
  token: string;
}

/** A user of the account, logged in. */
export async function addUser(
  db: Db,
  baseUrl: string,
  accountId: number,
  email: string,
  policy: Record<string, unknown>,
  password = `pw-${email}-secret`,
): Promise<TestUser> {
  const [row] = await db.query<{ id: number }>(
    `INSERT INTO users (account_id, email, name, password_hash, policy, state) VALUES ($1, $2, $3, $4, $5::jsonb, 'active') RETURNING id`,
    [accountId, email, email.split('@')[0], await hashPassword(password), JSON.stringify(policy)],
  );
  const { client, token } = await login({ baseUrl, email, password, retries: 0 });
  return { id: row!.id, email, password, client, token };
}

/** A second account with its own admin: it must never see the first account's data. */
export async function otherAccount(db: Db, baseUrl: string, email = 'other@test.local'): Promise<TestUser & { accountId: number }> {
  const [account] = await db.query<{ id: number }>(`INSERT INTO accounts (company_name) VALUES ('Other') RETURNING id`);
  return { ...(await addUser(db, baseUrl, account!.id, email, { role: 'admin' })), accountId: account!.id };
}

/** The token on a line of its own in a mail body (43 characters of URL-safe base64). */
export function tokenIn(body: string): string {
  const m = /^([A-Za-z0-9_-]{43})\r?$/m.exec(body);
  if (!m) throw new Error('no token in the mail');
  return m[1]!;
}

type Err = { StatusCode: number; errors: Array<{ source?: { pointer?: string } }> } | undefined;
export const pointers = (e: unknown): Array<string | undefined> => ((e as Err)?.errors ?? []).map((x) => x.source?.pointer);

/** Waits until cond() holds (mails go out asynchronously). */
export async function eventually<T>(fn: () => T | undefined | Promise<T | undefined>, timeoutMs = 5000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}
