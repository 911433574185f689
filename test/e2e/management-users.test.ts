import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManagementClient, login, unwrap, type ManagementClient } from '../../sdk/index.js';
import { createLogger } from '../../services/shared/index.js';
import { newApplication } from '../helpers/fixtures.js';
import { startFakeSmtp, type FakeSmtp } from '../helpers/fake-smtp.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, startTestNode, TestClock, type TestNode } from '../helpers/node.js';
import { addUser, eventually, otherAccount, pointers, tokenIn, type TestUser } from '../helpers/users.js';

const DAY = 24 * 3600 * 1000;

// One node whose mails go through the real SMTP client to a fake SMTP server, with a clock the
// tests move and a logger whose every line (debug included) is kept to look for secrets.
describe('Management API: users, invites, password recovery', () => {
  let t: TestNode;
  let smtp: FakeSmtp;
  const clock = new TestClock();
  const logLines: string[] = [];
  /** Every password and token these tests used: none may be logged. */
  const secrets: string[] = [ADMIN_PASSWORD];
  let accountId: number;
  let appId: number;
  let strangerAppId: number;
  let stranger: TestUser & { accountId: number };
  let anonymous: ManagementClient;

  const mailsTo = (email: string) => smtp.messages.filter((m) => m.to.includes(email));
  const nextMailTo = (email: string, after: number) => eventually(() => mailsTo(email)[after]);
  const invite = async (email: string, acl: unknown = { applications: { [appId]: 'read' } }) => {
    const r = await t.admin.POST('/v1/invites', { body: { email, acl, name: email.split('@')[0] } as never });
    const user = unwrap(r);
    secrets.push(user.inviteToken!);
    return user;
  };
  const accept = async (email: string, inviteToken: string, password: string) => {
    secrets.push(password);
    return anonymous.POST('/v1/accept_invite', { body: { email, inviteToken, password, name: 'Accepted' } });
  };
  const user = async (email: string, policy: Record<string, unknown>) => {
    const u = await addUser(t.node.db, t.url, accountId, email, policy);
    secrets.push(u.password, u.token);
    return u;
  };

  beforeAll(async () => {
    smtp = await startFakeSmtp();
    t = await startTestNode('pglite', {
      clock,
      // Long enough that moving the clock past invite and reset expiries keeps the tests' sessions.
      tokenTtlMs: 365 * DAY,
      smtpUrl: smtp.url(),
      mailFrom: 'perkline@test.local',
      mailPollMs: 50,
      logLevel: 'debug',
      logger: createLogger({ level: 'debug', write: (l) => logLines.push(l) }),
    });
    secrets.push(t.adminToken);
    const [me] = await t.node.db.query<{ account_id: number }>(`SELECT account_id FROM users WHERE email = $1`, [ADMIN_EMAIL]);
    accountId = me!.account_id;
    appId = unwrap(await t.admin.POST('/v1/applications', { body: newApplication({ name: 'Users app' }) as never })).id;
    stranger = await otherAccount(t.node.db, t.url);
    secrets.push(stranger.password, stranger.token);
    strangerAppId = unwrap(await stranger.client.POST('/v1/applications', { body: newApplication({ name: 'Theirs' }) as never })).id;
    anonymous = createManagementClient({ baseUrl: t.url, retries: 0 });
  });
  afterAll(async () => {
    await t?.stop();
    await smtp?.close();
  });

  describe('invites', () => {
    it('invites a user by mail; the invitee accepts with another e-mail and is logged in', async () => {
      const invited = await invite('bob@test.local');
      expect(invited).toMatchObject({ email: 'bob@test.local', name: 'bob', state: 'invited', accountId, policy: { applications: { [appId]: 'read' } } });
      expect(invited.inviteToken).toMatch(/^[A-Za-z0-9_-]{43}$/);
      const mail = await nextMailTo('bob@test.local', 0);
      expect(mail.from).toBe('perkline@test.local');
      expect(mail.subject).toBe('You are invited to Perkline');
      expect(tokenIn(mail.body)).toBe(invited.inviteToken);

      const accepted = await accept('robert@test.local', invited.inviteToken!, 'robert-password-1');
      expect(accepted.response.status).toBe(201);
      expect(accepted.data).toMatchObject({ userId: invited.id, token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/), created: expect.any(String) });
      secrets.push(accepted.data!.token);
      const robert = createManagementClient({ baseUrl: t.url, token: accepted.data!.token, retries: 0 });
      expect(unwrap(await robert.GET('/v1/users/{userId}', { params: { path: { userId: invited.id } } }))).toMatchObject({ email: 'robert@test.local', name: 'Accepted', state: 'active' });
      // The policy of the invite applies: the named Application is readable.
      expect((await robert.GET('/v1/applications/{applicationId}', { params: { path: { applicationId: appId } } })).response.status).toBe(200);
      expect((await login({ baseUrl: t.url, email: 'robert@test.local', password: 'robert-password-1', retries: 0 })).userId).toBe(invited.id);
      const old = await anonymous.POST('/v1/sessions', { body: { email: 'bob@test.local', password: 'robert-password-1' } });
      expect(old.response.status).toBe(401);

      // Never again is the invite token or a password hash shown.
      const seen = unwrap(await t.admin.GET('/v1/users/{userId}', { params: { path: { userId: invited.id } } }));
      expect(Object.keys(seen).sort()).toEqual(['accountId', 'created', 'email', 'id', 'lastActivity', 'modified', 'name', 'policy', 'releaseUpdate', 'state']);
    });

    it('refuses a used invite token, and one older than 7 days', async () => {
      const a = await invite('once@test.local');
      expect((await accept('once@test.local', a.inviteToken!, 'once-password-1')).response.status).toBe(201);
      const again = await accept('twice@test.local', a.inviteToken!, 'twice-password-1');
      expect(again.response.status).toBe(401);
      expect(pointers(again.error)).toEqual(['/inviteToken']);

      const b = await invite('late@test.local');
      clock.advance(7 * DAY + 60_000);
      const late = await accept('late@test.local', b.inviteToken!, 'late-password-1');
      expect(late.response.status).toBe(401);
      expect(pointers(late.error)).toEqual(['/inviteToken']);
      const [row] = await t.node.db.query<{ state: string }>(`SELECT state FROM users WHERE id = $1`, [b.id]);
      expect(row!.state).toBe('invited');
      const unknown = await accept('x@test.local', 'A'.repeat(43), 'unknown-password-1');
      expect(unknown.response.status).toBe(401);
    });

    it('refuses bad invites with pointers, and an e-mail already used with a 409', async () => {
      const cases: Array<[unknown, string]> = [
        [{ acl: { role: 'admin' } }, '/email'],
        [{ email: 'not-an-email', acl: { role: 'admin' } }, '/email'],
        [{ email: 'c1@test.local' }, '/acl'],
        [{ email: 'c2@test.local', acl: { role: 'owner' } }, '/acl/role'],
        [{ email: 'c3@test.local', acl: { applications: { [appId]: 'admin' } } }, `/acl/applications/${appId}`],
        [{ email: 'c4@test.local', acl: '{not json' }, '/acl'],
        [{ email: 'c5@test.local', acl: { applications: { [strangerAppId]: 'read' } } }, `/acl/applications/${strangerAppId}`],
        [{ email: 'c6@test.local', acl: JSON.stringify({ applications: { '999999': 'write' } }) }, '/acl/applications/999999'],
      ];
      for (const [body, pointer] of cases) {
        const r = await t.admin.POST('/v1/invites', { body: body as never });
        expect(r.response.status, JSON.stringify(body)).toBe(400);
        expect(r.error?.StatusCode).toBe(400);
        expect(pointers(r.error), JSON.stringify(body)).toContain(pointer);
      }
      const taken = await t.admin.POST('/v1/invites', { body: { email: ADMIN_EMAIL.toUpperCase(), acl: { role: 'admin' } } });
      expect(taken.response.status).toBe(409);
      expect(pointers(taken.error)).toEqual(['/email']);
      const [n] = await t.node.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM users WHERE email LIKE 'c_@test.local'`);
      expect(n!.n).toBe(0);
      // The hosted API's clients send the policy as a JSON string: accepted.
      const asString = unwrap(await t.admin.POST('/v1/invites', { body: { email: 'str@test.local', acl: JSON.stringify({ applications: { [appId]: 'write' } }) } }));
      expect(asString.policy).toEqual({ applications: { [appId]: 'write' } });
    });

    it('refuses bad accepts with pointers; an e-mail in use is a 409 that leaves the token usable', async () => {
      const a = await invite('dave@test.local');
      const short = await anonymous.POST('/v1/accept_invite', { body: { email: 'dave@test.local', inviteToken: a.inviteToken!, password: 'short' } });
      expect(short.response.status).toBe(400);
      expect(pointers(short.error)).toEqual(['/password']);
      const noToken = await anonymous.POST('/v1/accept_invite', { body: { email: 'dave@test.local', password: 'long-enough-1' } as never });
      expect(pointers(noToken.error)).toEqual(['/inviteToken']);
      const taken = await accept(ADMIN_EMAIL, a.inviteToken!, 'dave-password-1');
      expect(taken.response.status).toBe(409);
      expect(pointers(taken.error)).toEqual(['/email']);
      expect((await accept('dave@test.local', a.inviteToken!, 'dave-password-1')).response.status).toBe(201);
    });

    it('lets only admins invite, and only with a token', async () => {
      const reader = await user('reader-inv@test.local', { applications: { [appId]: 'write' } });
      const r = await reader.client.POST('/v1/invites', { body: { email: 'nope@test.local', acl: { role: 'admin' } } });
      expect(r.response.status).toBe(403);
      const anon = await anonymous.POST('/v1/invites', { body: { email: 'nope@test.local', acl: { role: 'admin' } } });
      expect(anon.response.status).toBe(401);
      expect(pointers(anon.error)).toEqual(['/headers/authorization']);
      const [n] = await t.node.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM users WHERE email = 'nope@test.local'`);
      expect(n!.n).toBe(0);
    });

    it('resends the invite mail with the same token, for the inviting account only', async () => {
      const a = await invite('erin@test.local');
      await nextMailTo('erin@test.local', 0);
      const r = await t.admin.POST('/v1/invite_emails', { body: { email: 'erin@test.local', token: a.inviteToken! } });
      expect(r.response.status).toBe(201);
      expect(r.data).toMatchObject({ id: a.id, state: 'invited' });
      expect(tokenIn((await nextMailTo('erin@test.local', 1)).body)).toBe(a.inviteToken);

      const wrongToken = await t.admin.POST('/v1/invite_emails', { body: { email: 'erin@test.local', token: 'B'.repeat(43) } });
      expect(wrongToken.response.status).toBe(400);
      expect(pointers(wrongToken.error)).toEqual(['/token']);
      const unknown = await t.admin.POST('/v1/invite_emails', { body: { email: 'nobody@test.local', token: a.inviteToken! } });
      expect(unknown.response.status).toBe(404);
      expect(pointers(unknown.error)).toEqual(['/email']);
      const missing = await t.admin.POST('/v1/invite_emails', { body: { email: 'erin@test.local' } as never });
      expect(missing.response.status).toBe(400);
      expect(pointers(missing.error)).toEqual(['/token']);
      const theirs = await stranger.client.POST('/v1/invite_emails', { body: { email: 'erin@test.local', token: a.inviteToken! } });
      expect(theirs.response.status).toBe(404);
      expect(JSON.stringify(theirs.error)).not.toContain(String(a.id));
      const anon = await anonymous.POST('/v1/invite_emails', { body: { email: 'erin@test.local', token: a.inviteToken! } });
      expect(anon.response.status).toBe(401);
      await new Promise((r) => setTimeout(r, 200));
      expect(mailsTo('erin@test.local')).toHaveLength(2);
    });
  });

  describe('users', () => {
    let reader: TestUser;
    let writer: TestUser;
    beforeAll(async () => {
      reader = await user('reader@test.local', { applications: { [appId]: 'read' } });
      writer = await user('writer@test.local', { applications: { [appId]: 'write' } });
    });

    it('lists the account to admins and only oneself to other users, with paging and sort', async () => {
      const all = unwrap(await t.admin.GET('/v1/users', { params: { query: { sort: 'email' } } }));
      const [count] = await t.node.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM users WHERE account_id = $1`, [accountId]);
      expect(all.totalResultSize).toBe(count!.n);
      const emails = all.data.map((u) => u.email);
      const descending = unwrap(await t.admin.GET('/v1/users', { params: { query: { sort: '-email' } } })).data.map((u) => u.email);
      expect(descending).toEqual([...emails].reverse());
      expect(emails[0]! < emails[emails.length - 1]!).toBe(true);
      expect(emails).toContain('reader@test.local');
      expect(emails).not.toContain(stranger.email);
      const page = unwrap(await t.admin.GET('/v1/users', { params: { query: { sort: '-id', pageSize: 2, skip: 1 } } }));
      expect(page.data.map((u) => u.id)).toEqual([...all.data.map((u) => u.id)].sort((a, b) => b - a).slice(1, 3));
      const mine = unwrap(await reader.client.GET('/v1/users'));
      expect(mine).toEqual({ totalResultSize: 1, data: [expect.objectContaining({ id: reader.id, email: 'reader@test.local' })] });
      const theirs = unwrap(await stranger.client.GET('/v1/users'));
      expect(theirs.data.map((u) => u.email)).toEqual([stranger.email]);
    });

    it('refuses bad list input and calls without a token', async () => {
      const badSort = await t.admin.GET('/v1/users', { params: { query: { sort: 'passwordHash' } } });
      expect(badSort.response.status).toBe(400);
      expect(pointers(badSort.error)).toEqual(['/query/sort']);
      const badPage = await t.admin.GET('/v1/users', { params: { query: { pageSize: 1001 } } });
      expect(pointers(badPage.error)).toEqual(['/query/pageSize']);
      expect((await anonymous.GET('/v1/users')).response.status).toBe(401);
      expect((await anonymous.GET('/v1/users/{userId}', { params: { path: { userId: reader.id } } })).response.status).toBe(401);
      expect((await anonymous.PUT('/v1/users/{userId}', { params: { path: { userId: reader.id } }, body: { name: 'x' } })).response.status).toBe(401);
    });

    it('shows a user to admins and to itself; others get a 404 that reveals nothing', async () => {
      const byAdmin = unwrap(await t.admin.GET('/v1/users/{userId}', { params: { path: { userId: reader.id } } }));
      expect(byAdmin).toMatchObject({ id: reader.id, accountId, email: 'reader@test.local', policy: { applications: { [appId]: 'read' } }, state: 'active', releaseUpdate: false });
      expect(unwrap(await reader.client.GET('/v1/users/{userId}', { params: { path: { userId: reader.id } } }))).toEqual(byAdmin);
      const other = await reader.client.GET('/v1/users/{userId}', { params: { path: { userId: writer.id } } });
      const missing = await reader.client.GET('/v1/users/{userId}', { params: { path: { userId: 987654 } } });
      expect(other.response.status).toBe(404);
      expect(other.error).toEqual(missing.error);
      const cross = await stranger.client.GET('/v1/users/{userId}', { params: { path: { userId: reader.id } } });
      expect(cross.response.status).toBe(404);
      expect(JSON.stringify(cross.error)).not.toContain('reader@');
      const bad = await fetch(`${t.url}/v1/users/abc`, { headers: { Authorization: `Bearer ${t.adminToken}` } });
      expect(bad.status).toBe(400);
      expect(pointers(await bad.json())).toEqual(['/path/userId']);
    });

    it('lets a user update its own name and releaseUpdate, but not its policy or state or other users', async () => {
      const r = unwrap(await reader.client.PUT('/v1/users/{userId}', { params: { path: { userId: reader.id } }, body: { name: 'Rita', releaseUpdate: true } }));
      expect(r).toMatchObject({ id: reader.id, name: 'Rita', releaseUpdate: true, email: 'reader@test.local', policy: { applications: { [appId]: 'read' } } });
      const policy = await reader.client.PUT('/v1/users/{userId}', { params: { path: { userId: reader.id } }, body: { policy: { role: 'admin' } } });
      expect(policy.response.status).toBe(403);
      expect(pointers(policy.error)).toEqual(['/policy']);
      const state = await reader.client.PUT('/v1/users/{userId}', { params: { path: { userId: reader.id } }, body: { state: 'disabled' } });
      expect(state.response.status).toBe(403);
      expect(pointers(state.error)).toEqual(['/state']);
      const other = await reader.client.PUT('/v1/users/{userId}', { params: { path: { userId: writer.id } }, body: { name: 'Hacked' } });
      expect(other.response.status).toBe(404);
      const cross = await stranger.client.PUT('/v1/users/{userId}', { params: { path: { userId: writer.id } }, body: { name: 'Hacked' } });
      expect(cross.response.status).toBe(404);
      expect(unwrap(await t.admin.GET('/v1/users/{userId}', { params: { path: { userId: writer.id } } })).name).toBe('writer');
      const [row] = await t.node.db.query<{ policy: unknown }>(`SELECT policy FROM users WHERE id = $1`, [reader.id]);
      expect(row!.policy).toEqual({ applications: { [appId]: 'read' } });
    });

    it("lets an admin change a user's policy, which takes effect at once", async () => {
      const app2 = unwrap(await t.admin.POST('/v1/applications', { body: newApplication({ name: 'Second' }) as never })).id;
      const path = { params: { path: { applicationId: app2 } } };
      expect((await writer.client.GET('/v1/applications/{applicationId}', path)).response.status).toBe(404);
      const u = unwrap(await t.admin.PUT('/v1/users/{userId}', { params: { path: { userId: writer.id } }, body: { policy: { applications: { [appId]: 'write', [app2]: 'read' } } } }));
      expect(u.policy).toEqual({ applications: { [appId]: 'write', [app2]: 'read' } });
      expect(unwrap(await writer.client.GET('/v1/applications/{applicationId}', path)).name).toBe('Second');
    });

    it('refuses bad updates with pointers', async () => {
      const at = { params: { path: { userId: writer.id } } };
      const cases: Array<[unknown, string]> = [
        [{ email: 'nope' }, '/email'],
        [{ name: '' }, '/name'],
        [{ releaseUpdate: 'yes' }, '/releaseUpdate'],
        [{ state: 'invited' }, '/state'],
        [{ passwordHash: 'x' }, '/passwordHash'],
        [{ policy: { role: 'root' } }, '/policy/role'],
        [{ policy: { applications: { [strangerAppId]: 'read' } } }, `/policy/applications/${strangerAppId}`],
      ];
      for (const [body, pointer] of cases) {
        const r = await t.admin.PUT('/v1/users/{userId}', { ...at, body: body as never });
        expect(r.response.status, JSON.stringify(body)).toBe(400);
        expect(pointers(r.error), JSON.stringify(body)).toContain(pointer);
      }
      const taken = await t.admin.PUT('/v1/users/{userId}', { ...at, body: { email: 'READER@test.local' } });
      expect(taken.response.status).toBe(409);
      expect(pointers(taken.error)).toEqual(['/email']);
      const invited = await invite('pending@test.local');
      const activate = await t.admin.PUT('/v1/users/{userId}', { params: { path: { userId: invited.id } }, body: { state: 'active' } });
      expect(activate.response.status).toBe(400);
      expect(pointers(activate.error)).toEqual(['/state']);
      expect(unwrap(await t.admin.GET('/v1/users/{userId}', at)).email).toBe('writer@test.local');
    });

    it('changes one\'s own password only with the current one, and signs out the other sessions', async () => {
      const u = await user('pat@test.local', { applications: { [appId]: 'read' } });
      const second = await login({ baseUrl: t.url, email: u.email, password: u.password, retries: 0 });
      secrets.push(second.token);
      const at = { params: { path: { userId: u.id } } };
      const missing = await u.client.PUT('/v1/users/{userId}', { ...at, body: { newPassword: 'pat-new-password' } });
      expect(missing.response.status).toBe(400);
      expect(pointers(missing.error)).toEqual(['/password']);
      const wrong = await u.client.PUT('/v1/users/{userId}', { ...at, body: { newPassword: 'pat-new-password', password: 'wrong-one' } });
      expect(wrong.response.status).toBe(401);
      expect(pointers(wrong.error)).toEqual(['/password']);
      const short = await u.client.PUT('/v1/users/{userId}', { ...at, body: { newPassword: 'short', password: u.password } });
      expect(pointers(short.error)).toEqual(['/newPassword']);
      const byAdmin = await t.admin.PUT('/v1/users/{userId}', { ...at, body: { newPassword: 'admin-chosen-1', password: ADMIN_PASSWORD } });
      expect(byAdmin.response.status).toBe(403);
      expect(pointers(byAdmin.error)).toEqual(['/newPassword']);

      secrets.push('pat-new-password');
      expect((await u.client.PUT('/v1/users/{userId}', { ...at, body: { newPassword: 'pat-new-password', password: u.password } })).response.status).toBe(200);
      expect((await u.client.GET('/v1/users')).response.status).toBe(200);
      expect((await second.client.GET('/v1/users')).response.status).toBe(401);
      expect((await anonymous.POST('/v1/sessions', { body: { email: u.email, password: u.password } })).response.status).toBe(401);
      expect((await login({ baseUrl: t.url, email: u.email, password: 'pat-new-password', retries: 0 })).userId).toBe(u.id);
    });

    it('lets an admin disable and re-enable a user, but never the last active admin', async () => {
      const u = await user('dis@test.local', { applications: {} });
      const at = { params: { path: { userId: u.id } } };
      expect(unwrap(await t.admin.PUT('/v1/users/{userId}', { ...at, body: { state: 'disabled' } })).state).toBe('disabled');
      expect((await u.client.GET('/v1/users')).response.status).toBe(401);
      expect((await anonymous.POST('/v1/sessions', { body: { email: u.email, password: u.password } })).response.status).toBe(401);
      expect(unwrap(await t.admin.PUT('/v1/users/{userId}', { ...at, body: { state: 'active' } })).state).toBe('active');
      expect((await login({ baseUrl: t.url, email: u.email, password: u.password, retries: 0 })).userId).toBe(u.id);

      const [me] = await t.node.db.query<{ id: number }>(`SELECT id FROM users WHERE email = $1`, [ADMIN_EMAIL]);
      const self = { params: { path: { userId: me!.id } } };
      const demote = await t.admin.PUT('/v1/users/{userId}', { ...self, body: { policy: { applications: {} } } });
      expect(demote.response.status).toBe(400);
      expect(pointers(demote.error)).toEqual(['/policy']);
      const disable = await t.admin.PUT('/v1/users/{userId}', { ...self, body: { state: 'disabled' } });
      expect(pointers(disable.error)).toEqual(['/state']);
      expect(unwrap(await t.admin.GET('/v1/users/{userId}', self))).toMatchObject({ policy: { role: 'admin' }, state: 'active' });
    });
  });

  describe('password recovery', () => {
    it('answers 204 for an unknown e-mail and sends nothing', async () => {
      const [before] = await t.node.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM mail_outbox`);
      const sent = smtp.messages.length;
      const r = await anonymous.POST('/v1/password_recovery_emails', { body: { email: 'nobody-here@test.local' } });
      expect(r.response.status).toBe(204);
      const [after] = await t.node.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM mail_outbox`);
      expect(after!.n).toBe(before!.n);
      await new Promise((res) => setTimeout(res, 200));
      expect(smtp.messages.length).toBe(sent);
    });

    it('mails a reset token; the reset sets the password, signs out every session and works once', async () => {
      const u = await user('rose@test.local', { applications: { [appId]: 'read' } });
      const other = await login({ baseUrl: t.url, email: u.email, password: u.password, retries: 0 });
      secrets.push(other.token);
      expect((await anonymous.POST('/v1/password_recovery_emails', { body: { email: 'ROSE@test.local' } })).response.status).toBe(204);
      const mail = await nextMailTo('rose@test.local', 0);
      expect(mail.subject).toBe('Reset your Perkline password');
      const resetToken = tokenIn(mail.body);
      secrets.push(resetToken, 'rose-new-password');
      expect((await anonymous.POST('/v1/reset_password', { body: { resetToken, password: 'rose-new-password' } })).response.status).toBe(204);
      expect((await u.client.GET('/v1/users')).response.status).toBe(401);
      expect((await other.client.GET('/v1/users')).response.status).toBe(401);
      expect((await anonymous.POST('/v1/sessions', { body: { email: u.email, password: u.password } })).response.status).toBe(401);
      expect((await login({ baseUrl: t.url, email: u.email, password: 'rose-new-password', retries: 0 })).userId).toBe(u.id);
      const reuse = await anonymous.POST('/v1/reset_password', { body: { resetToken, password: 'rose-third-password' } });
      expect(reuse.response.status).toBe(401);
      expect(pointers(reuse.error)).toEqual(['/resetToken']);
    });

    it('refuses a reset token older than an hour, and bad input with pointers', async () => {
      const u = await user('late-reset@test.local', { applications: {} });
      await anonymous.POST('/v1/password_recovery_emails', { body: { email: u.email } });
      const resetToken = tokenIn((await nextMailTo(u.email, 0)).body);
      secrets.push(resetToken);
      clock.advance(3600_000 + 1000);
      const late = await anonymous.POST('/v1/reset_password', { body: { resetToken, password: 'late-new-password' } });
      expect(late.response.status).toBe(401);
      expect(pointers(late.error)).toEqual(['/resetToken']);
      expect((await login({ baseUrl: t.url, email: u.email, password: u.password, retries: 0 })).userId).toBe(u.id);

      const short = await anonymous.POST('/v1/reset_password', { body: { resetToken, password: 'short' } });
      expect(short.response.status).toBe(400);
      expect(pointers(short.error)).toEqual(['/password']);
      const noToken = await anonymous.POST('/v1/reset_password', { body: { password: 'long-enough-1' } as never });
      expect(pointers(noToken.error)).toEqual(['/resetToken']);
      const badEmail = await anonymous.POST('/v1/password_recovery_emails', { body: { email: 'not an email' } });
      expect(badEmail.response.status).toBe(400);
      expect(pointers(badEmail.error)).toEqual(['/email']);
    });
  });

  describe('login throttling', () => {
    it('answers 429 after 5 failed logins for one e-mail within 15 minutes, even with the right password', async () => {
      const u = await user('throttle@test.local', { applications: {} });
      for (let i = 0; i < 5; i++) {
        expect((await anonymous.POST('/v1/sessions', { body: { email: u.email, password: `guess-${i}` } })).response.status).toBe(401);
      }
      const blocked = await anonymous.POST('/v1/sessions', { body: { email: 'Throttle@test.local', password: u.password } });
      expect(blocked.response.status).toBe(429);
      expect(pointers(blocked.error)).toEqual(['/email']);
      const retryAfter = Number(blocked.response.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThan(0);
      expect(retryAfter).toBeLessThanOrEqual(15 * 60);
      // Other e-mails are not affected.
      expect((await anonymous.POST('/v1/sessions', { body: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } })).response.status).toBe(201);
      clock.advance(15 * 60_000 + 1000);
      expect((await login({ baseUrl: t.url, email: u.email, password: u.password, retries: 0 })).userId).toBe(u.id);
    });

    it('throttles unknown e-mails alike, so a 429 does not tell which e-mails exist', async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) statuses.push((await anonymous.POST('/v1/sessions', { body: { email: 'ghost@test.local', password: `g${i}` } })).response.status);
      expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
    });

    it('counts a successful login as no failure', async () => {
      const u = await user('mixed@test.local', { applications: {} });
      for (let round = 0; round < 3; round++) {
        for (let i = 0; i < 2; i++) await anonymous.POST('/v1/sessions', { body: { email: u.email, password: 'bad' } });
        if (round < 2) expect((await anonymous.POST('/v1/sessions', { body: { email: u.email, password: u.password } })).response.status).toBe(201);
      }
      // 4 failures, then the 5th counts and the next attempts, right password or not, are refused.
      expect((await anonymous.POST('/v1/sessions', { body: { email: u.email, password: u.password } })).response.status).toBe(429);
    });
  });

  it('never writes a password or a token to the log', () => {
    const log = logLines.join('\n');
    // The log did run at debug level and saw the mail traffic (so the check is not vacuous).
    expect(log).toContain('"msg":"mail sent"');
    expect(log).toContain('rose@test.local');
    expect(secrets.length).toBeGreaterThan(20);
    for (const s of secrets) expect(log, 'a secret was logged').not.toContain(s);
  });
});
