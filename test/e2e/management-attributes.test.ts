import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManagementClient, unwrap, type ManagementClient } from '../../sdk/index.js';
import { otherAccountAdmin, policyUser } from '../helpers/management-users.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';

type Err = { StatusCode: number; errors: Array<{ source?: { pointer?: string } }> } | undefined;
const pointers = (e: Err) => (e?.errors ?? []).map((x) => x.source?.pointer);

describe('Management API: custom attributes', () => {
  let t: TestNode;
  let stranger: ManagementClient;
  let anonymous: ManagementClient;
  let reader: ManagementClient;
  let shop: ShopSetup;
  let theirShop: ShopSetup;

  beforeAll(async () => {
    t = await startTestNode('pglite');
    shop = await setupShop(t.url, t.admin);
    stranger = await otherAccountAdmin(t);
    theirShop = await setupShop(t.url, stranger);
    anonymous = createManagementClient({ baseUrl: t.url, retries: 0 });
    // Not an admin: writes to attributes (account-wide) are refused even with write access to an Application.
    reader = await policyUser(t, { applications: { [String(shop.applicationId)]: 'write' } });
  });
  afterAll(async () => {
    await t?.stop();
  });

  const db = () => t.node.db;
  const create = async (client: ManagementClient, body: Record<string, unknown>) => unwrap(await client.POST('/v1/attributes', { body: body as never }));
  const path = (attributeId: number) => ({ params: { path: { attributeId } } });

  it('gets an attribute and changes only its title', async () => {
    const a = await create(t.admin, { entity: 'CustomerProfile', name: 'shoeSize', type: 'number', title: 'Shoe size', description: 'EU sizes', tags: ['fit'] });
    const got = unwrap(await t.admin.GET('/v1/attributes/{attributeId}', path(a.id)));
    expect(got).toEqual(a);
    expect(got).toMatchObject({ entity: 'CustomerProfile', name: 'shoeSize', type: 'number', title: 'Shoe size', description: 'EU sizes', tags: ['fit'] });
    await new Promise((r) => setTimeout(r, 5));
    const updated = unwrap(await t.admin.PUT('/v1/attributes/{attributeId}', { ...path(a.id), body: { title: 'Shoe size (EU)' } }));
    expect(updated).toEqual({ ...a, title: 'Shoe size (EU)', modified: expect.any(String) });
    expect(Date.parse(updated.modified!)).toBeGreaterThan(Date.parse(a.modified!));
    expect(unwrap(await t.admin.GET('/v1/attributes/{attributeId}', path(a.id))).title).toBe('Shoe size (EU)');
    // Any user of the account reads attributes.
    expect(unwrap(await reader.GET('/v1/attributes/{attributeId}', path(a.id))).title).toBe('Shoe size (EU)');
  });

  it('lists a page of attributes, filtered and sorted', async () => {
    const names = ['listA', 'listB', 'listC'];
    for (const name of names) await create(t.admin, { entity: 'Coupon', name, type: 'string' });
    const page = unwrap(await t.admin.GET('/v1/attributes', { params: { query: { entity: 'Coupon', sort: '-name', pageSize: 2, skip: 0 } } }));
    expect(page.totalResultSize).toBe(3);
    expect(page.data.map((a) => a.name)).toEqual(['listC', 'listB']);
    const rest = unwrap(await t.admin.GET('/v1/attributes', { params: { query: { entity: 'Coupon', sort: '-name', pageSize: 2, skip: 2 } } }));
    expect(rest.data.map((a) => a.name)).toEqual(['listA']);
    const bad = await t.admin.GET('/v1/attributes', { params: { query: { sort: 'secret' } } });
    expect(bad.response.status).toBe(400);
    expect(pointers(bad.error)).toContain('/query/sort');
  });

  it('refuses an update of anything but the title, and bad ids, with pointers', async () => {
    const a = await create(t.admin, { entity: 'CustomerSession', name: 'channelX', type: 'string' });
    const other = await t.admin.PUT('/v1/attributes/{attributeId}', { ...path(a.id), body: { title: 'T', type: 'number' } as never });
    expect(other.response.status).toBe(400);
    expect(other.error?.StatusCode).toBe(400);
    expect(pointers(other.error)).toEqual(['/type']);
    const empty = await t.admin.PUT('/v1/attributes/{attributeId}', { ...path(a.id), body: { title: '' } });
    expect(pointers(empty.error)).toEqual(['/title']);
    const missing = await t.admin.PUT('/v1/attributes/{attributeId}', { ...path(a.id), body: {} as never });
    expect(pointers(missing.error)).toEqual(['/title']);
    const badId = await fetch(`${t.url}/v1/attributes/abc`, { headers: { Authorization: `Bearer ${t.adminToken}` } });
    expect(badId.status).toBe(400);
    expect(pointers((await badId.json()) as Err)).toContain('/path/attributeId');
    // Nothing changed.
    expect(unwrap(await t.admin.GET('/v1/attributes/{attributeId}', path(a.id)))).toEqual(a);
  });

  it('refuses calls without a token', async () => {
    const a = await create(t.admin, { entity: 'Referral', name: 'anon', type: 'string' });
    for (const r of [
      await anonymous.GET('/v1/attributes/{attributeId}', path(a.id)),
      await anonymous.PUT('/v1/attributes/{attributeId}', { ...path(a.id), body: { title: 'x' } }),
      await anonymous.DELETE('/v1/attributes/{attributeId}', path(a.id)),
    ]) {
      expect(r.response.status).toBe(401);
      expect(r.error?.StatusCode).toBe(401);
    }
    expect(unwrap(await t.admin.GET('/v1/attributes/{attributeId}', path(a.id))).title).toBe('anon');
  });

  it("never shows or changes another account's attribute, and lets only admins write", async () => {
    const a = await create(t.admin, { entity: 'Campaign', name: 'secretBudget', type: 'number', title: 'Secret' });
    const seen = await stranger.GET('/v1/attributes/{attributeId}', path(a.id));
    expect(seen.response.status).toBe(404);
    expect(JSON.stringify(seen.error)).not.toContain('secretBudget');
    expect((await stranger.PUT('/v1/attributes/{attributeId}', { ...path(a.id), body: { title: 'Mine' } })).response.status).toBe(404);
    expect((await stranger.DELETE('/v1/attributes/{attributeId}', path(a.id))).response.status).toBe(404);
    expect(unwrap(await stranger.GET('/v1/attributes')).data.map((x) => x.id)).not.toContain(a.id);

    const put = await reader.PUT('/v1/attributes/{attributeId}', { ...path(a.id), body: { title: 'Mine' } });
    expect(put.response.status).toBe(403);
    expect((await reader.DELETE('/v1/attributes/{attributeId}', path(a.id))).response.status).toBe(403);
    expect((await reader.POST('/v1/attributes', { body: { entity: 'Campaign', name: 'byReader', type: 'string' } })).response.status).toBe(403);
    expect(unwrap(await t.admin.GET('/v1/attributes/{attributeId}', path(a.id))).title).toBe('Secret');
    expect(unwrap(await t.admin.GET('/v1/attributes', { params: { query: { entity: 'Campaign' } } })).data.map((x) => x.name)).not.toContain('byReader');
  });

  describe('delete', () => {
    const profileAttributes = async (integrationId: string, accountOf: ShopSetup) =>
      (
        await db().query<{ attributes: Record<string, unknown> }>(
          `SELECT p.attributes FROM customer_profiles p JOIN applications a ON a.account_id = p.account_id WHERE a.id = $1 AND p.integration_id = $2`,
          [accountOf.applicationId, integrationId],
        )
      )[0]?.attributes;
    const sessionRow = async (integrationId: string, s: ShopSetup = shop) =>
      (
        await db().query<{ attributes: Record<string, unknown>; cart_items: Array<{ attributes?: Record<string, unknown> }>; update_count: number }>(
          `SELECT attributes, cart_items, update_count FROM customer_sessions WHERE application_id = $1 AND integration_id = $2`,
          [s.applicationId, integrationId],
        )
      )[0]!;
    const putSession = (s: ShopSetup, id: string, customerSession: Record<string, unknown>) =>
      s.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: id } },
        body: { customerSession, responseContent: ['customerSession'] } as never,
      });

    it("removes a profile attribute's data from this account's profiles only", async () => {
      const attr = await create(t.admin, { entity: 'CustomerProfile', name: 'tier', type: 'string' });
      await create(stranger, { entity: 'CustomerProfile', name: 'tier', type: 'string' });
      for (const [s, id] of [[shop, 'del-p1'], [shop, 'del-p2'], [theirShop, 'del-p1']] as const) {
        unwrap(await s.integration.PUT('/v2/customer_profiles/{integrationId}', { params: { path: { integrationId: id } }, body: { attributes: { tier: 'gold', city: 'Oslo' } } }));
      }
      expect(await profileAttributes('del-p1', shop)).toEqual({ tier: 'gold', city: 'Oslo' });

      expect((await t.admin.DELETE('/v1/attributes/{attributeId}', path(attr.id))).response.status).toBe(204);
      expect(await profileAttributes('del-p1', shop)).toEqual({ city: 'Oslo' });
      expect(await profileAttributes('del-p2', shop)).toEqual({ city: 'Oslo' });
      // The other account's profile (same integration ID, its own attribute of that name) keeps it.
      expect(await profileAttributes('del-p1', theirShop)).toEqual({ tier: 'gold', city: 'Oslo' });
      expect((await t.admin.GET('/v1/attributes/{attributeId}', path(attr.id))).response.status).toBe(404);
      expect((await t.admin.DELETE('/v1/attributes/{attributeId}', path(attr.id))).response.status).toBe(404);
    });

    it('removes session and cart item data, and a later update of a cached session does not bring it back', async () => {
      const channel = await create(t.admin, { entity: 'CustomerSession', name: 'channel', type: 'string' });
      const color = await create(t.admin, { entity: 'CartItem', name: 'color', type: 'string' });
      const items = [
        { sku: 'A', quantity: 1, price: 10, attributes: { color: 'red', size: 'M' } },
        { sku: 'B', quantity: 2, price: 5, attributes: { size: 'L' } },
        { sku: 'C', quantity: 1, price: 1 },
      ];
      unwrap(await putSession(shop, 'del-s1', { profileId: 'del-c1', attributes: { channel: 'web', device: 'phone' }, cartItems: items }));
      unwrap(await putSession(theirShop, 'del-s1', { profileId: 'del-c1', attributes: { channel: 'web' }, cartItems: items }));
      const before = await sessionRow('del-s1');

      expect((await t.admin.DELETE('/v1/attributes/{attributeId}', path(channel.id))).response.status).toBe(204);
      expect((await t.admin.DELETE('/v1/attributes/{attributeId}', path(color.id))).response.status).toBe(204);
      const after = await sessionRow('del-s1');
      expect(after.attributes).toEqual({ device: 'phone' });
      expect(after.cart_items.map((i) => i.attributes)).toEqual([{ size: 'M' }, { size: 'L' }, undefined]);
      // Each removal moved the update count, so no stale copy can be committed over it.
      expect(after.update_count).toBe(before.update_count + 2);
      // Another account's session with the same names is untouched.
      const theirs = await sessionRow('del-s1', theirShop);
      expect(theirs.attributes).toEqual({ channel: 'web' });
      expect(theirs.cart_items[0]!.attributes).toEqual({ color: 'red', size: 'M' });

      // The session actor had the session cached with the old attributes: the next update builds on the stored one.
      const next = unwrap(await putSession(shop, 'del-s1', { attributes: { coupon: 'none' } }));
      expect((next as { customerSession: { attributes: Record<string, unknown> } }).customerSession.attributes).toEqual({ device: 'phone', coupon: 'none' });
      expect((await sessionRow('del-s1')).attributes).toEqual({ device: 'phone', coupon: 'none' });
    });

    it("removes an event attribute's data from events of its event type only", async () => {
      const stars = await create(t.admin, { entity: 'Event', eventType: 'rated', name: 'stars', type: 'number' });
      await create(t.admin, { entity: 'Event', eventType: 'rated', name: 'comment', type: 'string' });
      await create(t.admin, { entity: 'Event', eventType: 'reviewed', name: 'stars', type: 'number' });
      unwrap(await shop.integration.POST('/v2/events', { body: { profileId: 'del-e1', type: 'rated', attributes: { stars: 4, comment: 'ok' } } as never }));
      unwrap(await shop.integration.POST('/v2/events', { body: { profileId: 'del-e1', type: 'reviewed', attributes: { stars: 2 } } as never }));

      expect((await t.admin.DELETE('/v1/attributes/{attributeId}', path(stars.id))).response.status).toBe(204);
      const rows = await db().query<{ type: string; attributes: Record<string, unknown> }>(
        `SELECT type, attributes FROM events WHERE application_id = $1 AND profile_id = 'del-e1' ORDER BY id`,
        [shop.applicationId],
      );
      expect(rows).toEqual([
        { type: 'rated', attributes: { comment: 'ok' } },
        { type: 'reviewed', attributes: { stars: 2 } },
      ]);
      // "rated" events may no longer carry stars: the definition is gone.
      const refused = await shop.integration.POST('/v2/events', { body: { profileId: 'del-e1', type: 'rated', attributes: { stars: 1 } } as never });
      expect(refused.response.status).toBe(400);
    });

    it('removes campaign and Application attribute data', async () => {
      const region = await create(t.admin, { entity: 'Application', name: 'region', type: 'string' });
      const budget = await create(t.admin, { entity: 'Campaign', name: 'budgetCode', type: 'string' });
      const appPath = { params: { path: { applicationId: shop.applicationId } } };
      const app = unwrap(await t.admin.GET('/v1/applications/{applicationId}', appPath));
      unwrap(await t.admin.PUT('/v1/applications/{applicationId}', { ...appPath, body: { name: app.name, timezone: app.timezone, currency: app.currency, attributes: { region: 'eu', tz: 'cet' } } }));
      const campPath = { params: { path: { applicationId: shop.applicationId, campaignId: shop.campaignId } } };
      unwrap(await t.admin.PUT('/v1/applications/{applicationId}/campaigns/{campaignId}', { ...campPath, body: { name: 'Autumn sale', attributes: { budgetCode: 'B1', owner: 'ann' } } }));

      expect((await t.admin.DELETE('/v1/attributes/{attributeId}', path(region.id))).response.status).toBe(204);
      expect((await t.admin.DELETE('/v1/attributes/{attributeId}', path(budget.id))).response.status).toBe(204);
      expect(unwrap(await t.admin.GET('/v1/applications/{applicationId}', appPath)).attributes).toEqual({ tz: 'cet' });
      expect(unwrap(await t.admin.GET('/v1/applications/{applicationId}/campaigns/{campaignId}', campPath)).attributes).toEqual({ owner: 'ann' });
    });
  });
});
