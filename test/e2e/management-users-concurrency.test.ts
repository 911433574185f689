import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManagementClient, unwrap, type ManagementClient } from '../../sdk/index.js';
import { postgresUp } from '../helpers/services.js';
import { ADMIN_EMAIL, startTestNode, type TestNode } from '../helpers/node.js';
import { addUser, eventually } from '../helpers/users.js';
import type { OutgoingMail } from '../../services/notify/index.js';

const count = (statuses: number[], status: number) => statuses.filter((s) => s === status).length;

// Real parallel requests against real Postgres: the limits and single-use tokens must hold when
// requests race, not only one after another.
describe.skipIf(!postgresUp)('Management API users under concurrency', () => {
  let t: TestNode;
  let accountId: number;
  let anonymous: ManagementClient;
  const mails: OutgoingMail[] = [];

  beforeAll(async () => {
    t = await startTestNode('postgres', { mailPollMs: 50, mailTransport: { send: async (m) => void mails.push(m) } });
    const [me] = await t.node.db.query<{ account_id: number }>(`SELECT account_id FROM users WHERE email = $1`, [ADMIN_EMAIL]);
    accountId = me!.account_id;
    anonymous = createManagementClient({ baseUrl: t.url, retries: 0 });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('lets exactly 5 of 12 parallel wrong logins fail with 401; the rest are 429', async () => {
    const u = await addUser(t.node.db, t.url, accountId, 'race-login@test.local', { applications: {} });
    const started = Date.now();
    const statuses = await Promise.all(
      Array.from({ length: 12 }, (_, i) => anonymous.POST('/v1/sessions', { body: { email: u.email, password: `guess-${i}` } }).then((r) => r.response.status)),
    );
    console.log(`[users] 12 parallel logins answered in ${Date.now() - started} ms`);
    expect(count(statuses, 401)).toBe(5);
    expect(count(statuses, 429)).toBe(7);
    expect((await anonymous.POST('/v1/sessions', { body: { email: u.email, password: u.password } })).response.status).toBe(429);
  });

  it('queues at most 5 reset mails for a user when 12 recovery requests race', async () => {
    const u = await addUser(t.node.db, t.url, accountId, 'race-recovery@test.local', { applications: {} });
    const statuses = await Promise.all(
      Array.from({ length: 12 }, () => anonymous.POST('/v1/password_recovery_emails', { body: { email: u.email } }).then((r) => r.response.status)),
    );
    expect(statuses).toEqual(Array.from({ length: 12 }, () => 204));
    const [queued] = await t.node.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM mail_outbox WHERE recipient = $1`, [u.email]);
    expect(queued!.n).toBe(5);
  });

  it('accepts an invite token once when several accepts race', async () => {
    const invited = unwrap(await t.admin.POST('/v1/invites', { body: { email: 'race-invite@test.local', acl: { applications: {} } } }));
    const statuses = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        anonymous
          .POST('/v1/accept_invite', { body: { email: `race-${i}@test.local`, inviteToken: invited.inviteToken!, password: `race-password-${i}` } })
          .then((r) => r.response.status),
      ),
    );
    expect(count(statuses, 201)).toBe(1);
    expect(count(statuses, 401)).toBe(5);
    const rows = await t.node.db.query<{ email: string; state: string }>(`SELECT email, state FROM users WHERE id = $1`, [invited.id]);
    expect(rows).toEqual([{ email: `race-${statuses.indexOf(201)}@test.local`, state: 'active' }]);
    const [tokens] = await t.node.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM management_tokens WHERE user_id = $1`, [invited.id]);
    expect(tokens!.n).toBe(1);
  });

  it('invites one user when parallel invites name the same e-mail', async () => {
    const statuses = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        t.admin.POST('/v1/invites', { body: { email: i % 2 ? 'Same@test.local' : 'same@test.local', acl: { role: 'admin' } } }).then((r) => r.response.status),
      ),
    );
    expect(count(statuses, 201)).toBe(1);
    expect(count(statuses, 409)).toBe(5);
    const [n] = await t.node.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM users WHERE lower(email) = 'same@test.local'`);
    expect(n!.n).toBe(1);
    const [queued] = await t.node.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM mail_outbox WHERE lower(recipient) = 'same@test.local'`);
    expect(queued!.n).toBe(1);
  });

  it('resets a password once when several resets with one token race', async () => {
    const u = await addUser(t.node.db, t.url, accountId, 'race-reset@test.local', { applications: {} });
    await anonymous.POST('/v1/password_recovery_emails', { body: { email: u.email } });
    const mail = await eventually(() => mails.find((m) => m.to === u.email));
    const resetToken = /^([A-Za-z0-9_-]{43})$/m.exec(mail.text)![1]!;
    const statuses = await Promise.all(
      Array.from({ length: 6 }, (_, i) => anonymous.POST('/v1/reset_password', { body: { resetToken, password: `reset-password-${i}` } }).then((r) => r.response.status)),
    );
    expect(count(statuses, 204)).toBe(1);
    expect(count(statuses, 401)).toBe(5);
    const winner = `reset-password-${statuses.indexOf(204)}`;
    expect((await anonymous.POST('/v1/sessions', { body: { email: u.email, password: winner } })).response.status).toBe(201);
  });

  it('keeps an active admin when two admins demote each other at the same time', async () => {
    const [account] = await t.node.db.query<{ id: number }>(`INSERT INTO accounts (company_name) VALUES ('Duo') RETURNING id`);
    const a = await addUser(t.node.db, t.url, account!.id, 'duo-a@test.local', { role: 'admin' });
    const b = await addUser(t.node.db, t.url, account!.id, 'duo-b@test.local', { role: 'admin' });
    const demote = { policy: { applications: {} } };
    const [ra, rb] = await Promise.all([
      a.client.PUT('/v1/users/{userId}', { params: { path: { userId: b.id } }, body: demote }),
      b.client.PUT('/v1/users/{userId}', { params: { path: { userId: a.id } }, body: demote }),
    ]);
    // The loser is refused as the last admin (400) or, when it authenticated after the winner's
    // commit, as a non-admin (403).
    const statuses = [ra.response.status, rb.response.status];
    expect(count(statuses, 200)).toBe(1);
    expect(statuses.filter((s) => s !== 200)[0]).toBeOneOf([400, 403]);
    const admins = await t.node.db.query(`SELECT id FROM users WHERE account_id = $1 AND state = 'active' AND policy->>'role' = 'admin'`, [account!.id]);
    expect(admins).toHaveLength(1);
  });
});
