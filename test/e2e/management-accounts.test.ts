import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManagementClient, unwrap, type ManagementClient } from '../../sdk/index.js';
import { createLogger } from '../../services/shared/index.js';
import { newApplication, newCampaign } from '../helpers/fixtures.js';
import { ADMIN_EMAIL, startTestNode, type TestNode } from '../helpers/node.js';
import { addUser, eventually, otherAccount, pointers, type TestUser } from '../helpers/users.js';

// A node without SMTP_URL: its mails go to the logged transport, whose lines are kept here.
describe('Management API: accounts', () => {
  let t: TestNode;
  let accountId: number;
  let stranger: TestUser & { accountId: number };
  let member: TestUser;
  let anonymous: ManagementClient;
  const logLines: string[] = [];

  beforeAll(async () => {
    t = await startTestNode('pglite', { mailPollMs: 50, logger: createLogger({ level: 'info', write: (l) => logLines.push(l) }) });
    const [me] = await t.node.db.query<{ account_id: number }>(`SELECT account_id FROM users WHERE email = $1`, [ADMIN_EMAIL]);
    accountId = me!.account_id;
    stranger = await otherAccount(t.node.db, t.url);
    member = await addUser(t.node.db, t.url, accountId, 'member@test.local', { applications: {} });
    anonymous = createManagementClient({ baseUrl: t.url, retries: 0 });
  });
  afterAll(async () => {
    await t?.stop();
  });

  const account = (c: ManagementClient, id = accountId) => c.GET('/v1/accounts/{accountId}', { params: { path: { accountId: id } } });

  it('shows the account with counters that follow Applications, campaigns and users', async () => {
    const before = unwrap(await account(t.admin));
    expect(before).toMatchObject({
      id: accountId,
      applicationCount: 0,
      userCount: 2,
      campaignsActiveCount: 0,
      campaignsInactiveCount: 0,
      apiCallCount: 0,
      apiLimit: 0,
      applicationLimit: 0,
      campaignLimit: 0,
      userLimit: 0,
      planName: 'self-hosted',
      state: 'active',
      companyName: '',
      billingEmail: '',
    });
    expect(before.planExpires).toBeUndefined();

    const a1 = unwrap(await t.admin.POST('/v1/applications', { body: newApplication({ name: 'A1' }) as never })).id;
    const a2 = unwrap(await t.admin.POST('/v1/applications', { body: newApplication({ name: 'A2' }) as never })).id;
    for (const [app, state] of [[a1, 'enabled'], [a1, 'disabled'], [a2, 'enabled'], [a2, 'enabled']] as const) {
      unwrap(await t.admin.POST('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId: app } }, body: newCampaign({ state }) as never }));
    }
    unwrap(await t.admin.POST('/v1/invites', { body: { email: 'new@test.local', acl: { applications: { [a1]: 'read' } } } }));
    // Another account's activity does not count here.
    const theirApp = unwrap(await stranger.client.POST('/v1/applications', { body: newApplication() as never })).id;
    unwrap(await stranger.client.POST('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId: theirApp } }, body: newCampaign() as never }));

    expect(unwrap(await account(t.admin))).toMatchObject({ applicationCount: 2, userCount: 3, campaignsActiveCount: 3, campaignsInactiveCount: 1 });
    expect((await t.admin.DELETE('/v1/applications/{applicationId}', { params: { path: { applicationId: a2 } } })).response.status).toBe(204);
    expect(unwrap(await account(t.admin))).toMatchObject({ applicationCount: 1, userCount: 3, campaignsActiveCount: 1, campaignsInactiveCount: 1 });
    expect(unwrap(await account(stranger.client, stranger.accountId))).toMatchObject({ applicationCount: 1, userCount: 1, campaignsActiveCount: 1, campaignsInactiveCount: 0 });
  });

  it('reports the API call count the access log writer keeps', async () => {
    // The writer adds the calls it logs meanwhile (this read among them): what is shown lies
    // between the count before the read and the count after it.
    await t.node.db.query(`UPDATE accounts SET api_call_count = 4242 WHERE id = $1`, [accountId]);
    const shown = unwrap(await account(t.admin)).apiCallCount;
    const [after] = await t.node.db.query<{ n: string }>(`SELECT api_call_count::text AS n FROM accounts WHERE id = $1`, [accountId]);
    expect(shown).toBeGreaterThanOrEqual(4242);
    expect(shown).toBeLessThanOrEqual(Number(after!.n));
  });

  it('lets an admin update billingEmail and companyName only', async () => {
    const before = unwrap(await account(t.admin));
    await new Promise((r) => setTimeout(r, 5));
    const r = unwrap(
      await t.admin.PUT('/v1/accounts/{accountId}', { params: { path: { accountId } }, body: { billingEmail: 'billing@shop.test', companyName: 'Shop GmbH' } }),
    );
    expect(r).toMatchObject({ id: accountId, billingEmail: 'billing@shop.test', companyName: 'Shop GmbH', applicationCount: before.applicationCount });
    expect(Date.parse(r.modified)).toBeGreaterThan(Date.parse(before.modified));
    const partial = unwrap(await t.admin.PUT('/v1/accounts/{accountId}', { params: { path: { accountId } }, body: { companyName: 'Shop AG' } }));
    expect(partial).toMatchObject({ billingEmail: 'billing@shop.test', companyName: 'Shop AG' });
    expect(unwrap(await account(member.client))).toMatchObject({ companyName: 'Shop AG' });
  });

  it('refuses any other property and bad values with pointers', async () => {
    const cases: Array<[unknown, string]> = [
      [{ planName: 'enterprise' }, '/planName'],
      [{ companyName: 'X', userLimit: 1000 }, '/userLimit'],
      [{ billingEmail: 'not-an-email' }, '/billingEmail'],
      [{ companyName: 5 }, '/companyName'],
    ];
    for (const [body, pointer] of cases) {
      const r = await t.admin.PUT('/v1/accounts/{accountId}', { params: { path: { accountId } }, body: body as never });
      expect(r.response.status, JSON.stringify(body)).toBe(400);
      expect(r.error?.StatusCode).toBe(400);
      expect(pointers(r.error), JSON.stringify(body)).toContain(pointer);
    }
    const bad = await fetch(`${t.url}/v1/accounts/abc`, { headers: { Authorization: `Bearer ${t.adminToken}` } });
    expect(bad.status).toBe(400);
    expect(pointers(await bad.json())).toEqual(['/path/accountId']);
    expect(unwrap(await account(t.admin))).toMatchObject({ companyName: 'Shop AG', planName: 'self-hosted', userLimit: 0 });
  });

  it('refuses calls without a token', async () => {
    const get = await account(anonymous);
    expect(get.response.status).toBe(401);
    expect(pointers(get.error)).toEqual(['/headers/authorization']);
    const put = await anonymous.PUT('/v1/accounts/{accountId}', { params: { path: { accountId } }, body: { companyName: 'Pwned' } });
    expect(put.response.status).toBe(401);
  });

  it('lets a non-admin read but not update the account', async () => {
    const put = await member.client.PUT('/v1/accounts/{accountId}', { params: { path: { accountId } }, body: { companyName: 'Pwned' } });
    expect(put.response.status).toBe(403);
    expect(unwrap(await account(t.admin)).companyName).not.toBe('Pwned');
  });

  it("never shows or changes another account", async () => {
    const get = await account(stranger.client, accountId);
    const missing = await account(stranger.client, 987654);
    expect(get.response.status).toBe(404);
    expect(get.error).toEqual(missing.error);
    expect(JSON.stringify(get.error)).not.toContain('Shop AG');
    const put = await stranger.client.PUT('/v1/accounts/{accountId}', { params: { path: { accountId } }, body: { companyName: 'Pwned' } });
    expect(put.response.status).toBe(404);
    const memberPut = await member.client.PUT('/v1/accounts/{accountId}', { params: { path: { accountId: stranger.accountId } }, body: { companyName: 'Pwned' } });
    expect(memberPut.response.status).toBe(404);
    expect(unwrap(await account(t.admin)).companyName).toBe('Shop AG');
    expect(unwrap(await account(stranger.client, stranger.accountId)).companyName).toBe('Other');
  });

  it('without SMTP logs that a mail would go out, with recipient and subject but no body or token', async () => {
    const invited = unwrap(await t.admin.POST('/v1/invites', { body: { email: 'logged@test.local', acl: { role: 'admin' } } }));
    const line = await eventually(() => logLines.find((l) => l.includes('logged@test.local')));
    expect(JSON.parse(line)).toMatchObject({ level: 'info', msg: 'mail not sent (no SMTP_URL configured)', to: 'logged@test.local', subject: 'You are invited to Perkline' });
    await eventually(() => logLines.find((l) => l.includes('new@test.local')));
    const [row] = await t.node.db.query<{ state: string; body: string }>(`SELECT state, body FROM mail_outbox WHERE recipient = 'logged@test.local'`);
    expect(row).toEqual({ state: 'sent', body: '' });
    const log = logLines.join('\n');
    expect(log).not.toContain(invited.inviteToken!);
    expect(log).not.toContain('accept_invite');
    expect(log).not.toContain(t.adminToken);
    expect(log).not.toContain(member.password);
  });
});
