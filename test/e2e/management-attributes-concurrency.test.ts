import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unwrap } from '../../sdk/index.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';
import { postgresUp } from '../helpers/services.js';

// Deleting an attribute rewrites stored sessions while their actors may be committing updates of
// the same sessions: neither may lose the other's change.
describe.skipIf(!postgresUp)('Management API: attribute delete racing session updates (postgres)', () => {
  let t: TestNode;
  let shop: ShopSetup;

  beforeAll(async () => {
    t = await startTestNode('postgres');
    shop = await setupShop(t.url, t.admin, { retries: 3 });
  });
  afterAll(async () => {
    await t?.stop();
  });

  const put = (id: string, customerSession: Record<string, unknown>) =>
    shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: id } }, body: { customerSession } as never });

  it('removes the data and keeps every concurrent update', async () => {
    const create = async (entity: string, name: string) =>
      unwrap(await t.admin.POST('/v1/attributes', { body: { entity, name, type: 'string' } as never })).id;
    const channel = await create('CustomerSession', 'channel');
    const color = await create('CartItem', 'color');
    const sessions = Array.from({ length: 30 }, (_, i) => `race-${i}`);
    await Promise.all(
      sessions.map(async (id) =>
        unwrap(await put(id, { profileId: `p-${id}`, attributes: { channel: 'web', keep: 'yes' }, cartItems: [{ sku: 'A', quantity: 1, price: 5, attributes: { color: 'red', size: 'M' } }] })),
      ),
    );

    const started = Date.now();
    const [deletes, updates] = await Promise.all([
      Promise.all([
        t.admin.DELETE('/v1/attributes/{attributeId}', { params: { path: { attributeId: channel } } }),
        t.admin.DELETE('/v1/attributes/{attributeId}', { params: { path: { attributeId: color } } }),
      ]),
      Promise.all(sessions.flatMap((id) => [put(id, { attributes: { step1: 1 } }), put(id, { attributes: { step2: 2 } })])),
    ]);
    const elapsed = Date.now() - started;
    expect(deletes.map((r) => r.response.status)).toEqual([204, 204]);
    expect(updates.map((r) => r.response.status)).toEqual(updates.map(() => 200));

    const rows = await t.node.db.query<{ integration_id: string; attributes: Record<string, unknown>; cart_items: Array<{ attributes: Record<string, unknown> }> }>(
      `SELECT integration_id, attributes, cart_items FROM customer_sessions WHERE application_id = $1 AND integration_id LIKE 'race-%' ORDER BY integration_id`,
      [shop.applicationId],
    );
    expect(rows).toHaveLength(sessions.length);
    for (const r of rows) {
      expect(r.attributes, r.integration_id).toEqual({ keep: 'yes', step1: 1, step2: 2 });
      expect(r.cart_items.map((i) => i.attributes), r.integration_id).toEqual([{ size: 'M' }]);
    }
    // Recorded for the report: two deletes and 60 updates of 30 sessions.
    console.info(`[attributes] delete racing 60 session updates: ${elapsed} ms`);
  });
});
