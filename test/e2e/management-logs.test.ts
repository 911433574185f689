import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManagementClient, login, unwrap, type ManagementClient } from '../../sdk/index.js';
import { AccessLogWriter, redactPayload, type AccessLogEntry } from '../../services/management/index.js';
import { hashPassword } from '../../services/management/passwords.js';
import { createLogger } from '../../services/shared/index.js';
import type { Queryable } from '../../services/store/index.js';
import { cart } from '../helpers/fixtures.js';
import { ADMIN_PASSWORD, setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';

type Err = { StatusCode: number; errors: Array<{ source?: { pointer?: string } }> } | undefined;
const pointers = (e: Err) => (e?.errors ?? []).map((x) => x.source?.pointer);

/** Polls until `check` passes (the writer flushes every 50 ms here), failing after 5 s. */
async function eventually<T>(read: () => Promise<T>, check: (v: T) => boolean, what: string): Promise<T> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const v = await read();
    if (check(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(v).slice(0, 500)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('Management API: access logs and webhook logs', () => {
  let t: TestNode;
  let shopA: ShopSetup;
  let shopB: ShopSetup;
  let stranger: ManagementClient;
  let strangerToken: string;
  let strangerShop: ShopSetup;
  let reader: ManagementClient;
  let readerToken: string;
  let anonymous: ManagementClient;
  let otherAccountId: number;
  const logLines: string[] = [];
  const rangeStart = new Date(Date.now() - 60_000).toISOString();
  const rangeEnd = () => new Date(Date.now() + 3600_000).toISOString();
  const db = () => t.node.db;

  const appLogs = (client: ManagementClient, applicationId: number, query: Record<string, unknown> = {}) =>
    client.GET('/v1/applications/{applicationId}/access_logs', {
      params: { path: { applicationId }, query: { rangeStart, rangeEnd: rangeEnd(), ...query } as never },
    });
  const accountLogs = (client: ManagementClient, query: Record<string, unknown> = {}) =>
    client.GET('/v1/access_logs', { params: { query: { rangeStart, rangeEnd: rangeEnd(), ...query } as never } });
  const webhookLogs = (client: ManagementClient, query: Record<string, unknown> = {}) =>
    client.GET('/v1/webhook_logs', { params: { query: query as never } });

  let markers = 0;
  /**
   * Waits until everything logged so far is written: a marker request is logged after every
   * earlier one, and the writer writes in order.
   */
  const settle = async () => {
    const uri = `/v1/applications/${shopA.applicationId}/campaigns?skip=${1000 + ++markers}`;
    unwrap(await t.admin.GET('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId: shopA.applicationId }, query: { skip: 1000 + markers } } }));
    await eventually(() => db().query(`SELECT 1 FROM access_logs WHERE request_uri = $1`, [uri]), (rows) => rows.length === 1, uri);
  };

  beforeAll(async () => {
    t = await startTestNode('pglite', {
      accessLog: { flushIntervalMs: 50 },
      logger: createLogger({ level: 'debug', write: (line) => logLines.push(line) }),
    });
    anonymous = createManagementClient({ baseUrl: t.url, retries: 0 });
    shopA = await setupShop(t.url, t.admin);
    shopB = await setupShop(t.url, t.admin, { application: { name: 'Shop B' } });
    // A second account with its own admin and Application: it must never see the first's logs.
    const [account] = await db().query<{ id: number }>(`INSERT INTO accounts (company_name) VALUES ('Other') RETURNING id`);
    otherAccountId = account!.id;
    await db().query(
      `INSERT INTO users (account_id, email, name, password_hash, policy) VALUES ($1, 'other@test.local', 'Other', $2, '{"role":"admin"}'::jsonb)`,
      [otherAccountId, await hashPassword('other-password')],
    );
    ({ client: stranger, token: strangerToken } = await login({ baseUrl: t.url, email: 'other@test.local', password: 'other-password', retries: 0 }));
    strangerShop = await setupShop(t.url, stranger);
    // A user of the first account who may only read Application A.
    await db().query(
      `INSERT INTO users (account_id, email, name, password_hash, policy) VALUES ((SELECT account_id FROM applications WHERE id = $1), 'reader@test.local', 'Reader', $2, $3::jsonb)`,
      [shopA.applicationId, await hashPassword('reader-password'), JSON.stringify({ applications: { [String(shopA.applicationId)]: 'read' } })],
    );
    ({ client: reader, token: readerToken } = await login({ baseUrl: t.url, email: 'reader@test.local', password: 'reader-password', retries: 0 }));
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  describe('writing', () => {
    it('logs Integration and Management calls under their Application, and account-level calls under the account only', async () => {
      const put = await shopA.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'log-1' } },
        body: { customerSession: cart([150]) as never },
      });
      expect(put.response.status).toBe(200);
      unwrap(await t.admin.GET('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId: shopA.applicationId }, query: { pageSize: 5 } } }));

      const logs = await eventually(
        async () => unwrap(await appLogs(t.admin, shopA.applicationId)),
        (l) => l.data.some((e) => e.method === 'PUT' && e.requestUri === '/v2/customer_sessions/log-1') && l.data.some((e) => e.requestUri.endsWith('/campaigns?pageSize=5')),
        'the session update and the campaign list',
      );
      const session = logs.data.find((e) => e.requestUri === '/v2/customer_sessions/log-1')!;
      expect(session).toMatchObject({ status: 200, method: 'PUT', uuid: expect.stringMatching(/^[0-9a-f-]{36}$/) });
      expect(JSON.parse(session.requestPayload)).toEqual({ customerSession: cart([150]) });
      expect(JSON.parse(session.responsePayload)).toEqual(put.data);
      expect(put.data!.effects.length).toBeGreaterThan(0);
      expect(Date.parse(session.time)).toBeGreaterThan(Date.parse(rangeStart));
      const list = logs.data.find((e) => e.requestUri === `/v1/applications/${shopA.applicationId}/campaigns?pageSize=5`)!;
      expect(list).toMatchObject({ status: 200, method: 'GET', requestPayload: '' });
      expect(JSON.parse(list.responsePayload).totalResultSize).toBe(1);
      // Application B's calls are not Application A's.
      expect(logs.data.some((e) => e.requestUri.includes(`/applications/${shopB.applicationId}/`))).toBe(false);

      // POST /v1/applications has no Application of its own: account-wide only.
      const account = unwrap(await accountLogs(t.admin, { path: '^/v1/applications$', method: 'POST' }));
      expect(account.data.map((e) => e.status)).toEqual([201, 201]);
      expect(logs.data.some((e) => e.requestUri === '/v1/applications')).toBe(false);
    });

    it('counts logged calls per account in accounts.api_call_count', async () => {
      const count = async (accountId: number) => {
        const [row] = await db().query<{ counted: string; logged: number }>(
          `SELECT api_call_count::text AS counted, (SELECT count(*)::int FROM access_logs WHERE account_id = $1) AS logged FROM accounts WHERE id = $1`,
          [accountId],
        );
        return { counted: Number(row!.counted), logged: row!.logged };
      };
      const [me] = await db().query<{ account_id: number }>(`SELECT account_id FROM applications WHERE id = $1`, [shopA.applicationId]);
      await settle();
      const before = await count(me!.account_id);
      expect(before.counted).toBe(before.logged);
      expect(before.counted).toBeGreaterThan(5);
      for (let i = 0; i < 3; i++) unwrap(await t.admin.GET('/v1/applications/{applicationId}', { params: { path: { applicationId: shopB.applicationId } } }));
      await settle();
      const after = await count(me!.account_id);
      expect(after.counted).toBe(after.logged);
      // The three reads and the marker request of settle().
      expect(after.counted).toBe(before.counted + 4);
      const other = await count(otherAccountId);
      expect(other.counted).toBe(other.logged);
      expect(other.counted).toBeGreaterThan(0);
    });

    it('never logs logins, and never stores a password, a bearer token or an API key', async () => {
      const { token: fresh } = await login({ baseUrl: t.url, email: 'reader@test.local', password: 'reader-password', retries: 0 });
      const wrong = await anonymous.POST('/v1/sessions', { body: { email: 'reader@test.local', password: 'not-the-password-xyz' } });
      expect(wrong.response.status).toBe(401);
      // Secrets sent as data (any case, nested) and a key shown once in a response.
      await shopA.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'log-secret' } },
        body: { customerSession: { ...cart([10]), attributes: { Password: 'attr-password-123', nested: { resetToken: 'reset-token-456', keep: 'visible' } } } as never },
      });
      const key = unwrap(
        await t.admin.POST('/v1/applications/{applicationId}/api_keys', {
          params: { path: { applicationId: shopB.applicationId } },
          body: { title: 'logged', expires: new Date(Date.now() + 3600_000).toISOString() },
        }),
      );
      const marker = unwrap(await t.admin.GET('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId: shopB.applicationId }, query: { skip: 7 } } }));
      expect(marker.data).toEqual([]);
      await eventually(
        () => db().query(`SELECT 1 FROM access_logs WHERE request_uri = $1`, [`/v1/applications/${shopB.applicationId}/campaigns?skip=7`]),
        (rows) => rows.length === 1,
        'the marker request',
      );

      const [logins] = await db().query<{ n: number }>(`SELECT count(*)::int AS n FROM access_logs WHERE path = '/v1/sessions' AND method = 'POST'`);
      expect(logins!.n).toBe(0);
      const [logout] = await db().query<{ n: number }>(`SELECT count(*)::int AS n FROM access_logs WHERE path LIKE '%sessions%' AND request_payload LIKE '%password%'`);
      expect(logout!.n).toBe(0);

      const secrets = [
        ADMIN_PASSWORD,
        'other-password',
        'reader-password',
        'not-the-password-xyz',
        'attr-password-123',
        'reset-token-456',
        key.key,
        shopA.apiKey,
        shopB.apiKey,
        strangerShop.apiKey,
        t.adminToken,
        strangerToken,
        readerToken,
        fresh,
      ];
      for (const secret of secrets) {
        const rows = await db().query(`SELECT id FROM access_logs l WHERE strpos(l::text, $1) > 0`, [secret]);
        expect(rows, `a log row holds ${secret.slice(0, 4)}…`).toEqual([]);
        expect(logLines.filter((line) => line.includes(secret))).toEqual([]);
      }
      const [stored] = await db().query<{ request_payload: string }>(`SELECT request_payload FROM access_logs WHERE request_uri = '/v2/customer_sessions/log-secret'`);
      expect(JSON.parse(stored!.request_payload).customerSession.attributes).toEqual({ Password: '[redacted]', nested: { resetToken: '[redacted]', keep: 'visible' } });
      const [created] = await db().query<{ response_payload: string }>(`SELECT response_payload FROM access_logs WHERE path = $1 AND method = 'POST' AND request_payload LIKE '%"logged"%'`, [
        `/v1/applications/${shopB.applicationId}/api_keys`,
      ]);
      expect(JSON.parse(created!.response_payload)).toMatchObject({ title: 'logged', key: '[redacted]' });
      // The node did log (so the search above looked at something).
      expect(logLines.some((line) => line.includes('node started'))).toBe(true);
    });
  });

  describe('user management', () => {
    it('never stores invite tokens or passwords of user management, and the account shows the calls counted', async () => {
      const invite = unwrap(await t.admin.POST('/v1/invites', { body: { email: 'invitee@test.local', name: 'Invitee', acl: { role: 'admin' } } }));
      const inviteToken = invite.inviteToken!;
      expect(inviteToken.length).toBeGreaterThan(10);
      const accepted = unwrap(
        await anonymous.POST('/v1/accept_invite', { body: { email: 'invitee@test.local', inviteToken, name: 'Invitee', password: 'invitee-password-1' } }),
      );
      const invitee = createManagementClient({ baseUrl: t.url, token: accepted.token, retries: 0 });
      const changed = await invitee.PUT('/v1/users/{userId}', {
        params: { path: { userId: accepted.userId } },
        body: { password: 'invitee-password-1', newPassword: 'invitee-password-2' },
      });
      expect(changed.response.status).toBe(200);
      await settle();

      // The password change is logged (it is an authenticated call), with its secrets redacted.
      const [change] = await db().query<{ request_payload: string }>(`SELECT request_payload FROM access_logs WHERE path = $1 AND method = 'PUT'`, [
        `/v1/users/${accepted.userId}`,
      ]);
      expect(JSON.parse(change!.request_payload)).toEqual({ password: '[redacted]', newPassword: '[redacted]' });
      const [invited] = await db().query<{ response_payload: string }>(`SELECT response_payload FROM access_logs WHERE path = '/v1/invites'`);
      expect(JSON.parse(invited!.response_payload)).toMatchObject({ email: 'invitee@test.local', inviteToken: '[redacted]' });
      for (const secret of [inviteToken, 'invitee-password-1', 'invitee-password-2', accepted.token]) {
        expect(await db().query(`SELECT id FROM access_logs l WHERE strpos(l::text, $1) > 0`, [secret])).toEqual([]);
        expect(logLines.filter((line) => line.includes(secret))).toEqual([]);
      }

      const [me] = await db().query<{ account_id: number }>(`SELECT account_id FROM applications WHERE id = $1`, [shopA.applicationId]);
      const counted = async () => Number((await db().query<{ n: string }>(`SELECT api_call_count::text AS n FROM accounts WHERE id = $1`, [me!.account_id]))[0]!.n);
      const before = await counted();
      const account = unwrap(await t.admin.GET('/v1/accounts/{accountId}', { params: { path: { accountId: me!.account_id } } }));
      expect(account.apiCallCount).toBeGreaterThanOrEqual(before);
      expect(account.apiCallCount).toBeLessThanOrEqual(await counted());
      expect(before).toBeGreaterThan(10);
    });
  });

  describe('reading access logs', () => {
    beforeAll(async () => {
      // A refused call (400) and a few more reads, so that filters have something to tell apart.
      const bad = await shopA.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'log-bad' } },
        body: { customerSession: { cartItems: [{ sku: 'x', quantity: 0, price: 1 }] } as never },
      });
      expect(bad.response.status).toBe(400);
      for (const id of ['log-2', 'log-3']) {
        await shopA.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: id } }, body: { customerSession: cart([20]) as never } });
      }
      await eventually(
        async () => unwrap(await appLogs(t.admin, shopA.applicationId, { path: '^/v2/customer_sessions/log-3$' })).data,
        (d) => d.length === 1,
        'log-3',
      );
    });

    it('filters by path and method regular expressions and by status', async () => {
      const v2 = unwrap(await appLogs(t.admin, shopA.applicationId, { path: '^/v2/customer_sessions/log-[0-9]+$' }));
      expect(v2.data.map((e) => e.requestUri).sort()).toEqual(['/v2/customer_sessions/log-1', '/v2/customer_sessions/log-2', '/v2/customer_sessions/log-3']);
      expect(v2.totalResultSize).toBe(3);
      const gets = unwrap(await appLogs(t.admin, shopA.applicationId, { method: '^GET$' }));
      expect(gets.data.length).toBeGreaterThan(0);
      expect(new Set(gets.data.map((e) => e.method))).toEqual(new Set(['GET']));
      const errors = unwrap(await appLogs(t.admin, shopA.applicationId, { status: 'error', path: '^/v2/' }));
      expect(errors.data.map((e) => [e.requestUri, e.status])).toEqual([['/v2/customer_sessions/log-bad', 400]]);
      expect(JSON.parse(errors.data[0]!.responsePayload)).toMatchObject({ StatusCode: 400 });
      const success = unwrap(await appLogs(t.admin, shopA.applicationId, { status: 'success', path: 'log-bad' }));
      expect(success.data).toEqual([]);
      const neither = unwrap(await appLogs(t.admin, shopA.applicationId, { method: '^DELETE$' }));
      expect(neither).toEqual({ totalResultSize: 0, data: [] });
    });

    it('returns only entries within the range', async () => {
      const all = unwrap(await appLogs(t.admin, shopA.applicationId, { path: 'log-[123]$' }));
      const times = all.data.map((e) => e.time).sort();
      const inner = unwrap(await appLogs(t.admin, shopA.applicationId, { path: 'log-[123]$', rangeStart: times[1], rangeEnd: times[1] }));
      expect(inner.data.map((e) => e.time)).toEqual([times[1]]);
      const before = unwrap(await appLogs(t.admin, shopA.applicationId, { rangeStart: '2020-01-01T00:00:00Z', rangeEnd: '2020-01-02T00:00:00Z' }));
      expect(before).toEqual({ totalResultSize: 0, data: [] });
    });

    it('pages newest first by default, with the total or hasMore', async () => {
      const q = { path: '^/v2/customer_sessions/log-' };
      const all = unwrap(await appLogs(t.admin, shopA.applicationId, q));
      expect(all.totalResultSize).toBe(5);
      const times = all.data.map((e) => Date.parse(e.time));
      expect(times).toEqual([...times].sort((a, b) => b - a));
      expect(all.data.at(-1)!.requestUri).toBe('/v2/customer_sessions/log-1');
      const page1 = unwrap(await appLogs(t.admin, shopA.applicationId, { ...q, pageSize: 2 }));
      const page3 = unwrap(await appLogs(t.admin, shopA.applicationId, { ...q, pageSize: 2, skip: 4 }));
      expect(page1).toEqual({ totalResultSize: 5, data: all.data.slice(0, 2) });
      expect(page3).toEqual({ totalResultSize: 5, data: all.data.slice(4) });
      const oldest = unwrap(await appLogs(t.admin, shopA.applicationId, { ...q, sort: 'time', pageSize: 1 }));
      expect(oldest.data[0]!.requestUri).toBe('/v2/customer_sessions/log-1');

      const noTotal = (query: Record<string, unknown>) =>
        t.admin.GET('/v1/applications/{applicationId}/access_logs/no_total', {
          params: { path: { applicationId: shopA.applicationId }, query: { rangeStart, rangeEnd: rangeEnd(), ...q, ...query } as never },
        });
      expect(unwrap(await noTotal({ pageSize: 2 }))).toEqual({ hasMore: true, data: all.data.slice(0, 2) });
      expect(unwrap(await noTotal({ pageSize: 2, skip: 3 }))).toEqual({ hasMore: false, data: all.data.slice(3) });
      const badSort = await noTotal({ sort: 'uuid' });
      expect(badSort.response.status).toBe(400);
      expect(pointers(badSort.error)).toEqual(['/query/sort']);
    });

    it('refuses a missing range, a reversed range and invalid regular expressions with pointers', async () => {
      const noStart = await t.admin.GET('/v1/applications/{applicationId}/access_logs', {
        params: { path: { applicationId: shopA.applicationId }, query: { rangeEnd: rangeEnd() } as never },
      });
      expect(noStart.response.status).toBe(400);
      expect(noStart.error).toMatchObject({ StatusCode: 400, message: expect.any(String) });
      expect(pointers(noStart.error)).toEqual(['/query/rangeStart']);
      const noRange = await t.admin.GET('/v1/access_logs', { params: { query: {} as never } });
      expect(pointers(noRange.error)).toEqual(['/query/rangeStart', '/query/rangeEnd']);
      const notADate = await accountLogs(t.admin, { rangeEnd: 'yesterday' });
      expect(pointers(notADate.error)).toEqual(['/query/rangeEnd']);
      const reversed = await appLogs(t.admin, shopA.applicationId, { rangeEnd: '2020-01-01T00:00:00Z' });
      expect(reversed.response.status).toBe(400);
      expect(pointers(reversed.error)).toEqual(['/query/rangeEnd']);
      const badPath = await appLogs(t.admin, shopA.applicationId, { path: '(unclosed' });
      expect(badPath.response.status).toBe(400);
      expect(pointers(badPath.error)).toEqual(['/query/path']);
      const badMethod = await accountLogs(t.admin, { method: '[' });
      expect(badMethod.response.status).toBe(400);
      expect(pointers(badMethod.error)).toEqual(['/query/method']);
      const badStatus = await appLogs(t.admin, shopA.applicationId, { status: 'fine' });
      expect(pointers(badStatus.error)).toEqual(['/query/status']);
    });

    it('refuses calls without a token', async () => {
      for (const r of [
        await appLogs(anonymous, shopA.applicationId),
        await anonymous.GET('/v1/applications/{applicationId}/access_logs/no_total', {
          params: { path: { applicationId: shopA.applicationId }, query: { rangeStart, rangeEnd: rangeEnd() } },
        }),
        await accountLogs(anonymous),
        await webhookLogs(anonymous),
      ]) {
        expect(r.response.status).toBe(401);
        expect(pointers(r.error as Err)).toEqual(['/headers/authorization']);
      }
    });

    it("hides another account's logs and Applications a user may not read", async () => {
      for (const r of [
        await appLogs(stranger, shopA.applicationId),
        await stranger.GET('/v1/applications/{applicationId}/access_logs/no_total', {
          params: { path: { applicationId: shopA.applicationId }, query: { rangeStart, rangeEnd: rangeEnd() } },
        }),
        await appLogs(reader, shopB.applicationId),
        await appLogs(t.admin, strangerShop.applicationId),
      ]) {
        expect(r.response.status).toBe(404);
        expect(JSON.stringify(r.error)).not.toContain('customer_sessions');
        expect(r.data).toBeUndefined();
      }
      // The stranger's account-wide view has its own calls and none of ours.
      const theirs = unwrap(await accountLogs(stranger));
      expect(theirs.totalResultSize).toBeGreaterThan(0);
      expect(theirs.data.some((e) => e.requestUri === `/v1/applications/${strangerShop.applicationId}/api_keys`)).toBe(true);
      expect(theirs.data.some((e) => e.requestUri.startsWith('/v2/') || e.requestPayload.includes('log-') || e.responsePayload.includes('log-'))).toBe(false);
      // Their own refused attempts at Application A are theirs to see, and refused.
      expect(theirs.data.filter((e) => e.requestUri.includes(`/applications/${shopA.applicationId}/`)).every((e) => e.status === 404)).toBe(true);
      // The reader sees Application A's entries in the account view, nothing of B or the account.
      await settle();
      const readable = unwrap(await accountLogs(reader));
      expect(readable.totalResultSize).toBe(unwrap(await appLogs(t.admin, shopA.applicationId)).totalResultSize);
      expect(readable.data.some((e) => e.requestUri === '/v2/customer_sessions/log-1')).toBe(true);
      expect(readable.data.some((e) => e.requestUri === '/v1/applications' || e.requestUri.includes(`/applications/${shopB.applicationId}`))).toBe(false);
      // The reader's own application reads are logged under A and visible to them.
      expect(unwrap(await appLogs(reader, shopA.applicationId, { path: 'log-1' })).data.map((e) => e.requestUri)).toEqual(['/v2/customer_sessions/log-1']);
    });
  });

  describe('webhook logs', () => {
    const ids: Record<string, number> = {};
    beforeAll(async () => {
      const insert = async (name: string, applicationId: number, row: Record<string, unknown>) => {
        const [r] = await db().query<{ id: string }>(
          `INSERT INTO webhook_logs (application_id, webhook_id, campaign_id, integration_request_uuid, request, request_time, response, response_time, status, url, attempt)
           VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9, $10, $11) RETURNING id`,
          [
            applicationId,
            row.webhookId,
            row.campaignId ?? null,
            row.uuid ?? '',
            JSON.stringify({ url: 'https://hooks.example/x', method: 'POST', headers: { 'Content-Type': 'application/json' }, body: `{"n":"${name}"}` }),
            row.at,
            row.response ?? '',
            row.status === null ? null : row.at,
            row.status,
            'https://hooks.example/x',
            row.attempt ?? 1,
          ],
        );
        ids[name] = Number(r!.id);
      };
      await insert('ok', shopA.applicationId, { webhookId: 1, campaignId: shopA.campaignId, uuid: 'req-1', at: '2026-01-01T10:00:00Z', status: 200, response: 'fine' });
      await insert('failed', shopA.applicationId, { webhookId: 1, campaignId: shopA.campaignId, uuid: 'req-2', at: '2026-01-02T10:00:00Z', status: 500, response: 'boom' });
      await insert('unreachable', shopA.applicationId, { webhookId: 2, uuid: 'req-2', at: '2026-01-03T10:00:00Z', status: null, attempt: 2 });
      await insert('otherApp', shopB.applicationId, { webhookId: 3, campaignId: shopB.campaignId, uuid: 'req-3', at: '2026-01-04T10:00:00Z', status: 204 });
      await insert('otherAccount', strangerShop.applicationId, { webhookId: 4, uuid: 'req-1', at: '2026-01-05T10:00:00Z', status: 200 });
    });
    const names = (data: Array<{ id: number }>) => data.map((e) => Object.keys(ids).find((k) => ids[k] === e.id));

    it('lists the attempts of the readable Applications, newest first, with their fields', async () => {
      const all = unwrap(await webhookLogs(t.admin));
      expect(names(all.data)).toEqual(['otherApp', 'unreachable', 'failed', 'ok']);
      expect(all.totalResultSize).toBe(4);
      expect(all.data[3]).toEqual({
        id: ids.ok,
        applicationId: shopA.applicationId,
        webhookId: 1,
        campaignId: shopA.campaignId,
        integrationRequestUuid: 'req-1',
        request: { url: 'https://hooks.example/x', method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"n":"ok"}' },
        requestTime: '2026-01-01T10:00:00.000Z',
        response: 'fine',
        responseTime: '2026-01-01T10:00:00.000Z',
        status: 200,
        url: 'https://hooks.example/x',
        attempt: 1,
      });
      expect(all.data[1]).toMatchObject({ status: null, attempt: 2, response: '' });
      expect(all.data[1]!.responseTime).toBeUndefined();
      const paged = unwrap(await webhookLogs(t.admin, { pageSize: 1, skip: 1, sort: 'requestTime' }));
      expect(names(paged.data)).toEqual(['failed']);
      expect(paged.totalResultSize).toBe(4);
    });

    it('filters by webhook, Application, campaign, request, status and time', async () => {
      const f = async (query: Record<string, unknown>) => names(unwrap(await webhookLogs(t.admin, query)).data);
      expect(await f({ webhookId: 1 })).toEqual(['failed', 'ok']);
      expect(await f({ webhookId: 4 })).toEqual([]);
      expect(await f({ applicationId: shopB.applicationId })).toEqual(['otherApp']);
      expect(await f({ campaignId: shopA.campaignId })).toEqual(['failed', 'ok']);
      expect(await f({ requestUuid: 'req-2' })).toEqual(['unreachable', 'failed']);
      expect(await f({ requestUuid: 'req-9' })).toEqual([]);
      expect(await f({ status: 'success' })).toEqual(['otherApp', 'ok']);
      expect(await f({ status: 'error' })).toEqual(['unreachable', 'failed']);
      expect(await f({ createdAfter: '2026-01-01T10:00:00Z', createdBefore: '2026-01-04T10:00:00Z' })).toEqual(['unreachable', 'failed']);
      expect(await f({ applicationId: shopA.applicationId, status: 'error', webhookId: 2 })).toEqual(['unreachable']);
    });

    it('refuses bad filters with pointers', async () => {
      for (const [query, pointer] of [
        [{ status: 'ok' }, '/query/status'],
        [{ webhookId: 'one' }, '/query/webhookId'],
        [{ createdBefore: 'monday' }, '/query/createdBefore'],
        [{ sort: 'url' }, '/query/sort'],
      ] as const) {
        const r = await webhookLogs(t.admin, query);
        expect(r.response.status).toBe(400);
        expect(r.error?.StatusCode).toBe(400);
        expect(pointers(r.error)).toEqual([pointer]);
      }
    });

    it("never shows another account's attempts or an Application the user may not read", async () => {
      expect(names(unwrap(await webhookLogs(stranger)).data)).toEqual(['otherAccount']);
      const theirs = await webhookLogs(stranger, { applicationId: shopA.applicationId });
      expect(theirs.response.status).toBe(404);
      expect(pointers(theirs.error)).toEqual(['/applicationId']);
      expect(JSON.stringify(theirs.error)).not.toContain('hooks.example');
      expect(names(unwrap(await webhookLogs(reader)).data)).toEqual(['unreachable', 'failed', 'ok']);
      expect((await webhookLogs(reader, { applicationId: shopB.applicationId })).response.status).toBe(404);
      expect((await webhookLogs(t.admin, { applicationId: strangerShop.applicationId })).response.status).toBe(404);
    });
  });

  describe('the writer', () => {
    const entry = (n: number, extra: Partial<AccessLogEntry> = {}): AccessLogEntry => ({
      uuid: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
      accountId: 1,
      time: new Date(),
      status: 200,
      method: 'GET',
      path: `/x/${n}`,
      requestUri: `/x/${n}`,
      ...extra,
    });
    /** A database that records what it is given, and can be held up. */
    const fakeDb = () => {
      const batches: Array<Array<{ u: string; q: string; o: string }>> = [];
      let release: () => void = () => undefined;
      let blocked: Promise<void> | undefined;
      const db: Queryable = {
        query: async (_text, params) => {
          if (blocked) await blocked;
          // Ten parameters a row (uuid, account, Application, time, status, method, path, URI,
          // request and response payloads), rows of NULLs after the last entry.
          const rows: Array<{ u: string; q: string; o: string }> = [];
          for (let i = 0; i < params!.length; i += 10) {
            if (params![i] !== null) rows.push({ u: params![i] as string, q: params![i + 8] as string, o: params![i + 9] as string });
          }
          batches.push(rows);
          return [];
        },
        exec: async () => undefined,
      };
      return {
        db,
        batches,
        block: () => (blocked = new Promise<void>((r) => (release = r))),
        release: () => {
          blocked = undefined;
          release();
        },
      };
    };

    it('drops the oldest entries beyond its cap instead of waiting, and counts them', async () => {
      const fake = fakeDb();
      fake.block();
      const warnings: string[] = [];
      const writer = new AccessLogWriter({ db: fake.db, logger: createLogger({ level: 'warn', write: (l) => warnings.push(l) }), batchSize: 2, maxQueued: 3, flushIntervalMs: 10 });
      writer.write(entry(1));
      writer.write(entry(2));
      // The first batch (1, 2) is now stuck in the database; 3..7 queue behind it, capped at 3.
      await new Promise((r) => setTimeout(r, 30));
      const started = Date.now();
      for (let n = 3; n <= 7; n++) writer.write(entry(n));
      expect(Date.now() - started).toBeLessThan(50);
      expect(writer.stats()).toEqual({ queued: 3, written: 0, dropped: 2 });
      fake.release();
      await writer.close();
      expect(fake.batches.flat().map((r) => Number(r.u.slice(-12)))).toEqual([1, 2, 5, 6, 7]);
      expect(writer.stats()).toEqual({ queued: 0, written: 5, dropped: 2 });
      expect(warnings.some((w) => w.includes('"dropped":2'))).toBe(true);
    });

    it('also bounds the payload bytes it holds', async () => {
      const fake = fakeDb();
      const writer = new AccessLogWriter({ db: fake.db, logger: createLogger({ level: 'silent' }), batchSize: 1000, maxQueuedBytes: 100, flushIntervalMs: 60_000 });
      for (let n = 1; n <= 5; n++) writer.write(entry(n, { requestPayload: 'x'.repeat(30) }));
      expect(writer.stats()).toEqual({ queued: 3, written: 0, dropped: 2 });
      await writer.close();
      expect(fake.batches.flat().map((r) => Number(r.u.slice(-12)))).toEqual([3, 4, 5]);
    });

    it('stores every payload as it came while flushes, drops and new entries share its byte blocks', async () => {
      const fake = fakeDb();
      // Flushes run on their own timer while entries keep coming; the queue cap drops some.
      const writer = new AccessLogWriter({ db: fake.db, logger: createLogger({ level: 'silent' }), batchSize: 40, maxQueued: 100, flushIntervalMs: 1, maxPayloadChars: 2_000_000 });
      const expected = new Map<string, { q: string; o: string }>();
      let n = 0;
      const add = (request: Buffer | string | undefined, response: string | undefined) => {
        const e = entry(++n, { requestPayload: request, responsePayload: response });
        expected.set(e.uuid, {
          q: request === undefined ? '' : typeof request === 'string' ? request : request.toString('utf8'),
          o: response ?? '',
        });
        writer.write(e);
      };
      for (let round = 0; round < 12; round++) {
        // Several 1 MiB blocks' worth a round: multi-byte text, bodies as bytes, empty and missing payloads.
        for (let k = 0; k < 60 + round * 7; k++) {
          const text = `{"n":${n},"note":"${'é€😀'.repeat(200 + ((n * 37) % 900))}"}`;
          add(k % 3 === 0 ? Buffer.from(text) : k % 3 === 1 ? text : undefined, k % 5 === 0 ? '' : `{"ok":${n},"pad":"${'x'.repeat((n * 131) % 7000)}"}`);
        }
        // A payload larger than a block gets a block of its own.
        if (round % 4 === 0) add(undefined, `{"big":"${'y'.repeat(1_500_000)}"}`);
        if (round % 3 === 0) fake.block();
        await new Promise((r) => setTimeout(r, 3));
        fake.release();
        await new Promise((r) => setTimeout(r, round % 2 === 0 ? 0 : 5));
      }
      await writer.close();
      const rows = fake.batches.flat();
      const { written, dropped, queued } = writer.stats();
      expect(queued).toBe(0);
      expect(written + dropped).toBe(n);
      expect(rows.length).toBe(written);
      expect(dropped).toBeGreaterThan(0);
      expect(written).toBeGreaterThan(400);
      for (const row of rows) expect(row, row.u).toEqual({ u: row.u, ...expected.get(row.u)! });
      expect(rows.some((r) => r.o.length > 1_000_000)).toBe(true);
    });

    it('never writes over the bytes of an entry still queued when the oldest are dropped', async () => {
      const fake = fakeDb();
      const writer = new AccessLogWriter({ db: fake.db, logger: createLogger({ level: 'silent' }), batchSize: 1000, maxQueued: 12, flushIntervalMs: 60_000, maxPayloadChars: 1_000_000 });
      // 200 kB bodies: five to a 1 MiB block. 1-3 are dropped by the time 16 (900 kB) needs a new
      // block, while 4 and 5 still share their block.
      const body = (n: number) => Buffer.from(`{"n":${n},"pad":"${String(n % 10).repeat((n === 16 ? 900_000 : 200_000) - 20)}"}`);
      for (let n = 1; n <= 16; n++) writer.write(entry(n, { requestPayload: body(n) }));
      expect(writer.stats()).toEqual({ queued: 12, written: 0, dropped: 4 });
      await writer.close();
      const rows = fake.batches.flat();
      expect(rows.map((r) => Number(r.u.slice(-12)))).toEqual([5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
      for (const r of rows) expect(r.q === body(Number(r.u.slice(-12))).toString(), r.u).toBe(true);
    });

    it('writes what is queued when closed, and caps and redacts payloads', async () => {
      const fake = fakeDb();
      const writer = new AccessLogWriter({ db: fake.db, logger: createLogger({ level: 'silent' }), flushIntervalMs: 60_000, maxPayloadChars: 40 });
      const long = JSON.stringify({ note: 'a'.repeat(10), Secret: 'cut-secret-value-here', more: 'b'.repeat(50) });
      writer.write(entry(1, { requestPayload: Buffer.from(long), responsePayload: '{"token":"t-1","ok":true}' }));
      writer.write(entry(2, { requestPayload: Buffer.from('not json "key": "k-2", rest') }));
      expect(fake.batches).toEqual([]);
      await writer.close();
      const [first, second] = fake.batches.flat();
      expect(long.length).toBe(114);
      expect(first!.q).toBe('{"note":"aaaaaaaaaa","Secret":"[redacted]"…[truncated; 114 bytes in all]');
      expect(first!.q).not.toContain('cut-secret');
      expect(first!.o).toBe('{"token":"[redacted]","ok":true}');
      expect(second!.q).toBe('not json "key": "[redacted]", rest');
    });

    it('redacts sensitive properties at any depth and in any case, and leaves other payloads as they are', () => {
      expect(redactPayload('{"a":[{"PASSWORD":"p","inviteToken":{"x":1}}],"signingSecret":"s","keys":["k"],"b":"token"}')).toBe(
        '{"a":[{"PASSWORD":"[redacted]","inviteToken":"[redacted]"}],"signingSecret":"[redacted]","keys":["k"],"b":"token"}',
      );
      expect(redactPayload('{"pass\\u0077ord":"p"}')).toBe('{"password":"[redacted]"}');
      const plain = '{ "name" : "x",  "n": 1 }';
      expect(redactPayload(plain)).toBe(plain);
      expect(redactPayload('{"x":1,"newPassword":{"deep":"v"')).toBe('{"x":1,"newPassword":"[redacted]" [rest withheld]');
    });
  });
});
