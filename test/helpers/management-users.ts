// Users for Management API access tests, made straight in the database (the users API is another
// issue): a user of the admin's account with a given policy, and the admin of a second account.
import { login, type ManagementClient } from '../../sdk/index.js';
import { hashPassword } from '../../services/management/passwords.js';
import { ADMIN_EMAIL, type TestNode } from './node.js';

let counter = 0;

async function makeUser(t: TestNode, accountId: number, policy: Record<string, unknown>): Promise<ManagementClient> {
  const email = `user-${process.pid}-${++counter}-${Math.random().toString(36).slice(2, 8)}@test.local`;
  const password = 'user-password-123';
  await t.node.db.query(`INSERT INTO users (account_id, email, name, password_hash, policy) VALUES ($1, $2, 'User', $3, $4::jsonb)`, [
    accountId,
    email,
    await hashPassword(password),
    JSON.stringify(policy),
  ]);
  return (await login({ baseUrl: t.url, email, password, retries: 0 })).client;
}

/** A user of the test admin's account, e.g. `{ applications: { "3": "read" } }`. */
export async function userWithPolicy(t: TestNode, policy: Record<string, unknown>): Promise<ManagementClient> {
  const [admin] = await t.node.db.query<{ account_id: number }>(`SELECT account_id FROM users WHERE lower(email) = lower($1)`, [ADMIN_EMAIL]);
  return makeUser(t, admin!.account_id, policy);
}

/** The admin of a new, second account: it must never see the first account's data. */
export async function otherAccountAdmin(t: TestNode): Promise<ManagementClient> {
  const [account] = await t.node.db.query<{ id: number }>(`INSERT INTO accounts (company_name) VALUES ('Other') RETURNING id`);
  return makeUser(t, account!.id, { role: 'admin' });
}
