// Loyalty cards (ext, issue 6 area J): create in a card-based program with the profiles that share
// it, read, block and unblock; validation, keys and account isolation.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManagementClient, unwrap, type ManagementClient } from '../../sdk/index.js';
import { otherAccount } from '../helpers/management-users.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';

type Err = { errors: Array<{ source?: { pointer?: string } }> };
const pointer = (r: { error?: unknown }) => (r.error as Err).errors[0]!.source?.pointer;

describe('loyalty cards', () => {
  let t: TestNode;
  let stranger: ManagementClient;
  let programID: number;
  let plainProgram: number;
  let shop: ShopSetup;

  beforeAll(async () => {
    t = await startTestNode('pglite');
    shop = await setupShop(t.url, t.admin);
    const program = (body: Record<string, unknown>) =>
      t.admin.POST('/v1/loyalty_programs', { body: { name: `c${Math.random().toString(36).slice(2, 10)}`, title: 'Card points', subscribedApplications: [shop.applicationId], ...body } as never });
    programID = unwrap(await program({ cardBased: true, usersPerCardLimit: 2 })).id;
    plainProgram = unwrap(await program({})).id;
    stranger = (await otherAccount(t.node.db, t.url, 'cards-stranger@test.local')).client;
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  const create = (c: ManagementClient, program: number, body: Record<string, unknown>) =>
    c.POST('/v1/loyalty_programs/{programID}/cards', { params: { path: { programID: program } }, body: body as never });
  const get = (c: ManagementClient, program: number, cardId: string) => c.GET('/v1/loyalty_programs/{programID}/cards/{cardId}', { params: { path: { programID: program, cardId } } });
  const put = (c: ManagementClient, program: number, cardId: string, body: Record<string, unknown>) =>
    c.PUT('/v1/loyalty_programs/{programID}/cards/{cardId}', { params: { path: { programID: program, cardId } }, body: body as never });

  it('creates a card shared by two profiles, reads it, blocks and unblocks it', async () => {
    const r = await create(t.admin, programID, { identifier: 'CARD-1', profiles: ['anna', 'ben'] });
    expect(r.response.status).toBe(201);
    const card = unwrap(r);
    expect(card).toMatchObject({ programID, programTitle: 'Card points', status: 'active', identifier: 'CARD-1', usersPerCardLimit: 2 });
    expect(card.profiles.map((p) => p.integrationId).sort()).toEqual(['anna', 'ben']);
    expect(card.blockReason).toBeUndefined();

    expect(unwrap(await get(t.admin, programID, 'CARD-1'))).toEqual(card);

    const blocked = unwrap(await put(t.admin, programID, 'CARD-1', { status: 'inactive', blockReason: 'lost' }));
    expect(blocked).toMatchObject({ status: 'inactive', blockReason: 'lost', identifier: 'CARD-1' });
    expect(unwrap(await get(t.admin, programID, 'CARD-1'))).toMatchObject({ status: 'inactive', blockReason: 'lost' });
    const unblocked = unwrap(await put(t.admin, programID, 'CARD-1', { status: 'active' }));
    expect(unblocked.status).toBe('active');
    expect(unblocked.blockReason).toBeUndefined();
    expect(unblocked.profiles).toHaveLength(2);
    // The v2 state's loyalty part lists the cards the profile shares.
    const state = unwrap(
      await shop.integration.PUT('/v2/customer_profiles/{integrationId}', {
        params: { path: { integrationId: 'ben' } },
        body: { attributes: {}, responseContent: ['loyalty'] } as never,
      }),
    ) as unknown as { loyalty: { cards: Array<Record<string, unknown>> } };
    expect(state.loyalty.cards).toHaveLength(1);
    expect(state.loyalty.cards[0]).toMatchObject({ identifier: 'CARD-1', programID: programID, status: 'active', usersPerCardLimit: 2 });
    expect((state.loyalty.cards[0]!.profiles as Array<{ integrationId: string }>).map((p) => p.integrationId).sort()).toEqual(['anna', 'ben']);
  });

  it('refuses bad input with 400 and a pointer, a taken identifier with 409', async () => {
    const tooMany = await create(t.admin, programID, { identifier: 'CARD-2', profiles: ['a', 'b', 'c'] });
    expect(tooMany.response.status).toBe(400);
    expect(pointer(tooMany)).toBe('/profiles');
    const notCardBased = await create(t.admin, plainProgram, { identifier: 'CARD-3' });
    expect(notCardBased.response.status).toBe(400);
    expect(pointer(notCardBased)).toBe('/programID');
    const empty = await create(t.admin, programID, { identifier: '' });
    expect(empty.response.status).toBe(400);
    expect(pointer(empty)).toBe('/identifier');
    const badStatus = await put(t.admin, programID, 'CARD-1', { status: 'lost' });
    expect(badStatus.response.status).toBe(400);
    expect(pointer(badStatus)).toBe('/status');
    const reasonWhileActive = await put(t.admin, programID, 'CARD-1', { status: 'active', blockReason: 'why' });
    expect(reasonWhileActive.response.status).toBe(400);
    expect(pointer(reasonWhileActive)).toBe('/blockReason');
    const again = await create(t.admin, programID, { identifier: 'CARD-1' });
    expect(again.response.status).toBe(409);
    expect(pointer(again)).toBe('/identifier');
  });

  it('401 without a valid token; 404 for unknown cards and for another account', async () => {
    const anonymous = createManagementClient({ baseUrl: t.url, token: 'nope', retries: 0 } as never);
    expect((await get(anonymous, programID, 'CARD-1')).response.status).toBe(401);
    expect((await create(anonymous, programID, { identifier: 'X' })).response.status).toBe(401);
    const missing = await get(t.admin, programID, 'NO-SUCH-CARD');
    expect(missing.response.status).toBe(404);
    expect(pointer(missing)).toBe('/cardId');
    const foreign = await get(stranger, programID, 'CARD-1');
    expect(foreign.response.status).toBe(404);
    expect(pointer(foreign)).toBe('/programID');
    expect((await put(stranger, programID, 'CARD-1', { status: 'inactive' })).response.status).toBe(404);
    expect((await create(stranger, programID, { identifier: 'THEIRS' })).response.status).toBe(404);
  });
});
