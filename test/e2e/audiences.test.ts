import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIntegrationClient, unwrap } from '../../sdk/index.js';
import { cart } from '../helpers/fixtures.js';
import { otherAccount } from '../helpers/management-users.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';
import { addCampaign, rule } from '../helpers/promotions.js';
import { postgresUp } from '../helpers/services.js';

type Client = ShopSetup['integration'];

const create = (c: Client, body: Record<string, unknown>) => c.POST('/v2/audiences', { body: body as never });
const rename = (c: Client, audienceId: number, name: string) => c.PUT('/v2/audiences/{audienceId}', { params: { path: { audienceId } }, body: { name } });
const remove = (c: Client, audienceId: number) => c.DELETE('/v2/audiences/{audienceId}', { params: { path: { audienceId } } });
const clear = (c: Client, audienceId: number) => c.DELETE('/v2/audiences/{audienceId}/memberships', { params: { path: { audienceId } } });
const members = (c: Client, data: Array<{ action: string; profileIntegrationId: string; audienceId: number }>) =>
  c.POST('/v2/customer_audiences', { body: { data } as never });
const setAttributes = (c: Client, audienceId: number, attributes: Record<string, unknown>) =>
  c.PUT('/v2/audience_customers/{audienceId}/attributes', { params: { path: { audienceId } }, body: attributes as never });
const profile = async (c: Client, integrationId: string, body: Record<string, unknown> = {}, query: Record<string, unknown> = {}) =>
  unwrap(
    await c.PUT('/v2/customer_profiles/{integrationId}', {
      params: { path: { integrationId }, query: query as never },
      body: { responseContent: ['customerProfile'], ...body } as never,
    }),
  );
const memberships = async (c: Client, integrationId: string) => (await profile(c, integrationId)).customerProfile!.audienceMemberships;
const pointerOf = (r: { error?: unknown }) => (r.error as { errors: Array<{ source?: { pointer?: string } }> }).errors[0]!.source?.pointer;

// CRUD, validation, keys and account isolation: on PGlite (the migration runs there too).
describe('audiences', () => {
  let t: TestNode;
  let shop: ShopSetup;
  let sibling: ShopSetup;
  let stranger: ShopSetup;

  beforeAll(async () => {
    t = await startTestNode('pglite');
    shop = await setupShop(t.url, t.admin);
    sibling = await setupShop(t.url, t.admin);
    const other = await otherAccount(t.node.db, t.url, 'audience-stranger@test.local');
    stranger = await setupShop(t.url, other.client);
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  const membershipCount = async (audienceId: number) =>
    Number((await t.node.db.query<{ n: string }>(`SELECT count(*) AS n FROM audience_memberships WHERE audience_id = $1`, [audienceId]))[0]!.n);

  it('creates audiences; a reused integrationId of the same integration in the account is a 409', async () => {
    const r = await create(shop.integration, { name: 'VIP', integration: 'mparticle', integrationId: 'seg-1', description: 'best customers', createdIn3rdParty: true });
    expect(r.response.status).toBe(201);
    const a = unwrap(r);
    expect(a).toMatchObject({ name: 'VIP', integration: 'mparticle', integrationId: 'seg-1', description: 'best customers', createdIn3rdParty: true, sandbox: false });
    expect(a.id).toBeGreaterThan(0);
    expect(a.accountId).toBeGreaterThan(0);
    expect(Date.parse(a.created)).not.toBeNaN();

    // Audiences belong to the account: another Application of it conflicts too.
    const again = await create(sibling.integration, { name: 'VIP again', integration: 'mparticle', integrationId: 'seg-1' });
    expect(again.response.status).toBe(409);
    expect(pointerOf(again)).toBe('/integrationId');
    // The same id of another platform, no id at all (twice), and another account: all fine.
    expect((await create(shop.integration, { name: 'Other platform', integration: 'segment', integrationId: 'seg-1' })).response.status).toBe(201);
    expect((await create(shop.integration, { name: 'Plain' })).response.status).toBe(201);
    expect((await create(shop.integration, { name: 'Plain' })).response.status).toBe(201);
    const foreign = unwrap(await create(stranger.integration, { name: 'Theirs', integration: 'mparticle', integrationId: 'seg-1' }));
    expect(foreign.accountId).not.toBe(a.accountId);
  });

  it('refuses bad input with 400 and a pointer', async () => {
    const a = unwrap(await create(shop.integration, { name: 'Checked' }));
    const cases: Array<[Promise<{ response: Response; error?: unknown }>, string]> = [
      [create(shop.integration, {}), '/name'],
      [create(shop.integration, { name: '' }), '/name'],
      [create(shop.integration, { name: 'x', integrationId: 'i'.repeat(1001) }), '/integrationId'],
      [create(shop.integration, { name: 'x', integrationId: '' }), '/integrationId'],
      [create(shop.integration, { name: 'x', lastUpdate: 'yesterday' }), '/lastUpdate'],
      [rename(shop.integration, a.id, ''), '/name'],
      [shop.integration.PUT('/v2/audiences/{audienceId}', { params: { path: { audienceId: 'abc' as never } }, body: { name: 'n' } }), '/path/audienceId'],
      [remove(shop.integration, 0), '/path/audienceId'],
      [members(shop.integration, []), '/data'],
      [members(shop.integration, [{ action: 'join', profileIntegrationId: 'p', audienceId: a.id }]), '/data/0/action'],
      [members(shop.integration, [{ action: 'add', profileIntegrationId: '', audienceId: a.id }]), '/data/0/profileIntegrationId'],
      [members(shop.integration, [{ action: 'add', profileIntegrationId: 'p', audienceId: 2 ** 40 }]), '/data/0/audienceId'],
      [members(shop.integration, Array.from({ length: 1001 }, (_, i) => ({ action: 'add', profileIntegrationId: `p${i}`, audienceId: a.id }))), '/data'],
      [shop.integration.PUT('/v2/audience_customers/{audienceId}/attributes', { params: { path: { audienceId: a.id } }, body: [] as never }), ''],
    ];
    for (const [call, pointer] of cases) {
      const r = await call;
      expect(r.response.status, pointer).toBe(400);
      expect(pointerOf(r), pointer).toBe(pointer);
    }
    // Nothing of the refused bulk call was stored.
    expect(await membershipCount(a.id)).toBe(0);
  });

  it('honours Idempotency-Key on audience writes', async () => {
    const headers = { 'Idempotency-Key': `aud-create-${Date.now()}` };
    const first = unwrap(await shop.integration.POST('/v2/audiences', { body: { name: 'Once' }, headers }));
    const again = await shop.integration.POST('/v2/audiences', { body: { name: 'Once' }, headers });
    expect(again.response.status).toBe(201);
    expect(unwrap(again)).toEqual(first);
    const count = await t.node.db.query(`SELECT id FROM audiences WHERE name = 'Once'`);
    expect(count).toHaveLength(1);
    const other = await shop.integration.POST('/v2/audiences', { body: { name: 'Twice' }, headers });
    expect(other.response.status).toBe(409);
    expect(pointerOf(other)).toBe('/headers/idempotency-key');

    const bulkHeaders = { 'Idempotency-Key': `aud-bulk-${Date.now()}` };
    const body = { data: [{ action: 'add' as const, profileIntegrationId: 'idem-1', audienceId: first.id }] };
    expect((await shop.integration.POST('/v2/customer_audiences', { body, headers: bulkHeaders })).response.status).toBe(204);
    unwrap(await clear(shop.integration, first.id));
    // Replayed: the stored 204, not a second add.
    expect((await shop.integration.POST('/v2/customer_audiences', { body, headers: bulkHeaders })).response.status).toBe(204);
    expect(await membershipCount(first.id)).toBe(0);
  });

  it('answers 401 to a wrong or absent key', async () => {
    const a = unwrap(await create(shop.integration, { name: 'Keyed' }));
    for (const apiKey of ['not-a-key', '']) {
      const c = createIntegrationClient({ baseUrl: t.url, apiKey, retries: 0 });
      for (const r of [
        await create(c, { name: 'x' }),
        await rename(c, a.id, 'x'),
        await remove(c, a.id),
        await clear(c, a.id),
        await members(c, [{ action: 'add', profileIntegrationId: 'p', audienceId: a.id }]),
        await setAttributes(c, a.id, { x: 1 }),
      ]) {
        expect(r.response.status).toBe(401);
      }
    }
    expect(unwrap(await rename(shop.integration, a.id, 'Keyed'))).toMatchObject({ id: a.id, name: 'Keyed' });
  });

  it('adds and removes members in bulk, creating missing profiles; profiles show their memberships', async () => {
    const gold = unwrap(await create(shop.integration, { name: 'Gold' }));
    const silver = unwrap(await create(shop.integration, { name: 'Silver' }));
    const r = await members(shop.integration, [
      { action: 'add', profileIntegrationId: 'aud-ann', audienceId: gold.id },
      { action: 'add', profileIntegrationId: 'aud-ann', audienceId: silver.id },
      { action: 'add', profileIntegrationId: 'aud-bob', audienceId: gold.id },
      { action: 'add', profileIntegrationId: 'aud-bob', audienceId: gold.id },
      // The last action for a pair counts.
      { action: 'add', profileIntegrationId: 'aud-cy', audienceId: silver.id },
      { action: 'remove', profileIntegrationId: 'aud-cy', audienceId: silver.id },
      { action: 'remove', profileIntegrationId: 'aud-nobody', audienceId: silver.id },
    ]);
    expect(r.response.status).toBe(204);
    expect(await memberships(shop.integration, 'aud-ann')).toEqual([
      { id: gold.id, name: 'Gold' },
      { id: silver.id, name: 'Silver' },
    ]);
    // Profiles are the account's: another Application sees the same memberships.
    expect(await memberships(sibling.integration, 'aud-bob')).toEqual([{ id: gold.id, name: 'Gold' }]);
    expect(await memberships(shop.integration, 'aud-cy')).toEqual([]);
    const created = await t.node.db.query<{ integration_id: string }>(
      `SELECT integration_id FROM customer_profiles WHERE integration_id LIKE 'aud-%' ORDER BY integration_id`,
    );
    expect(created.map((p) => p.integration_id)).toEqual(['aud-ann', 'aud-bob', 'aud-cy']);

    unwrap(await members(shop.integration, [{ action: 'remove', profileIntegrationId: 'aud-ann', audienceId: gold.id }]));
    expect(await memberships(shop.integration, 'aud-ann')).toEqual([{ id: silver.id, name: 'Silver' }]);

    // A rename shows at once, runs no rule and records no event.
    const events = async () => Number((await t.node.db.query<{ n: string }>(`SELECT count(*) AS n FROM events WHERE profile_id LIKE 'aud-%'`))[0]!.n);
    const before = await events();
    expect(unwrap(await rename(shop.integration, silver.id, 'Silver+'))).toMatchObject({ id: silver.id, name: 'Silver+', accountId: silver.accountId });
    expect(await memberships(shop.integration, 'aud-ann')).toEqual([{ id: silver.id, name: 'Silver+' }]);
    expect(await events()).toBe(before);
  });

  it('sets attributes on every member, removes all members, and deletes an audience with its memberships', async () => {
    const club = unwrap(await create(shop.integration, { name: 'Club' }));
    const keep = unwrap(await create(shop.integration, { name: 'Keep' }));
    await profile(shop.integration, 'club-1', { attributes: { name: 'One', level: 1 } });
    unwrap(
      await members(shop.integration, [
        { action: 'add', profileIntegrationId: 'club-1', audienceId: club.id },
        { action: 'add', profileIntegrationId: 'club-2', audienceId: club.id },
        { action: 'add', profileIntegrationId: 'club-2', audienceId: keep.id },
        { action: 'add', profileIntegrationId: 'outsider', audienceId: keep.id },
      ]),
    );
    expect((await setAttributes(shop.integration, club.id, { level: 5, club: true })).response.status).toBe(204);
    expect((await profile(shop.integration, 'club-1')).customerProfile!.attributes).toEqual({ name: 'One', level: 5, club: true });
    expect((await profile(shop.integration, 'club-2')).customerProfile!.attributes).toEqual({ level: 5, club: true });
    expect((await profile(shop.integration, 'outsider')).customerProfile!.attributes).toEqual({});

    expect((await clear(shop.integration, club.id)).response.status).toBe(204);
    expect(await membershipCount(club.id)).toBe(0);
    expect(await memberships(shop.integration, 'club-2')).toEqual([{ id: keep.id, name: 'Keep' }]);

    expect((await remove(shop.integration, keep.id)).response.status).toBe(204);
    expect(await membershipCount(keep.id)).toBe(0);
    expect(await memberships(shop.integration, 'outsider')).toEqual([]);
    // The profiles stay; the audience is gone.
    expect((await profile(shop.integration, 'outsider')).customerProfile!.integrationId).toBe('outsider');
    expect((await rename(shop.integration, keep.id, 'x')).response.status).toBe(404);
    expect((await remove(shop.integration, keep.id)).response.status).toBe(404);
  });

  it('applies audiencesChanges of a profile update', async () => {
    const a = unwrap(await create(shop.integration, { name: 'A' }));
    const b = unwrap(await create(shop.integration, { name: 'B' }));
    const first = await profile(shop.integration, 'changer', { audiencesChanges: { adds: [a.id, b.id] } });
    expect(first.customerProfile!.audienceMemberships).toEqual([
      { id: a.id, name: 'A' },
      { id: b.id, name: 'B' },
    ]);
    const second = await profile(shop.integration, 'changer', { audiencesChanges: { deletes: [a.id] } }, { runRuleEngine: true });
    expect(second.customerProfile!.audienceMemberships).toEqual([{ id: b.id, name: 'B' }]);
  });

  it("never shows or changes another account's audiences (404)", async () => {
    const mine = unwrap(await create(shop.integration, { name: 'Mine' }));
    unwrap(await members(shop.integration, [{ action: 'add', profileIntegrationId: 'mine-1', audienceId: mine.id }]));
    const s = stranger.integration;
    const calls = [
      [await rename(s, mine.id, 'Stolen'), '/path/audienceId'],
      [await remove(s, mine.id), '/path/audienceId'],
      [await clear(s, mine.id), '/path/audienceId'],
      [await setAttributes(s, mine.id, { hacked: true }), '/path/audienceId'],
      [await members(s, [{ action: 'add', profileIntegrationId: 'p', audienceId: mine.id }]), '/data/0/audienceId'],
      [
        await s.PUT('/v2/customer_profiles/{integrationId}', { params: { path: { integrationId: 'mine-1' } }, body: { audiencesChanges: { adds: [mine.id] } } }),
        '/audiencesChanges/adds/0',
      ],
    ] as const;
    for (const [r, pointer] of calls) {
      expect(r.response.status, pointer).toBe(404);
      expect(pointerOf(r), pointer).toBe(pointer);
    }
    // A valid action before an unknown audience is not applied either (all or nothing).
    const own = unwrap(await create(s, { name: 'Own' }));
    const mixed = await members(s, [
      { action: 'add', profileIntegrationId: 'p-mixed', audienceId: own.id },
      { action: 'add', profileIntegrationId: 'p-mixed', audienceId: mine.id },
    ]);
    expect(mixed.response.status).toBe(404);
    expect(pointerOf(mixed)).toBe('/data/1/audienceId');
    expect(await membershipCount(own.id)).toBe(0);
    // Everything of the first account is as it was.
    expect(await memberships(shop.integration, 'mine-1')).toEqual([{ id: mine.id, name: 'Mine' }]);
    expect((await profile(shop.integration, 'mine-1')).customerProfile!.attributes).toEqual({});
  });
});

// Rules and races: on real Postgres.
describe.skipIf(!postgresUp)('audiences in rules and under concurrency', () => {
  let t: TestNode;
  let admin: TestNode['admin'];

  beforeAll(async () => {
    t = await startTestNode('postgres');
    admin = t.admin;
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  const put = async (s: ShopSetup, id: string, customerSession: Record<string, unknown>, responseContent: string[] = []) =>
    unwrap(
      await s.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: id } },
        body: { customerSession: customerSession as never, responseContent: responseContent as never },
      }),
    );
  const inAudience = async (audienceId: number, profileId: string) =>
    (
      await t.node.db.query(
        `SELECT 1 FROM audience_memberships m JOIN customer_profiles p ON p.id = m.profile_id WHERE m.audience_id = $1 AND p.integration_id = $2`,
        [audienceId, profileId],
      )
    ).length === 1;

  it('inAudience sees a membership change made just before, in sessions and profile updates', async () => {
    const shop = await setupShop(t.url, admin);
    const vip = unwrap(await create(shop.integration, { name: 'VIP' }));
    await addCampaign(admin, shop.applicationId, [
      rule(['and', ['=', ['.', 'Event', 'Type'], 'service_session_updated'], ['inAudience', vip.id]], [['setDiscount', 'vip', 5]], 'vip discount'),
      rule(['and', ['=', ['.', 'Event', 'Type'], 'service_profile_updated'], ['inAudience', vip.id]], [['showNotification', 'info', 'VIP', 'hello']], 'vip note'),
    ]);
    const notes = async (body: Record<string, unknown>) =>
      (await profile(shop.integration, 'vip-1', body, { runRuleEngine: true })).effects.filter((e) => e.effectType === 'showNotification').length;
    const discounts = (effects: Array<{ effectType: string; props: Record<string, unknown> }>) =>
      effects.filter((e) => e.effectType === 'setDiscount' && e.props.name === 'vip').map((e) => e.props.value);

    expect(discounts((await put(shop, 'vip-s1', cart([50], { profileId: 'vip-1' }))).effects as never)).toEqual([]);
    unwrap(await members(shop.integration, [{ action: 'add', profileIntegrationId: 'vip-1', audienceId: vip.id }]));
    expect(discounts((await put(shop, 'vip-s1', cart([50], { profileId: 'vip-1' }))).effects as never)).toEqual([5]);
    expect(await notes({})).toBe(1);
    unwrap(await members(shop.integration, [{ action: 'remove', profileIntegrationId: 'vip-1', audienceId: vip.id }]));
    expect(discounts((await put(shop, 'vip-s1', cart([50], { profileId: 'vip-1' }))).effects as never)).toEqual([]);
    expect(await notes({})).toBe(0);
    // The rules of a profile update see its own audiencesChanges.
    expect(await notes({ audiencesChanges: { adds: [vip.id] } })).toBe(1);
    expect(await inAudience(vip.id, 'vip-1')).toBe(true);
    expect(await notes({ audiencesChanges: { deletes: [vip.id] } })).toBe(0);
    expect(await inAudience(vip.id, 'vip-1')).toBe(false);
  });

  it('addToAudience / removeFromAudience: committed on close, rolled back on cancel, at once for profile updates', async () => {
    const shop = await setupShop(t.url, admin);
    const buyers = unwrap(await create(shop.integration, { name: 'Buyers' }));
    const prospects = unwrap(await create(shop.integration, { name: 'Prospects' }));
    await addCampaign(admin, shop.applicationId, [
      rule(['=', ['.', 'Session', 'State'], 'closed'], [['addToAudience', buyers.id], ['removeFromAudience', prospects.id]], 'close'),
      rule(['=', ['.', 'Event', 'Type'], 'service_profile_created'], [['addToAudience', prospects.id]], 'new profile'),
    ]);
    // A new profile joins Prospects at once.
    const created = await profile(shop.integration, 'buyer-1', { attributes: { a: 1 } }, { runRuleEngine: true });
    expect(created.effects.map((e) => [e.effectType, e.props])).toEqual([
      ['addToAudience', { audienceId: prospects.id, audienceName: 'Prospects', profileIntegrationId: 'buyer-1' }],
    ]);
    expect(created.customerProfile!.audienceMemberships).toEqual([{ id: prospects.id, name: 'Prospects' }]);

    // An open session commits nothing; the close moves the profile from Prospects to Buyers.
    await put(shop, 'buy-1', cart([20], { profileId: 'buyer-1' }));
    expect(await inAudience(buyers.id, 'buyer-1')).toBe(false);
    const closed = await put(shop, 'buy-1', { state: 'closed' }, ['customerProfile']);
    expect(closed.effects.map((e) => e.effectType)).toEqual(['addToAudience', 'removeFromAudience']);
    expect(closed.customerProfile!.audienceMemberships).toEqual([{ id: buyers.id, name: 'Buyers' }]);
    expect(await inAudience(buyers.id, 'buyer-1')).toBe(true);
    expect(await inAudience(prospects.id, 'buyer-1')).toBe(false);

    // Cancel gives back exactly what the close changed.
    const cancelled = await put(shop, 'buy-1', { state: 'cancelled' }, ['customerProfile']);
    expect(cancelled.customerProfile!.audienceMemberships).toEqual([{ id: prospects.id, name: 'Prospects' }]);
    expect(await inAudience(buyers.id, 'buyer-1')).toBe(false);
    expect(await inAudience(prospects.id, 'buyer-1')).toBe(true);

    // An open session's view of the profile shows its memberships too.
    const viewed = await put(shop, 'buy-3', cart([5], { profileId: 'buyer-1' }), ['customerProfile']);
    expect(viewed.customerProfile!.audienceMemberships).toEqual([{ id: prospects.id, name: 'Prospects' }]);

    // A membership the close did not make (already there) is not removed by a cancel.
    unwrap(await members(shop.integration, [{ action: 'add', profileIntegrationId: 'buyer-2', audienceId: buyers.id }]));
    await put(shop, 'buy-2', cart([20], { profileId: 'buyer-2' }));
    await put(shop, 'buy-2', { state: 'closed' });
    await put(shop, 'buy-2', { state: 'cancelled' });
    expect(await inAudience(buyers.id, 'buyer-2')).toBe(true);
  });

  it('bulk membership changes racing with session closes of the same profiles lose nothing', async () => {
    const shop = await setupShop(t.url, admin, { retries: 3 });
    const bulk = unwrap(await create(shop.integration, { name: 'Bulk' }));
    const closers = unwrap(await create(shop.integration, { name: 'Closers' }));
    const gone = unwrap(await create(shop.integration, { name: 'Gone' }));
    await addCampaign(admin, shop.applicationId, [rule(['=', ['.', 'Session', 'State'], 'closed'], [['addToAudience', closers.id]], 'close')]);
    const ids = Array.from({ length: 24 }, (_, i) => `race-${i}`);
    // Everyone starts in Gone; the bulk calls take them out of it and put them into Bulk.
    unwrap(await members(shop.integration, ids.map((id) => ({ action: 'add', profileIntegrationId: id, audienceId: gone.id }))));
    await Promise.all(ids.map((id) => put(shop, `race-s-${id}`, cart([10], { profileId: id }))));

    const chunks = [ids.slice(0, 8), ids.slice(8, 16), ids.slice(16)];
    const results = await Promise.all([
      ...ids.map((id) => put(shop, `race-s-${id}`, { state: 'closed' }).then(() => 204)),
      ...chunks.flatMap((chunk) => [
        members(shop.integration, chunk.map((id) => ({ action: 'add', profileIntegrationId: id, audienceId: bulk.id }))).then((r) => r.response.status),
        members(shop.integration, [...chunk].reverse().map((id) => ({ action: 'remove', profileIntegrationId: id, audienceId: gone.id }))).then((r) => r.response.status),
        setAttributes(shop.integration, gone.id, { raced: true }).then((r) => r.response.status),
      ]),
    ]);
    expect(results.every((s) => s === 204)).toBe(true);

    const rows = await t.node.db.query<{ integration_id: string; audiences: number[]; closed_sessions: number; total_sales: string }>(
      `SELECT p.integration_id, p.closed_sessions, p.total_sales,
              (SELECT array_agg(m.audience_id ORDER BY m.audience_id) FROM audience_memberships m WHERE m.profile_id = p.id) AS audiences
         FROM customer_profiles p WHERE p.integration_id LIKE 'race-%' ORDER BY p.integration_id`,
    );
    expect(rows).toHaveLength(ids.length);
    for (const r of rows) {
      expect(r.audiences, r.integration_id).toEqual([bulk.id, closers.id].sort((x, y) => x - y));
      expect(r.closed_sessions, r.integration_id).toBe(1);
      expect(Number(r.total_sales), r.integration_id).toBe(10);
    }
  });
});
