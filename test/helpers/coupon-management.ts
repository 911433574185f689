// Callers for the coupon and referral Management tests: another account's admin, a user of this
// account limited by policy, and nobody (no token).
import { createManagementClient, login, type ManagementClient } from '../../sdk/index.js';
import { hashPassword } from '../../services/management/passwords.js';
import { uniqueName } from './services.js';
import { ADMIN_EMAIL, type TestNode } from './node.js';

export type Err = { StatusCode: number; message: string; errors: Array<{ source?: { pointer?: string } }> } | undefined;
export const pointers = (e: Err) => (e?.errors ?? []).map((x) => x.source?.pointer);

/** The admin of a second account: must never see or change the first account's data. */
export async function strangerAdmin(t: TestNode): Promise<ManagementClient> {
  const email = `${uniqueName('other')}@test.local`;
  const [account] = await t.node.db.query<{ id: number }>(`INSERT INTO accounts (company_name) VALUES ('Other') RETURNING id`);
  await t.node.db.query(`INSERT INTO users (account_id, email, name, password_hash, policy) VALUES ($1, $2, 'Other', $3, '{"role":"admin"}'::jsonb)`, [
    account!.id,
    email,
    await hashPassword('other-password'),
  ]);
  return (await login({ baseUrl: t.url, email, password: 'other-password', retries: 0 })).client;
}

/** A non-admin user of the first account with the given per-Application scopes. */
export async function userWithScopes(t: TestNode, applications: Record<string, 'read' | 'write'>): Promise<ManagementClient> {
  const email = `${uniqueName('user')}@test.local`;
  await t.node.db.query(
    `INSERT INTO users (account_id, email, name, password_hash, policy)
     SELECT account_id, $1, 'Scoped', $2, $3::jsonb FROM users WHERE email = $4`,
    [email, await hashPassword('scoped-password'), JSON.stringify({ applications }), ADMIN_EMAIL],
  );
  return (await login({ baseUrl: t.url, email, password: 'scoped-password', retries: 0 })).client;
}

export const anonymousClient = (t: TestNode): ManagementClient => createManagementClient({ baseUrl: t.url, retries: 0 });
