import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unwrap } from '../../sdk/index.js';
import { dropSchema } from '../helpers/db.js';
import { cart } from '../helpers/fixtures.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';
import { postgresUp, uniqueName } from '../helpers/services.js';

/**
 * A session that no actor holds in its cache is first tried as a new one (no read before its
 * insert), and a new session whose rules do not read `FirstSession` learns it from its insert.
 * Both must give the answers of a session read before it is evaluated.
 */
describe.skipIf(!postgresUp)('new and uncached sessions (postgres)', () => {
  const schema = uniqueName('sn');
  let a: TestNode;
  let b: TestNode;
  let shop: ShopSetup;
  let firstOnly: ShopSetup;

  beforeAll(async () => {
    // Two nodes on one database, without NATS: each serves every session, from its own cache.
    a = await startTestNode('postgres', { dbSchema: schema });
    b = await startTestNode('postgres', { dbSchema: schema });
    shop = await setupShop(a.url, a.admin);
    firstOnly = await setupShop(a.url, a.admin, {
      ruleset: {
        activate: true,
        bindings: [],
        rules: [{ title: 'welcome', condition: ['.', 'Session', 'FirstSession'], effects: [['setDiscount', 'welcome', 5]] }],
      },
    });
  });
  afterAll(async () => {
    await b?.stop();
    await a?.stop();
    // The nodes share the schema, so neither drops it.
    await dropSchema(schema);
  });

  const put = (s: ShopSetup, id: string, customerSession: Record<string, unknown>, node = a) =>
    fetch(`${node.url}/v2/customer_sessions/${id}`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json', Authorization: `ApiKey-v1 ${s.apiKey}` },
      body: JSON.stringify({ customerSession, responseContent: ['customerSession'] }),
    });
  const state = async (res: Response) => {
    expect(res.status).toBe(200);
    return (await res.json()) as { customerSession: { firstSession: boolean; updateCount: number; total: number; state: string }; effects: Array<{ effectType: string; props: Record<string, unknown> }> };
  };

  it('marks only a profile’s first session as first when no rule reads it (the insert finds out)', async () => {
    const first = await state(await put(shop, 'nf-1', cart([10], { profileId: 'nf-alice' })));
    expect(first.customerSession).toMatchObject({ firstSession: true, updateCount: 1 });
    const second = await state(await put(shop, 'nf-2', cart([10], { profileId: 'nf-alice' })));
    expect(second.customerSession.firstSession).toBe(false);
    const anonymous = await state(await put(shop, 'nf-3', cart([10])));
    expect(anonymous.customerSession.firstSession).toBe(true);
    // What the response said is what is stored.
    const stored = unwrap(await shop.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'nf-2' } } }));
    expect(stored.customerSession.firstSession).toBe(false);
  });

  it('evaluates a rule that reads FirstSession with the right value', async () => {
    const first = await state(await put(firstOnly, 'fo-1', cart([10], { profileId: 'fo-bob' })));
    expect(first.effects.map((e) => e.props.name)).toEqual(['welcome']);
    const second = await state(await put(firstOnly, 'fo-2', cart([10], { profileId: 'fo-bob' })));
    expect(second.effects).toEqual([]);
    expect(second.customerSession.firstSession).toBe(false);
  });

  it('updates a session stored by another node on what is stored, not as a new one', async () => {
    await state(await put(shop, 'nc-1', cart([40, 30], { profileId: 'nc-carol', attributes: { channel: 'web' } })));
    await state(await put(shop, 'nc-1', cart([40, 30, 50], { profileId: 'nc-carol' })));
    // Node b has never seen nc-1: its first try as a new session finds it stored and runs again on it.
    const onB = await state(await put(shop, 'nc-1', { ...cart([40, 30, 50, 20], { profileId: 'nc-carol' }), state: 'closed' }, b));
    expect(onB.customerSession).toMatchObject({ updateCount: 3, total: 140, state: 'closed', firstSession: true });
    // What is stored is what b wrote (read from the database, as b's cache holds it).
    const view = (await (await fetch(`${b.url}/v2/customer_sessions/nc-1`, { headers: { Authorization: `ApiKey-v1 ${shop.apiKey}` } })).json()) as { customerSession: Record<string, unknown> };
    expect(view.customerSession).toMatchObject({ updateCount: 3, state: 'closed', total: 140, attributes: { channel: 'web' } });
    const [row] = await b.node.db.query<{ update_count: number; state: string; closed_at: unknown }>(
      `SELECT update_count, state, closed_at FROM customer_sessions WHERE integration_id = 'nc-1'`,
    );
    expect(row).toMatchObject({ update_count: 3, state: 'closed' });
    expect(row!.closed_at).not.toBeNull();
  });

  it('refuses on an uncached node a transition the stored state does not allow', async () => {
    await state(await put(shop, 'nc-2', { ...cart([10], { profileId: 'nc-dave' }), state: 'closed' }));
    const cancelled = await state(await put(shop, 'nc-2', { state: 'cancelled' }));
    expect(cancelled.customerSession.state).toBe('cancelled');
    // As a new session, `closed` would be allowed; stored, the session is cancelled and cannot be closed.
    const res = await put(shop, 'nc-2', { state: 'closed' }, b);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { errors: Array<{ source?: { pointer?: string } }> };
    expect(body.errors.map((e) => e.source?.pointer)).toEqual(['/customerSession/state']);
  });
});
