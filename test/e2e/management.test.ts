import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManagementClient, login, unwrap, type ManagementClient } from '../../sdk/index.js';
import { hashPassword } from '../../services/management/passwords.js';
import { newApplication, newCampaign, tenPercentOver100 } from '../helpers/fixtures.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, startTestNode, type TestNode } from '../helpers/node.js';

type Err = { StatusCode: number; errors: Array<{ source?: { pointer?: string } }> } | undefined;
const pointers = (e: Err) => (e?.errors ?? []).map((x) => x.source?.pointer);

describe('Management API', () => {
  let t: TestNode;
  let stranger: ManagementClient;
  let anonymous: ManagementClient;

  beforeAll(async () => {
    t = await startTestNode('pglite');
    // A second account with its own admin: it must never see the first account's data.
    const [account] = await t.node.db.query<{ id: number }>(`INSERT INTO accounts (company_name) VALUES ('Other') RETURNING id`);
    await t.node.db.query(
      `INSERT INTO users (account_id, email, name, password_hash, policy) VALUES ($1, 'other@test.local', 'Other', $2, '{"role":"admin"}'::jsonb)`,
      [account!.id, await hashPassword('other-password')],
    );
    stranger = (await login({ baseUrl: t.url, email: 'other@test.local', password: 'other-password', retries: 0 })).client;
    anonymous = createManagementClient({ baseUrl: t.url, retries: 0 });
  });
  afterAll(async () => {
    await t?.stop();
  });

  describe('sessions (login)', () => {
    it('logs in, and refuses a wrong password or a missing field', async () => {
      const ok = await anonymous.POST('/v1/sessions', { body: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
      expect(ok.response.status).toBe(201);
      expect(ok.data).toMatchObject({ token: expect.any(String), userId: expect.any(Number), created: expect.any(String) });
      const wrong = await anonymous.POST('/v1/sessions', { body: { email: ADMIN_EMAIL, password: 'nope' } });
      expect(wrong.response.status).toBe(401);
      expect(pointers(wrong.error)).toContain('/password');
      const missing = await anonymous.POST('/v1/sessions', { body: { email: ADMIN_EMAIL } as never });
      expect(missing.response.status).toBe(400);
      expect(pointers(missing.error)).toContain('/password');
    });

    it('revokes a token at once on logout', async () => {
      const { client } = await login({ baseUrl: t.url, email: ADMIN_EMAIL, password: ADMIN_PASSWORD, retries: 0 });
      expect((await client.GET('/v1/applications')).response.status).toBe(200);
      expect((await client.DELETE('/v1/sessions')).response.status).toBe(204);
      const after = await client.GET('/v1/applications');
      expect(after.response.status).toBe(401);
      expect(pointers(after.error)).toContain('/headers/authorization');
    });

    it('refuses calls without a token', async () => {
      const r = await anonymous.GET('/v1/applications');
      expect(r.response.status).toBe(401);
      expect(r.error?.StatusCode).toBe(401);
    });
  });

  describe('applications', () => {
    it('creates, lists, gets, updates and deletes an Application', async () => {
      const created = unwrap(await t.admin.POST('/v1/applications', { body: newApplication({ name: 'CRUD', attributes: { region: 'eu' } }) as never }));
      expect(created).toMatchObject({ name: 'CRUD', currency: 'EUR', timezone: 'Europe/Berlin', campaignPriority: 'universal', exclusiveCampaignsStrategy: 'listOrder', caseSensitivity: 'sensitive', attributes: { region: 'eu' } });
      const list = unwrap(await t.admin.GET('/v1/applications', { params: { query: { sort: '-id', pageSize: 1 } } }));
      expect(list.data.map((a) => a.id)).toEqual([created.id]);
      expect(list.totalResultSize).toBeGreaterThanOrEqual(1);
      const got = unwrap(await t.admin.GET('/v1/applications/{applicationId}', { params: { path: { applicationId: created.id } } }));
      expect(got).toEqual(created);
      const updated = unwrap(
        await t.admin.PUT('/v1/applications/{applicationId}', {
          params: { path: { applicationId: created.id } },
          body: { name: 'CRUD 2', timezone: 'UTC', currency: 'JPY', campaignPriority: 'exclusive' },
        }),
      );
      expect(updated).toMatchObject({ name: 'CRUD 2', timezone: 'UTC', currency: 'JPY', campaignPriority: 'exclusive', attributes: { region: 'eu' } });
      expect((await t.admin.DELETE('/v1/applications/{applicationId}', { params: { path: { applicationId: created.id } } })).response.status).toBe(204);
      expect((await t.admin.GET('/v1/applications/{applicationId}', { params: { path: { applicationId: created.id } } })).response.status).toBe(404);
    });

    it('refuses bad input with pointers', async () => {
      const noName = await t.admin.POST('/v1/applications', { body: { timezone: 'UTC', currency: 'EUR' } as never });
      expect(noName.response.status).toBe(400);
      expect(pointers(noName.error)).toContain('/name');
      const badTz = await t.admin.POST('/v1/applications', { body: newApplication({ timezone: 'Mars/Olympus' }) as never });
      expect(pointers(badTz.error)).toContain('/timezone');
      const badPriority = await t.admin.POST('/v1/applications', { body: newApplication({ campaignPriority: 'loudest' }) as never });
      expect(pointers(badPriority.error)).toContain('/campaignPriority');
      const badSort = await t.admin.GET('/v1/applications', { params: { query: { sort: 'password' } } });
      expect(badSort.response.status).toBe(400);
      expect(pointers(badSort.error)).toContain('/query/sort');
      const badPage = await t.admin.GET('/v1/applications', { params: { query: { pageSize: 0 } } });
      expect(pointers(badPage.error)).toContain('/query/pageSize');
      const badId = await fetch(`${t.url}/v1/applications/abc`, { headers: { Authorization: `Bearer ${t.adminToken}` } });
      expect(badId.status).toBe(400);
      expect(pointers((await badId.json()) as Err)).toContain('/path/applicationId');
    });

    it("never shows another account's Application", async () => {
      const mine = unwrap(await t.admin.POST('/v1/applications', { body: newApplication({ name: 'Mine' }) as never }));
      const path = { params: { path: { applicationId: mine.id } } };
      expect((await stranger.GET('/v1/applications/{applicationId}', path)).response.status).toBe(404);
      expect((await stranger.PUT('/v1/applications/{applicationId}', { ...path, body: newApplication() as never })).response.status).toBe(404);
      expect((await stranger.DELETE('/v1/applications/{applicationId}', path)).response.status).toBe(404);
      const theirs = unwrap(await stranger.GET('/v1/applications'));
      expect(theirs.data.map((a) => a.id)).not.toContain(mine.id);
      expect(unwrap(await t.admin.GET('/v1/applications/{applicationId}', path)).name).toBe('Mine');
    });
  });

  describe('campaigns and rulesets', () => {
    let applicationId: number;
    beforeAll(async () => {
      applicationId = unwrap(await t.admin.POST('/v1/applications', { body: newApplication({ name: 'Campaigns' }) as never })).id;
    });

    it('creates, lists, gets, updates and deletes a campaign', async () => {
      const app = { applicationId };
      const c = unwrap(await t.admin.POST('/v1/applications/{applicationId}/campaigns', { params: { path: app }, body: newCampaign({ attributes: { x: 1 } }) as never }));
      expect(c).toMatchObject({ applicationId, name: 'Autumn sale', state: 'enabled', tags: ['autumn'], couponRedemptionCount: 0, createdBy: 'Admin' });
      const list = unwrap(await t.admin.GET('/v1/applications/{applicationId}/campaigns', { params: { path: app } }));
      expect(list.data.map((x) => x.id)).toContain(c.id);
      const path = { ...app, campaignId: c.id };
      expect(unwrap(await t.admin.GET('/v1/applications/{applicationId}/campaigns/{campaignId}', { params: { path } }))).toEqual(c);
      const u = unwrap(await t.admin.PUT('/v1/applications/{applicationId}/campaigns/{campaignId}', { params: { path }, body: { name: 'Renamed', state: 'disabled' } }));
      expect(u).toMatchObject({ name: 'Renamed', state: 'disabled', attributes: { x: 1 } });
      expect((await t.admin.DELETE('/v1/applications/{applicationId}/campaigns/{campaignId}', { params: { path } })).response.status).toBe(204);
      expect((await t.admin.GET('/v1/applications/{applicationId}/campaigns/{campaignId}', { params: { path } })).response.status).toBe(404);
    });

    it('refuses bad campaigns', async () => {
      const app = { applicationId };
      const noTags = await t.admin.POST('/v1/applications/{applicationId}/campaigns', { params: { path: app }, body: { name: 'x', state: 'enabled', features: [], limits: [] } as never });
      expect(noTags.response.status).toBe(400);
      expect(pointers(noTags.error)).toContain('/tags');
      const window = await t.admin.POST('/v1/applications/{applicationId}/campaigns', {
        params: { path: app },
        body: newCampaign({ startTime: '2026-05-01T00:00:00Z', endTime: '2026-04-01T00:00:00Z' }) as never,
      });
      expect(pointers(window.error)).toContain('/endTime');
      const missing = await t.admin.GET('/v1/applications/{applicationId}/campaigns/{campaignId}', { params: { path: { applicationId, campaignId: 999999 } } });
      expect(missing.response.status).toBe(404);
    });

    it('creates, activates, lists and gets rulesets, refusing one that does not compile', async () => {
      const c = unwrap(await t.admin.POST('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId } }, body: newCampaign() as never }));
      const path = { applicationId, campaignId: c.id };
      const r = unwrap(await t.admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets', { params: { path }, body: tenPercentOver100() as never }));
      expect(r).toMatchObject({ campaignId: c.id, activate: true, activatedAt: expect.any(String), rules: tenPercentOver100().rules });
      const campaign = unwrap(await t.admin.GET('/v1/applications/{applicationId}/campaigns/{campaignId}', { params: { path } }));
      expect(campaign.activeRulesetId).toBe(r.id);
      const list = unwrap(await t.admin.GET('/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets', { params: { path } }));
      expect(list).toMatchObject({ totalResultSize: 1, data: [{ id: r.id }] });
      const got = unwrap(await t.admin.GET('/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets/{rulesetId}', { params: { path: { ...path, rulesetId: r.id } } }));
      expect(got).toEqual(r);

      const bad = await t.admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets', {
        params: { path },
        body: { rules: [{ title: 'ok', condition: true, effects: [] }, { title: 'bad', condition: ['frobnicate', 1], effects: [] }], bindings: [] },
      });
      expect(bad.response.status).toBe(400);
      expect(pointers(bad.error).some((p) => p?.startsWith('/rules/1/condition'))).toBe(true);
      const noRules = await t.admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets', { params: { path }, body: { bindings: [] } as never });
      expect(pointers(noRules.error)).toContain('/rules');
      const none = await t.admin.GET('/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets/{rulesetId}', { params: { path: { ...path, rulesetId: 999999 } } });
      expect(none.response.status).toBe(404);
    });

    it("never shows another account's campaigns or rulesets", async () => {
      const c = unwrap(await t.admin.POST('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId } }, body: newCampaign() as never }));
      const path = { applicationId, campaignId: c.id };
      expect((await stranger.GET('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId } } })).response.status).toBe(404);
      expect((await stranger.GET('/v1/applications/{applicationId}/campaigns/{campaignId}', { params: { path } })).response.status).toBe(404);
      expect((await stranger.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets', { params: { path }, body: tenPercentOver100() as never })).response.status).toBe(404);
      expect((await stranger.GET('/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets', { params: { path } })).response.status).toBe(404);
      expect((await stranger.DELETE('/v1/applications/{applicationId}/campaigns/{campaignId}', { params: { path } })).response.status).toBe(404);
    });
  });

  describe('api keys', () => {
    it('shows a key once, lists keys without it, and deletes one', async () => {
      const applicationId = unwrap(await t.admin.POST('/v1/applications', { body: newApplication({ name: 'Keys' }) as never })).id;
      const path = { applicationId };
      const expires = new Date(Date.now() + 3600_000).toISOString();
      const k = unwrap(await t.admin.POST('/v1/applications/{applicationId}/api_keys', { params: { path }, body: { title: 'pos', expires } }));
      expect(k).toMatchObject({ title: 'pos', key: expect.any(String), id: expect.any(Number) });
      const list = unwrap(await t.admin.GET('/v1/applications/{applicationId}/api_keys', { params: { path } }));
      expect(list.data).toEqual([expect.objectContaining({ id: k.id, title: 'pos' })]);
      expect(JSON.stringify(list)).not.toContain(k.key);
      const stored = await t.node.db.query<{ key_hash: string }>(`SELECT key_hash FROM api_keys WHERE id = $1`, [k.id]);
      expect(stored[0]!.key_hash).not.toContain(k.key);

      const past = await t.admin.POST('/v1/applications/{applicationId}/api_keys', { params: { path }, body: { title: 'old', expires: '2020-01-01T00:00:00Z' } });
      expect(pointers(past.error)).toContain('/expires');
      const noTitle = await t.admin.POST('/v1/applications/{applicationId}/api_keys', { params: { path }, body: { expires } as never });
      expect(pointers(noTitle.error)).toContain('/title');

      expect((await stranger.GET('/v1/applications/{applicationId}/api_keys', { params: { path } })).response.status).toBe(404);
      expect((await stranger.DELETE('/v1/applications/{applicationId}/api_keys/{keyId}', { params: { path: { applicationId, keyId: k.id } } })).response.status).toBe(404);

      expect((await t.admin.DELETE('/v1/applications/{applicationId}/api_keys/{keyId}', { params: { path: { applicationId, keyId: k.id } } })).response.status).toBe(204);
      expect((await t.admin.DELETE('/v1/applications/{applicationId}/api_keys/{keyId}', { params: { path: { applicationId, keyId: k.id } } })).response.status).toBe(404);
    });
  });
});
