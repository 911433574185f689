import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManagementClient, unwrap, type ManagementClient } from '../../sdk/index.js';
import { newApplication } from '../helpers/fixtures.js';
import { otherAccountAdmin, policyUser } from '../helpers/management-users.js';
import { setupShop, startTestNode, type TestNode } from '../helpers/node.js';

type Err = { StatusCode: number; errors: Array<{ title: string; source?: { pointer?: string } }> } | undefined;
const pointers = (e: Err) => (e?.errors ?? []).map((x) => x.source?.pointer);

const newWebhook = (applicationIds: number[], overrides: Record<string, unknown> = {}) => ({
  applicationIds,
  title: 'Order shipped',
  verb: 'POST' as const,
  url: 'https://hooks.example.com/orders/${$orderId}',
  headers: ['Content-Type: application/json', 'X-Token: abc'],
  params: [
    { title: 'orderId', type: 'string' as const, description: 'the order', ui: {} },
    { title: 'amount', type: 'number' as const },
  ],
  payload: '{"order": "${$orderId}", "amount": ${$amount}, "tier": "${$Profile.Attributes.tier}", "code": "${$Campaign.Attributes.code}"}',
  enabled: true,
  ...overrides,
});

describe('Management API: webhooks', () => {
  let t: TestNode;
  let stranger: ManagementClient;
  let anonymous: ManagementClient;
  let appA: number;
  let appB: number;
  let appC: number;

  const newApp = async (name: string) => unwrap(await t.admin.POST('/v1/applications', { body: newApplication({ name }) as never })).id;
  const create = async (client: ManagementClient, body: Record<string, unknown>) => unwrap(await client.POST('/v1/webhooks', { body: body as never }));
  const path = (webhookId: number) => ({ params: { path: { webhookId } } });

  beforeAll(async () => {
    t = await startTestNode('pglite');
    stranger = await otherAccountAdmin(t);
    anonymous = createManagementClient({ baseUrl: t.url, retries: 0 });
    appA = await newApp('A');
    appB = await newApp('B');
    appC = await newApp('C');
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('creates, gets, replaces and deletes a webhook', async () => {
    const before = Date.now();
    const w = await create(t.admin, newWebhook([appB, appA]));
    expect(w).toEqual({
      ...newWebhook([appA, appB]),
      id: expect.any(Number),
      created: expect.any(String),
      modified: w.created,
      usedAt: [],
    });
    expect(Date.parse(w.created)).toBeGreaterThanOrEqual(before - 1000);
    expect(unwrap(await t.admin.GET('/v1/webhooks/{webhookId}', path(w.id)))).toEqual(w);

    const replaced = unwrap(
      await t.admin.PUT('/v1/webhooks/{webhookId}', {
        ...path(w.id),
        body: { applicationIds: [appC], title: 'Refund', verb: 'PATCH', url: 'http://hooks.example.com/refund' },
      }),
    );
    // Optional fields left out of a replacement take their defaults.
    expect(replaced).toEqual({
      id: w.id,
      created: w.created,
      modified: expect.any(String),
      applicationIds: [appC],
      title: 'Refund',
      verb: 'PATCH',
      url: 'http://hooks.example.com/refund',
      headers: [],
      params: [],
      payload: '',
      enabled: true,
      usedAt: [],
    });
    expect(unwrap(await t.admin.GET('/v1/webhooks/{webhookId}', path(w.id)))).toEqual(replaced);

    expect((await t.admin.DELETE('/v1/webhooks/{webhookId}', path(w.id))).response.status).toBe(204);
    expect((await t.admin.GET('/v1/webhooks/{webhookId}', path(w.id))).response.status).toBe(404);
    expect((await t.admin.DELETE('/v1/webhooks/{webhookId}', path(w.id))).response.status).toBe(404);
  });

  it('shows in usedAt the campaigns whose active ruleset triggers it', async () => {
    const shop = await setupShop(t.url, t.admin);
    const w = await create(t.admin, newWebhook([shop.applicationId]));
    const unused = await create(t.admin, newWebhook([shop.applicationId]));
    unwrap(
      await t.admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets', {
        params: { path: { applicationId: shop.applicationId, campaignId: shop.campaignId } },
        body: {
          rules: [{ title: 'notify', condition: ['>', ['.', 'Session', 'Total'], 0], effects: [['triggerWebhook', w.id, { orderId: 'x', amount: 1 }]] }],
          bindings: [],
          activate: true,
        },
      }),
    );
    expect(unwrap(await t.admin.GET('/v1/webhooks/{webhookId}', path(w.id))).usedAt).toEqual([String(shop.campaignId)]);
    expect(unwrap(await t.admin.GET('/v1/webhooks/{webhookId}', path(unused.id))).usedAt).toEqual([]);
  });

  it('checks templates, headers, parameters, the URL and the verb', async () => {
    const refused = async (overrides: Record<string, unknown>, pointer: string) => {
      const r = await t.admin.POST('/v1/webhooks', { body: newWebhook([appA], overrides) as never });
      expect(r.response.status, JSON.stringify(overrides)).toBe(400);
      expect(r.error?.StatusCode).toBe(400);
      expect(pointers(r.error), JSON.stringify(overrides)).toContain(pointer);
    };
    await refused({ payload: '{"x": "${$undeclared}"}' }, '/payload');
    await refused({ url: 'https://hooks.example.com/${$nope}' }, '/url');
    await refused({ payload: '${$Session.Total}' }, '/payload');
    await refused({ payload: '${$Profile.Attributes.}' }, '/payload');
    await refused({ payload: 'open ${$orderId' }, '/payload');
    await refused({ url: 'ftp://hooks.example.com/x' }, '/url');
    await refused({ url: 'not a url' }, '/url');
    await refused({ headers: ['Content-Type: application/json', 'no colon here'] }, '/headers/1');
    await refused({ headers: ['X-Evil: a\r\nInjected: b'] }, '/headers/0');
    await refused({ params: [{ title: 'orderId', type: 'string' }, { title: 'orderId', type: 'number' }], payload: '' }, '/params/1/title');
    await refused({ params: [{ title: 'order id', type: 'string' }], payload: '', url: 'https://x.example.com' }, '/params/0/title');
    await refused({ params: [{ title: 'p', type: 'blob' }], payload: '', url: 'https://x.example.com' }, '/params/0/type');
    await refused({ verb: 'FETCH' }, '/verb');
    await refused({ applicationIds: [] }, '/applicationIds');
    await refused({ title: '' }, '/title');
    const noApps = await t.admin.POST('/v1/webhooks', { body: { title: 'x', verb: 'GET', url: 'https://x.example.com' } as never });
    expect(pointers(noApps.error)).toContain('/applicationIds');
    const unknownApp = await t.admin.POST('/v1/webhooks', { body: newWebhook([appA, 999999]) as never });
    expect(unknownApp.response.status).toBe(404);
    expect(pointers(unknownApp.error)).toEqual(['/applicationIds/1']);
    // A template may also sit in the URL's host, once it is a declared parameter.
    const ok = await create(t.admin, newWebhook([appA], { url: 'https://${$host}/path', params: [{ title: 'host', type: 'string' }], payload: '' }));
    expect(ok.url).toBe('https://${$host}/path');
    // Nothing refused was stored.
    const all = unwrap(await t.admin.GET('/v1/webhooks', { params: { query: { applicationIds: String(appA) } } }));
    expect(all.data.filter((w) => (w.payload ?? '').includes('undeclared') || (w.url ?? '').startsWith('ftp'))).toEqual([]);
    // A replacement is checked the same way.
    const put = await t.admin.PUT('/v1/webhooks/{webhookId}', { ...path(ok.id), body: newWebhook([appA], { payload: '${$gone}' }) as never });
    expect(pointers(put.error)).toEqual(['/payload']);
    expect(unwrap(await t.admin.GET('/v1/webhooks/{webhookId}', path(ok.id)))).toEqual(ok);
  });

  it('lists a page of webhooks, filtered by the Applications they are attached to', async () => {
    const [x, y, z, lone] = [await newApp('X'), await newApp('Y'), await newApp('Z'), await newApp('Lone')];
    const onX = await create(t.admin, newWebhook([x], { title: 'on X' }));
    const onY = await create(t.admin, newWebhook([y], { title: 'on Y' }));
    const onXY = await create(t.admin, newWebhook([x, y], { title: 'on X and Y' }));
    const onZ = await create(t.admin, newWebhook([z], { title: 'on Z' }));
    const ids = async (query: Record<string, unknown>) => {
      const r = unwrap(await t.admin.GET('/v1/webhooks', { params: { query: query as never } }));
      return { ids: r.data.map((w) => w.id), total: r.totalResultSize };
    };
    expect(await ids({ applicationIds: String(x) })).toEqual({ ids: [onX.id, onXY.id], total: 2 });
    expect(await ids({ applicationIds: `${y},${z}` })).toEqual({ ids: [onY.id, onXY.id, onZ.id], total: 3 });
    expect(await ids({ applicationIds: String(lone) })).toEqual({ ids: [], total: 0 });
    expect(await ids({ applicationIds: `${x},${y},${z}`, sort: '-id', pageSize: 2 })).toEqual({ ids: [onZ.id, onXY.id], total: 4 });
    expect(await ids({ applicationIds: `${x},${y},${z}`, sort: '-id', pageSize: 2, skip: 2 })).toEqual({ ids: [onY.id, onX.id], total: 4 });
    const all = await ids({});
    expect(all.ids).toEqual(expect.arrayContaining([onX.id, onY.id, onXY.id, onZ.id]));

    for (const applicationIds of ['a,b', '1,,2', '']) {
      const bad = await t.admin.GET('/v1/webhooks', { params: { query: { applicationIds } } });
      expect(bad.response.status, applicationIds).toBe(400);
      expect(pointers(bad.error)).toContain('/query/applicationIds');
    }
    const badSort = await t.admin.GET('/v1/webhooks', { params: { query: { sort: 'url' } } });
    expect(pointers(badSort.error)).toContain('/query/sort');

    // Deleting an Application detaches its webhooks.
    unwrap(await t.admin.DELETE('/v1/applications/{applicationId}', { params: { path: { applicationId: y } } }));
    expect(unwrap(await t.admin.GET('/v1/webhooks/{webhookId}', path(onXY.id))).applicationIds).toEqual([x]);
    expect(await ids({ applicationIds: String(y) })).toEqual({ ids: [], total: 0 });
  });

  it('refuses calls without a token', async () => {
    const w = await create(t.admin, newWebhook([appA]));
    for (const r of [
      await anonymous.GET('/v1/webhooks'),
      await anonymous.POST('/v1/webhooks', { body: newWebhook([appA]) }),
      await anonymous.GET('/v1/webhooks/{webhookId}', path(w.id)),
      await anonymous.PUT('/v1/webhooks/{webhookId}', { ...path(w.id), body: newWebhook([appA], { title: 'hijack' }) }),
      await anonymous.DELETE('/v1/webhooks/{webhookId}', path(w.id)),
    ]) {
      expect(r.response.status).toBe(401);
      expect(r.error?.StatusCode).toBe(401);
    }
    expect(unwrap(await t.admin.GET('/v1/webhooks/{webhookId}', path(w.id)))).toEqual(w);
  });

  it("never shows or changes another account's webhook, nor attaches one to its Applications", async () => {
    const w = await create(t.admin, newWebhook([appA], { title: 'private hook' }));
    const seen = await stranger.GET('/v1/webhooks/{webhookId}', path(w.id));
    expect(seen.response.status).toBe(404);
    expect(JSON.stringify(seen.error)).not.toContain('private hook');
    expect((await stranger.PUT('/v1/webhooks/{webhookId}', { ...path(w.id), body: newWebhook([appA]) })).response.status).toBe(404);
    expect((await stranger.DELETE('/v1/webhooks/{webhookId}', path(w.id))).response.status).toBe(404);
    const list = unwrap(await stranger.GET('/v1/webhooks', { params: { query: { applicationIds: String(appA) } } }));
    expect(list).toEqual({ totalResultSize: 0, data: [] });
    const attach = await stranger.POST('/v1/webhooks', { body: newWebhook([appA]) });
    expect(attach.response.status).toBe(404);
    expect(pointers(attach.error)).toEqual(['/applicationIds/0']);
    expect(unwrap(await t.admin.GET('/v1/webhooks/{webhookId}', path(w.id)))).toEqual(w);
  });

  it("lets a user see the webhooks of its Applications and change them only with write access to each", async () => {
    const onA = await create(t.admin, newWebhook([appA], { title: 'A only' }));
    const onB = await create(t.admin, newWebhook([appB], { title: 'B only' }));
    const onAB = await create(t.admin, newWebhook([appA, appB], { title: 'A and B' }));
    const reader = await policyUser(t, { applications: { [String(appA)]: 'read' } });
    const writer = await policyUser(t, { applications: { [String(appA)]: 'write', [String(appB)]: 'read' } });

    const readerList = unwrap(await reader.GET('/v1/webhooks')).data.map((w) => w.id);
    expect(readerList).toEqual(expect.arrayContaining([onA.id, onAB.id]));
    expect(readerList).not.toContain(onB.id);
    // B is outside the reader's policy: filtering by it finds nothing (a match would reveal that onAB is attached to B).
    expect(unwrap(await reader.GET('/v1/webhooks', { params: { query: { applicationIds: String(appB) } } })).data.map((w) => w.id)).toEqual([]);
    expect(unwrap(await reader.GET('/v1/webhooks', { params: { query: { applicationIds: `${appA},${appB}` } } })).data.map((w) => w.id)).toEqual(
      expect.arrayContaining([onA.id, onAB.id]),
    );
    // Header values (often the receiver's credentials) only for those who may change it.
    expect(unwrap(await reader.GET('/v1/webhooks/{webhookId}', path(onA.id)))).toEqual({ ...onA, headers: ['Content-Type: [redacted]', 'X-Token: [redacted]'] });
    expect((await reader.GET('/v1/webhooks/{webhookId}', path(onB.id))).response.status).toBe(404);
    expect((await reader.PUT('/v1/webhooks/{webhookId}', { ...path(onA.id), body: newWebhook([appA], { title: 'x' }) })).response.status).toBe(403);
    expect((await reader.DELETE('/v1/webhooks/{webhookId}', path(onA.id))).response.status).toBe(403);
    const readerCreate = await reader.POST('/v1/webhooks', { body: newWebhook([appA]) });
    expect(readerCreate.response.status).toBe(403);
    expect(pointers(readerCreate.error)).toEqual(['/applicationIds/0']);

    // Write access to A but only read access to B: the webhook on both stays as it is.
    expect((await writer.PUT('/v1/webhooks/{webhookId}', { ...path(onAB.id), body: newWebhook([appA], { title: 'x' }) })).response.status).toBe(403);
    expect((await writer.DELETE('/v1/webhooks/{webhookId}', path(onAB.id))).response.status).toBe(403);
    expect(unwrap(await t.admin.GET('/v1/webhooks/{webhookId}', path(onAB.id)))).toEqual(onAB);
    // Moving its own webhook to an Application it may not write (B) or not see (C) is refused.
    const toB = await writer.PUT('/v1/webhooks/{webhookId}', { ...path(onA.id), body: newWebhook([appA, appB]) });
    expect(toB.response.status).toBe(403);
    expect(pointers(toB.error)).toEqual(['/applicationIds/1']);
    const toC = await writer.PUT('/v1/webhooks/{webhookId}', { ...path(onA.id), body: newWebhook([appC]) });
    expect(toC.response.status).toBe(404);
    expect(pointers(toC.error)).toEqual(['/applicationIds/0']);
    expect(unwrap(await t.admin.GET('/v1/webhooks/{webhookId}', path(onA.id)))).toEqual(onA);
    // Within A it may do everything.
    const mine = await create(writer, newWebhook([appA], { title: 'by writer' }));
    expect(unwrap(await writer.PUT('/v1/webhooks/{webhookId}', { ...path(mine.id), body: newWebhook([appA], { title: 'renamed', enabled: false }) }))).toMatchObject({
      title: 'renamed',
      enabled: false,
      applicationIds: [appA],
    });
    expect((await writer.DELETE('/v1/webhooks/{webhookId}', path(mine.id))).response.status).toBe(204);
  });
});
