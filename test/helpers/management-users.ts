// Users and accounts for Management API access tests: a second account with its own admin, and
// non-admin users whose policy names Applications ('read' or 'write'), made directly in SQL.
import { createManagementClient, login, type ManagementClient } from '../../sdk/index.js';
import { hashPassword } from '../../services/management/passwords.js';
import type { Db } from '../../services/store/index.js';
import { ADMIN_EMAIL, type TestNode } from './node.js';

export type ErrorLike = { StatusCode: number; message: string; errors: Array<{ title?: string; source?: { pointer?: string } }> } | undefined;
export const pointers = (e: ErrorLike): Array<string | undefined> => (e?.errors ?? []).map((x) => x.source?.pointer);

export async function adminAccountId(db: Db): Promise<number> {
  const [u] = await db.query<{ account_id: number }>(`SELECT account_id FROM users WHERE lower(email) = lower($1)`, [ADMIN_EMAIL]);
  return u!.account_id;
}

/** A user of the account with the given policy, logged in. */
export async function userWithPolicy(db: Db, baseUrl: string, accountId: number, email: string, policy: Record<string, unknown>): Promise<ManagementClient> {
  await db.query(`INSERT INTO users (account_id, email, name, password_hash, policy) VALUES ($1, $2, $2, $3, $4::jsonb)`, [
    accountId,
    email,
    await hashPassword('user-password'),
    JSON.stringify(policy),
  ]);
  return (await login({ baseUrl, email, password: 'user-password', retries: 0 })).client;
}

/** A new account with its own admin, logged in. */
export async function otherAccount(db: Db, baseUrl: string, email: string): Promise<{ accountId: number; client: ManagementClient }> {
  const [account] = await db.query<{ id: number }>(`INSERT INTO accounts (company_name) VALUES ($1) RETURNING id`, [email]);
  const client = await userWithPolicy(db, baseUrl, account!.id, email, { role: 'admin' });
  return { accountId: account!.id, client };
}

export const anonymousClient = (baseUrl: string): ManagementClient => createManagementClient({ baseUrl, retries: 0 });

let counter = 0;

async function makeUser(t: TestNode, accountId: number, policy: Record<string, unknown>): Promise<ManagementClient> {
  const email = `user-${process.pid}-${++counter}-${Math.random().toString(36).slice(2, 8)}@test.local`;
  return userWithPolicy(t.node.db, t.url, accountId, email, policy);
}

/** A user of the test admin's account with a generated e-mail, e.g. `{ applications: { "3": "read" } }`. */
export async function policyUser(t: TestNode, policy: Record<string, unknown>): Promise<ManagementClient> {
  return makeUser(t, await adminAccountId(t.node.db), policy);
}

/** The admin of a new, second account: it must never see the first account's data. */
export async function otherAccountAdmin(t: TestNode): Promise<ManagementClient> {
  const [account] = await t.node.db.query<{ id: number }>(`INSERT INTO accounts (company_name) VALUES ('Other') RETURNING id`);
  return makeUser(t, account!.id, { role: 'admin' });
}
