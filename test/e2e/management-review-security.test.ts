// Review of the Management API's access control and secrets: each case is a defect that was found
// by probing the endpoints as another account, a read-only user or a writer of one Application.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManagementClient, login, unwrap } from '../../sdk/index.js';
import { newApplication, newCampaign } from '../helpers/fixtures.js';
import { freePort, setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';
import { startFakeSmtp, type FakeSmtp } from '../helpers/fake-smtp.js';
import { addUser, eventually, otherAccount, pointers, tokenIn, type TestUser } from '../helpers/users.js';

describe('Management API review: security and access control', () => {
  let t: TestNode;
  let accountId: number;
  let shopA: ShopSetup;
  let appB: number;
  let stranger: TestUser & { accountId: number };
  let reader: TestUser;
  let writerA: TestUser;
  let users = 0;
  const user = (policy: Record<string, unknown>) => addUser(t.node.db, t.url, accountId, `review-${++users}@test.local`, policy);

  beforeAll(async () => {
    t = await startTestNode('pglite', { accessLog: { flushIntervalMs: 50 } });
    const [me] = await t.node.db.query<{ account_id: number }>(`SELECT account_id FROM users WHERE email = 'admin@test.local'`);
    accountId = me!.account_id;
    shopA = await setupShop(t.url, t.admin);
    appB = unwrap(await t.admin.POST('/v1/applications', { body: newApplication({ name: 'B' }) as never })).id;
    stranger = await otherAccount(t.node.db, t.url, 'stranger@test.local');
    reader = await user({ applications: { [String(shopA.applicationId)]: 'read' } });
    writerA = await user({ applications: { [String(shopA.applicationId)]: 'write', [String(appB)]: 'read' } });
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  describe('every 403 is the error body with a source.pointer', () => {
    it('a read-only user changing its Application', async () => {
      const r = await reader.client.PUT('/v1/applications/{applicationId}', {
        params: { path: { applicationId: shopA.applicationId } },
        body: newApplication({ name: 'Mine now' }) as never,
      });
      expect(r.response.status).toBe(403);
      expect(r.error?.StatusCode).toBe(403);
      expect(pointers(r.error)).toEqual(['/applicationId']);
      // Another account's admin is told nothing: a 404, pointed at the same parameter.
      const theirs = await stranger.client.PUT('/v1/applications/{applicationId}', {
        params: { path: { applicationId: shopA.applicationId } },
        body: newApplication({ name: 'Mine now' }) as never,
      });
      expect(theirs.response.status).toBe(404);
      expect(pointers(theirs.error)).toEqual(['/applicationId']);
      expect(unwrap(await t.admin.GET('/v1/applications/{applicationId}', { params: { path: { applicationId: shopA.applicationId } } })).name).not.toBe('Mine now');
    });

    it('a non-admin doing what only admins may do', async () => {
      const app = await writerA.client.POST('/v1/applications', { body: newApplication({ name: 'Not allowed' }) as never });
      expect(app.response.status).toBe(403);
      expect(pointers(app.error)).toEqual(['/headers/authorization']);
      const attr = await writerA.client.POST('/v1/attributes', { body: { entity: 'CustomerSession', name: 'nope', type: 'string' } as never });
      expect(attr.response.status).toBe(403);
      expect(pointers(attr.error)).toEqual(['/headers/authorization']);
      const invite = await reader.client.POST('/v1/invites', { body: { email: 'x@test.local', acl: { role: 'admin' } } as never });
      expect(invite.response.status).toBe(403);
      expect(pointers(invite.error)).toEqual(['/headers/authorization']);
    });

    it('a writer of one Application changing a webhook that is also attached to one it only reads', async () => {
      const w = unwrap(
        await t.admin.POST('/v1/webhooks', { body: { applicationIds: [shopA.applicationId, appB], title: 'both', verb: 'POST', url: 'https://example.test/h' } }),
      );
      const put = await writerA.client.PUT('/v1/webhooks/{webhookId}', {
        params: { path: { webhookId: w.id } },
        body: { applicationIds: [shopA.applicationId], title: 'mine', verb: 'POST', url: 'https://example.test/h' },
      });
      expect(put.response.status).toBe(403);
      expect(pointers(put.error)).toEqual(['/webhookId']);
      const del = await writerA.client.DELETE('/v1/webhooks/{webhookId}', { params: { path: { webhookId: w.id } } });
      expect(del.response.status).toBe(403);
      expect(pointers(del.error)).toEqual(['/webhookId']);
    });

    it('a user without write access to a subscribed Application changing a ledger', async () => {
      const p = unwrap(await t.admin.POST('/v1/loyalty_programs', { body: { name: 'review', title: 'Review', subscribedApplications: [appB] } }));
      const r = await writerA.client.PUT('/v1/loyalty_programs/{programID}/profile/{integrationID}/add_points', {
        params: { path: { programID: p.id, integrationID: 'someone' } },
        body: { points: 10 },
      });
      expect(r.response.status).toBe(403);
      expect(pointers(r.error)).toEqual(['/programID']);
    });
  });

  describe('webhooks', () => {
    it('show a user only the Applications (and their campaigns) its policy names', async () => {
      // A campaign of B triggers a webhook attached to A and B.
      const campaignB = unwrap(await t.admin.POST('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId: appB } }, body: newCampaign() as never }));
      const w = unwrap(
        await t.admin.POST('/v1/webhooks', { body: { applicationIds: [shopA.applicationId, appB], title: 'shared', verb: 'POST', url: 'https://example.test/shared' } }),
      );
      unwrap(
        await t.admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets', {
          params: { path: { applicationId: appB, campaignId: campaignB.id } },
          body: { rules: [{ title: 'notify', condition: ['>', ['.', 'Session', 'Total'], 0], effects: [['triggerWebhook', w.id, {}]] }], bindings: [], activate: true } as never,
        }),
      );
      const path = { params: { path: { webhookId: w.id } } };
      const full = unwrap(await t.admin.GET('/v1/webhooks/{webhookId}', path));
      expect(full).toMatchObject({ applicationIds: [shopA.applicationId, appB], usedAt: [String(campaignB.id)] });
      expect(unwrap(await writerA.client.GET('/v1/webhooks/{webhookId}', path))).toEqual(full);

      // A reader of A only learns nothing of B: neither its id nor the id of its campaign.
      const seen = unwrap(await reader.client.GET('/v1/webhooks/{webhookId}', path));
      expect(seen).toEqual({ ...full, applicationIds: [shopA.applicationId], usedAt: [] });
      expect(unwrap(await reader.client.GET('/v1/webhooks')).data.find((x) => x.id === w.id)).toEqual(seen);
      // Nor by filtering: B is not one of its Applications, so no webhook is attached to it for the reader.
      expect(unwrap(await reader.client.GET('/v1/webhooks', { params: { query: { applicationIds: String(appB) } } })).data).toEqual([]);
      expect(unwrap(await writerA.client.GET('/v1/webhooks', { params: { query: { applicationIds: String(appB) } } })).data.map((x) => x.id)).toContain(w.id);
      const onlyA = await user({ applications: { [String(shopA.applicationId)]: 'write' } });
      const put = await onlyA.client.PUT('/v1/webhooks/{webhookId}', { ...path, body: { applicationIds: [shopA.applicationId], title: 'x', verb: 'POST', url: 'https://example.test/x' } });
      expect(put.response.status).toBe(403);
      expect(JSON.stringify(put.error)).not.toContain(String(appB));
      expect(unwrap(await t.admin.GET('/v1/webhooks/{webhookId}', path))).toEqual(full);
    });
  });

  describe('webhook header values', () => {
    it('are shown only to users who may change the webhook, like the signing secret', async () => {
      const headers = ['Content-Type: application/json', 'Authorization: Bearer receiver-secret-123'];
      const w = unwrap(
        await t.admin.POST('/v1/webhooks', { body: { applicationIds: [shopA.applicationId], title: 'auth', verb: 'POST', url: 'https://example.test/auth', headers } }),
      );
      const path = { params: { path: { webhookId: w.id } } };
      expect(w.headers).toEqual(headers);
      expect(unwrap(await writerA.client.GET('/v1/webhooks/{webhookId}', path)).headers).toEqual(headers);
      const seen = unwrap(await reader.client.GET('/v1/webhooks/{webhookId}', path));
      expect(seen.headers).toEqual(['Content-Type: [redacted]', 'Authorization: [redacted]']);
      const listed = unwrap(await reader.client.GET('/v1/webhooks')).data.find((x) => x.id === w.id)!;
      expect(listed.headers).toEqual(seen.headers);
      expect(JSON.stringify([seen, listed])).not.toContain('receiver-secret-123');
    });
  });

  describe('account-level resources', () => {
    it("name to a non-admin only the Applications of its policy: loyalty programs and attributes", async () => {
      const p = unwrap(await t.admin.POST('/v1/loyalty_programs', { body: { name: 'shared-program', title: 'P', subscribedApplications: [shopA.applicationId, appB] } }));
      const a = unwrap(
        await t.admin.POST('/v1/attributes', {
          body: { entity: 'CustomerSession', name: 'sharedAttr', type: 'string', subscribedApplicationsIds: [shopA.applicationId, appB] } as never,
        }),
      );
      expect(p.subscribedApplications).toEqual([shopA.applicationId, appB]);
      expect(a.subscribedApplicationsIds).toEqual([shopA.applicationId, appB]);
      expect(unwrap(await writerA.client.GET('/v1/loyalty_programs/{programID}', { params: { path: { programID: p.id } } })).subscribedApplications).toEqual([
        shopA.applicationId,
        appB,
      ]);

      const program = unwrap(await reader.client.GET('/v1/loyalty_programs/{programID}', { params: { path: { programID: p.id } } }));
      expect(program).toEqual({ ...p, subscribedApplications: [shopA.applicationId] });
      expect(unwrap(await reader.client.GET('/v1/loyalty_programs')).data.find((x) => x.id === p.id)).toEqual(program);
      const app = unwrap(await reader.client.GET('/v1/applications/{applicationId}', { params: { path: { applicationId: shopA.applicationId } } }));
      expect(app.loyaltyPrograms?.find((x) => x.id === p.id)).toEqual(program);
      expect(unwrap(await reader.client.GET('/v1/applications')).data[0]!.loyaltyPrograms?.find((x) => x.id === p.id)).toEqual(program);

      // Last used by B (as a session of B would record it): the admin sees it, the reader does not.
      await t.node.db.query(`UPDATE attributes SET last_used_application_id = $2 WHERE id = $1`, [a.id, appB]);
      expect(unwrap(await t.admin.GET('/v1/attributes/{attributeId}', { params: { path: { attributeId: a.id } } })).lastUsedApplicationId).toBe(appB);
      const attribute = unwrap(await reader.client.GET('/v1/attributes/{attributeId}', { params: { path: { attributeId: a.id } } }));
      expect(attribute).toEqual({ ...a, subscribedApplicationsIds: [shopA.applicationId] });
      expect(attribute.lastUsedApplicationId).toBeUndefined();
      expect(unwrap(await reader.client.GET('/v1/attributes')).data.find((x) => x.id === a.id)).toEqual(attribute);
    });
  });

  describe('loyalty ledgers', () => {
    it("only admins and users of a subscribed Application read a customer's ledger", async () => {
      const p = unwrap(await t.admin.POST('/v1/loyalty_programs', { body: { name: 'ledger-read', title: 'Points', subscribedApplications: [shopA.applicationId] } }));
      await shopA.integration.PUT('/v2/customer_profiles/{integrationId}', { params: { path: { integrationId: 'ledger-customer' } }, body: { attributes: {} } as never });
      const ledger = { params: { path: { programID: p.id, integrationID: 'ledger-customer' } } };
      unwrap(await t.admin.PUT('/v1/loyalty_programs/{programID}/profile/{integrationID}/add_points', { ...ledger, body: { points: 25, name: 'welcome' } }));

      expect(unwrap(await t.admin.GET('/v1/loyalty_programs/{programID}/profile/{integrationID}', ledger)).ledger.total).toBe(25);
      expect(unwrap(await reader.client.GET('/v1/loyalty_programs/{programID}/profile/{integrationID}', ledger)).ledger.total).toBe(25);
      // A user of another Application only, and one of no Application, see the program but not its customers.
      const onlyB = await user({ applications: { [String(appB)]: 'write' } });
      const none = await user({ applications: {} });
      for (const c of [onlyB.client, none.client]) {
        expect(unwrap(await c.GET('/v1/loyalty_programs/{programID}', { params: { path: { programID: p.id } } })).name).toBe('ledger-read');
        const r = await c.GET('/v1/loyalty_programs/{programID}/profile/{integrationID}', ledger);
        expect(r.response.status).toBe(403);
        expect(r.data).toBeUndefined();
        expect(pointers(r.error)).toEqual(['/programID']);
      }
    });
  });

  describe('access logs', () => {
    const rangeStart = new Date(Date.now() - 3600_000).toISOString();
    const appLogs = (client: TestUser['client'], applicationId: number) =>
      client.GET('/v1/applications/{applicationId}/access_logs', {
        params: { path: { applicationId }, query: { rangeStart, rangeEnd: new Date(Date.now() + 3600_000).toISOString() } as never },
      });
    /** Waits until a request with this URI is in the log table (the writer flushes every 50 ms). */
    const logged = async (uri: string) => {
      const until = Date.now() + 5000;
      while ((await t.node.db.query(`SELECT 1 FROM access_logs WHERE request_uri = $1`, [uri])).length === 0) {
        if (Date.now() > until) throw new Error(`${uri} was not logged`);
        await new Promise((r) => setTimeout(r, 25));
      }
    };

    it("an Application's log never shows another account's requests that named its id", async () => {
      // Another account probes this account's Application: a 404, with a body of its own.
      const probe = await stranger.client.PUT('/v1/applications/{applicationId}', {
        params: { path: { applicationId: shopA.applicationId } },
        body: newApplication({ name: 'stranger-probe' }) as never,
      });
      expect(probe.response.status).toBe(404);
      unwrap(await t.admin.GET('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId: shopA.applicationId }, query: { skip: 4242 } } }));
      await logged(`/v1/applications/${shopA.applicationId}/campaigns?skip=4242`);
      await logged(`/v1/applications/${shopA.applicationId}`);

      for (const client of [t.admin, reader.client]) {
        const logs = unwrap(await appLogs(client, shopA.applicationId)).data;
        expect(logs.some((e) => e.requestUri === `/v1/applications/${shopA.applicationId}/campaigns?skip=4242`)).toBe(true);
        expect(logs.filter((e) => e.requestPayload.includes('stranger-probe'))).toEqual([]);
        expect(logs.filter((e) => e.method === 'PUT' && e.status === 404)).toEqual([]);
      }
      // The prober still finds its own call in its account's log.
      const own = unwrap(
        await stranger.client.GET('/v1/access_logs', { params: { query: { rangeStart, rangeEnd: new Date(Date.now() + 3600_000).toISOString() } as never } }),
      ).data;
      expect(own.filter((e) => e.requestPayload.includes('stranger-probe')).map((e) => [e.method, e.status])).toEqual([['PUT', 404]]);
    });
  });

  describe('login throttling', () => {
    it("PUT /v1/users/{self} is no way around the login limit to guess a user's password", async () => {
      // Someone holding a user's bearer token (a shared machine, a leaked log) guesses the current
      // password through the password change, which checks it: it must be counted as a login is.
      const victim = await user({ applications: { [String(shopA.applicationId)]: 'read' } });
      const guess = (password: string) =>
        victim.client.PUT('/v1/users/{userId}', { params: { path: { userId: victim.id } }, body: { password, newPassword: 'attacker-chosen-1' } as never });
      for (let i = 0; i < 5; i++) {
        const r = await guess(`guess-${i}`);
        expect(r.response.status).toBe(401);
        expect(pointers(r.error)).toEqual(['/password']);
      }
      const limited = await guess(victim.password);
      expect(limited.response.status).toBe(429);
      expect(Number(limited.response.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(pointers(limited.error)).toEqual(['/password']);
      // The right password, once limited, changed nothing; logins of that e-mail wait as well.
      const login6 = await stranger.client.POST('/v1/sessions', { body: { email: victim.email, password: victim.password } });
      expect(login6.response.status).toBe(429);
      const rows = await t.node.db.query<{ password_hash: string }>(`SELECT password_hash FROM users WHERE id = $1`, [victim.id]);
      const { verifyPassword } = await import('../../services/management/passwords.js');
      expect(await verifyPassword(victim.password, rows[0]!.password_hash)).toBe(true);
    });
  });
});

// Tokens mailed to an address stay with whoever reads that mailbox: when the user's address changes
// (an admin corrects a typo, an employee's mailbox is handed on) or the password is changed, the
// tokens already mailed must stop working.
describe('Management API review: mailed tokens follow the user, not the old mailbox', () => {
  let t: TestNode;
  let smtp: FakeSmtp;
  let accountId: number;
  let appId: number;
  const anonymous = () => createManagementClient({ baseUrl: t.url, retries: 0 });
  const mailTo = (email: string, index = 0) => eventually(() => smtp.messages.filter((m) => m.to.includes(email))[index]);

  beforeAll(async () => {
    smtp = await startFakeSmtp();
    t = await startTestNode('pglite', { smtpUrl: smtp.url(), mailFrom: 'perkline@test.local', mailPollMs: 50 });
    const [me] = await t.node.db.query<{ account_id: number }>(`SELECT account_id FROM users WHERE email = 'admin@test.local'`);
    accountId = me!.account_id;
    appId = unwrap(await t.admin.POST('/v1/applications', { body: newApplication({ name: 'Mail app' }) as never })).id;
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
    await smtp?.close();
  });

  it('an invite mailed to a mistyped address stops working when the admin corrects the address; the right one gets a new invite', async () => {
    const invited = unwrap(await t.admin.POST('/v1/invites', { body: { email: 'carol@typo.test', acl: { applications: { [appId]: 'write' } }, name: 'Carol' } as never }));
    const oldToken = tokenIn((await mailTo('carol@typo.test')).body);
    expect(oldToken).toBe(invited.inviteToken);
    const fixed = unwrap(await t.admin.PUT('/v1/users/{userId}', { params: { path: { userId: invited.id } }, body: { email: 'carol@right.test' } }));
    expect(fixed).toMatchObject({ id: invited.id, email: 'carol@right.test', state: 'invited' });

    // Whoever reads the mistyped mailbox cannot join the account.
    const stolen = await anonymous().POST('/v1/accept_invite', { body: { email: 'mallory@typo.test', inviteToken: oldToken, password: 'mallory-password-1' } });
    expect(stolen.response.status).toBe(401);
    expect(pointers(stolen.error)).toEqual(['/inviteToken']);
    expect(unwrap(await t.admin.GET('/v1/users/{userId}', { params: { path: { userId: invited.id } } }))).toMatchObject({ state: 'invited', email: 'carol@right.test' });

    // Carol gets a new invite at the right address, and it works.
    const mail = await mailTo('carol@right.test');
    expect(mail.subject).toBe('You are invited to Perkline');
    const newToken = tokenIn(mail.body);
    expect(newToken).not.toBe(oldToken);
    expect(fixed.inviteToken).toBe(newToken);
    const accepted = unwrap(await anonymous().POST('/v1/accept_invite', { body: { email: 'carol@right.test', inviteToken: newToken, password: 'carol-password-1' } }));
    expect(accepted.userId).toBe(invited.id);
  });

  it("a bearer token alone cannot move a user's e-mail (and so its password recovery) to another mailbox", async () => {
    const u = await addUser(t.node.db, t.url, accountId, 'frank@test.local', { applications: { [appId]: 'write' } });
    const self = { params: { path: { userId: u.id } } };
    // Whoever holds the token would next ask for a reset mail at their own address.
    const missing = await u.client.PUT('/v1/users/{userId}', { ...self, body: { email: 'thief@evil.test' } });
    expect(missing.response.status).toBe(400);
    expect(pointers(missing.error)).toEqual(['/password']);
    const wrong = await u.client.PUT('/v1/users/{userId}', { ...self, body: { email: 'thief@evil.test', password: 'not-it' } as never });
    expect(wrong.response.status).toBe(401);
    expect(pointers(wrong.error)).toEqual(['/password']);
    expect(unwrap(await t.admin.GET('/v1/users/{userId}', self)).email).toBe('frank@test.local');
    // The owner proves the password and may move; a change of letter case only, or another field, needs nothing.
    expect(unwrap(await u.client.PUT('/v1/users/{userId}', { ...self, body: { email: 'Frank@test.local', name: 'Frank' } })).email).toBe('Frank@test.local');
    const moved = unwrap(await u.client.PUT('/v1/users/{userId}', { ...self, body: { email: 'frank@new.test', password: u.password } as never }));
    expect(moved.email).toBe('frank@new.test');
  });

  it('password recovery cannot be used to flood a mailbox: at most 5 reset mails per user and hour', async () => {
    const u = await addUser(t.node.db, t.url, accountId, 'gina@test.local', { applications: {} });
    for (let i = 0; i < 8; i++) {
      // Always the same answer, so the limit does not tell which e-mails exist either.
      expect((await anonymous().POST('/v1/password_recovery_emails', { body: { email: u.email } })).response.status).toBe(204);
    }
    const fifth = tokenIn((await mailTo(u.email, 4)).body);
    await new Promise((r) => setTimeout(r, 300));
    expect(smtp.messages.filter((m) => m.to.includes(u.email))).toHaveLength(5);
    const [queued] = await t.node.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM mail_outbox WHERE recipient = $1`, [u.email]);
    expect(queued!.n).toBe(5);
    // The mails sent still work.
    expect((await anonymous().POST('/v1/reset_password', { body: { resetToken: fifth, password: 'gina-new-password-1' } })).response.status).toBe(204);
  });

  it('a reset token mailed to the old address stops working when the e-mail changes', async () => {
    const u = await addUser(t.node.db, t.url, accountId, 'dave@old.test', { applications: { [appId]: 'read' } });
    expect((await anonymous().POST('/v1/password_recovery_emails', { body: { email: u.email } })).response.status).toBe(204);
    const resetToken = tokenIn((await mailTo('dave@old.test')).body);
    unwrap(await t.admin.PUT('/v1/users/{userId}', { params: { path: { userId: u.id } }, body: { email: 'dave@new.test' } }));
    const r = await anonymous().POST('/v1/reset_password', { body: { resetToken, password: 'taken-over-1' } });
    expect(r.response.status).toBe(401);
    expect(pointers(r.error)).toEqual(['/resetToken']);
    expect((await login({ baseUrl: t.url, email: 'dave@new.test', password: u.password, retries: 0 })).userId).toBe(u.id);
  });

  it('a reset token mailed before the owner changed the password stops working', async () => {
    const u = await addUser(t.node.db, t.url, accountId, 'erin@test.local', { applications: {} });
    expect((await anonymous().POST('/v1/password_recovery_emails', { body: { email: u.email } })).response.status).toBe(204);
    const resetToken = tokenIn((await mailTo(u.email)).body);
    unwrap(await u.client.PUT('/v1/users/{userId}', { params: { path: { userId: u.id } }, body: { password: u.password, newPassword: 'erin-new-password-1' } as never }));
    const r = await anonymous().POST('/v1/reset_password', { body: { resetToken, password: 'taken-over-1' } });
    expect(r.response.status).toBe(401);
    expect(pointers(r.error)).toEqual(['/resetToken']);
    expect((await login({ baseUrl: t.url, email: u.email, password: 'erin-new-password-1', retries: 0 })).userId).toBe(u.id);
  });
});

describe('Management API review: a mail that fails for good', () => {
  let t: TestNode;
  beforeAll(async () => {
    // Nothing listens on this port: every attempt fails, and one attempt is all there is.
    t = await startTestNode('pglite', { smtpUrl: `smtp://127.0.0.1:${await freePort()}`, mailPollMs: 50, mailMaxAttempts: 1 });
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  it('does not keep its token in the outbox', async () => {
    const invited = unwrap(await t.admin.POST('/v1/invites', { body: { email: 'lost@test.local', acl: { role: 'admin' } } as never }));
    const until = Date.now() + 5000;
    let row: { state: string; body: string; last_error: string | null } | undefined;
    while (Date.now() < until) {
      [row] = await t.node.db.query<{ state: string; body: string; last_error: string | null }>(
        `SELECT state, body, last_error FROM mail_outbox WHERE recipient = 'lost@test.local'`,
      );
      if (row?.state === 'failed') break;
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(row?.state).toBe('failed');
    expect(row?.last_error).toMatch(/connect|refused|failed/i);
    expect(row?.body).not.toContain(invited.inviteToken!);
    expect(row?.body).toBe('');
  });
});
