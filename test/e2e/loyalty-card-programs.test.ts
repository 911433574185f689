// Card-based loyalty programs (issue 6): points on the card's own ledger, shared by its profiles;
// pending then active with a controllable clock; blocked cards earn and spend nothing; cancel and
// returns roll back on the card; tentative balances of an open session; ledger entries on events.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIntegrationClient, login, unwrap, type ManagementClient } from '../../sdk/index.js';
import { otherAccount } from '../helpers/management-users.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, setupShop, startTestNode, TestClock, type ShopSetup, type TestNode } from '../helpers/node.js';
import { addCampaign, rule } from '../helpers/promotions.js';
import { createProgram, longKey, noopRuleset } from '../helpers/loyalty.js';

const DAY = 86_400_000;
const noop = noopRuleset;
const program = async (admin: ManagementClient, applicationId: number, body: Record<string, unknown> = {}): Promise<number> => (await createProgram(admin, applicationId, body)).id;
type Client = ShopSetup['integration'];
type Err = { errors: Array<{ title?: string; source?: { pointer?: string } }> };
const pointer = (r: { error?: unknown }) => (r.error as Err).errors[0]!.source?.pointer;
const lines = (...prices: number[]) => prices.map((price, i) => ({ name: `Item ${i}`, sku: `SKU-${i}`, quantity: 1, price }));

const updateSession = (c: Client, id: string, session: Record<string, unknown>, responseContent: string[] = [], query: Record<string, unknown> = {}) =>
  c.PUT('/v2/customer_sessions/{customerSessionId}', {
    params: { path: { customerSessionId: id }, query: query as never },
    body: { customerSession: session as never, responseContent: responseContent as never },
  });
const closeSession = (c: Client, id: string, session: Record<string, unknown>, responseContent: string[] = []) => updateSession(c, id, { state: 'closed', ...session }, responseContent);

describe('card-based loyalty programs (PGlite, controllable clock)', () => {
  let t: TestNode;
  const clock = new TestClock();
  let shop: ShopSetup;
  let other: ShopSetup;
  let cardProgram: number;
  let plainProgram: number;

  beforeAll(async () => {
    t = await startTestNode('pglite', { clock, loyaltySchedulerMs: 100 });
    shop = await longKey(t, await setupShop(t.url, t.admin, { ruleset: noop }));
    other = await longKey(t, await setupShop(t.url, t.admin, { ruleset: noop }));
    cardProgram = await program(t.admin, shop.applicationId, { cardBased: true, usersPerCardLimit: 2, defaultPending: '2D', tiers: [{ name: 'Silver', minPoints: 100 }] });
    plainProgram = await program(t.admin, shop.applicationId);
    // Earn the total on the card on purchases of 10 or more, spend 50 of it on smaller ones (not on events: no cart).
    await addCampaign(t.admin, shop.applicationId, [
      rule(['>=', ['.', 'Session', 'Total'], 10], [['addLoyaltyPoints', cardProgram, ['.', 'Session', 'Total'], { name: 'purchase' }]], 'earn'),
      rule(['and', ['<', ['.', 'Session', 'Total'], 10], ['>', ['.', 'Session', 'Total'], 0]], [['deductLoyaltyPoints', cardProgram, 50, { name: 'redeem' }]], 'spend'),
    ]);
    for (const [identifier, profiles] of [
      ['CARD-A', ['anna', 'ben']],
      ['CARD-B', ['carl']],
      ['CARD-C', ['dina']],
    ] as const) {
      unwrap(await t.admin.POST('/v1/loyalty_programs/{programID}/cards', { params: { path: { programID: cardProgram } }, body: { identifier, profiles: [...profiles] } }));
    }
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  /** Management tokens expire with the moved clock: log in again. */
  const relogin = async () => {
    t.admin = (await login({ baseUrl: t.url, email: ADMIN_EMAIL, password: ADMIN_PASSWORD, retries: 0 })).client;
  };
  const card = async (identifier: string) =>
    unwrap(await t.admin.GET('/v1/loyalty_programs/{programID}/cards/{cardId}', { params: { path: { programID: cardProgram, cardId: identifier } } }));
  /** The profile's v2 loyalty state (a profile update with responseContent loyalty). */
  const loyaltyOf = async (c: Client, integrationId: string) =>
    unwrap(await c.PUT('/v2/customer_profiles/{integrationId}', { params: { path: { integrationId } }, body: { attributes: {}, responseContent: ['loyalty'] } })).loyalty!;
  const reasons = (r: { ruleFailureReasons?: Array<Record<string, unknown>> }) => (r.ruleFailureReasons ?? []).map((f) => String(f.details).split(':')[0]);

  it('two profiles on one card earn on close (pending, then active) and spend the shared points', async () => {
    const closed = unwrap(await closeSession(shop.integration, 'anna-1', { profileId: 'anna', loyaltyCards: ['CARD-A'], cartItems: lines(100, 20) }, ['event']));
    const add = closed.effects.find((e) => e.effectType === 'addLoyaltyPoints');
    expect(add?.props).toMatchObject({ programId: cardProgram, value: 120, cardIdentifier: 'CARD-A', name: 'purchase' });
    // The close's event lists the transaction on the card's ledger and the transaction records the event.
    const event = closed.event!;
    expect(event.ledgerEntries).toEqual([
      {
        id: expect.any(Number),
        created: expect.any(String),
        profileId: 'anna',
        accountId: expect.any(Number),
        loyaltyProgramId: cardProgram,
        eventId: event.id,
        amount: 120,
        reason: 'purchase',
        cardIdentifier: 'CARD-A',
      },
    ]);
    const [row] = await t.node.db.query<{ event_id: string; card_id: number | null; profile_id: number | null }>(`SELECT event_id, card_id, profile_id FROM loyalty_transactions WHERE id = $1`, [
      event.ledgerEntries![0]!.id,
    ]);
    expect(Number(row!.event_id)).toBe(event.id);
    expect(row!.profile_id).toBeNull();
    expect(row!.card_id).not.toBeNull();

    // Ben shares the card: he sees the same points, pending for two days; nobody's own ledger has them.
    const ben = await loyaltyOf(shop.integration, 'ben');
    expect(ben.cards).toHaveLength(1);
    expect(ben.cards[0]).toMatchObject({ identifier: 'CARD-A', programID: cardProgram, status: 'active' });
    expect(ben.cards[0]!.ledger).toMatchObject({ currentBalance: 0, pendingBalance: 120, spentBalance: 0, negativeBalance: 0, pointsToNextTier: 100 });
    expect(ben.programs).toEqual({});
    expect((await loyaltyOf(shop.integration, 'anna')).cards[0]!.ledger).toMatchObject({ pendingBalance: 120 });
    expect((await card('CARD-A')).ledger).toMatchObject({ currentBalance: 0, pendingBalance: 120 });

    // Pending points cannot be spent: the deduction is refused with its reason.
    const early = unwrap(await closeSession(shop.integration, 'ben-early', { profileId: 'ben', loyaltyCards: ['CARD-A'], cartItems: lines(5) }, ['ruleFailureReasons']));
    expect(early.effects.map((e) => e.effectType)).not.toContain('deductLoyaltyPoints');
    expect(reasons(early)).toContain('InsufficientLoyaltyPoints');

    clock.advance(2 * DAY + 60_000);
    await relogin();
    expect((await card('CARD-A')).ledger).toMatchObject({ currentBalance: 120, pendingBalance: 0, currentTier: { name: 'Silver' } });
    const spent = unwrap(await closeSession(shop.integration, 'ben-spend', { profileId: 'ben', loyaltyCards: ['CARD-A'], cartItems: lines(5) }, ['loyalty', 'event']));
    expect(spent.effects.find((e) => e.effectType === 'deductLoyaltyPoints')?.props).toMatchObject({ value: 50, cardIdentifier: 'CARD-A' });
    expect(spent.event!.ledgerEntries).toMatchObject([{ amount: -50, reason: 'redeem', profileId: 'ben', cardIdentifier: 'CARD-A', eventId: spent.event!.id }]);
    // Closed: the tentative balances are the committed ones.
    expect(spent.loyalty!.cards[0]!.ledger).toMatchObject({ currentBalance: 70, spentBalance: 50, tentativeCurrentBalance: 70, tentativePendingBalance: 0 });
    expect((await loyaltyOf(shop.integration, 'anna')).cards[0]!.ledger).toMatchObject({ currentBalance: 70, spentBalance: 50 });
    expect((await card('CARD-A')).ledger).toMatchObject({ currentBalance: 70, spentBalance: 50 });
  });

  it('earns and spends nothing without a card or with a blocked one, and says why', async () => {
    const before = (await card('CARD-B')).ledger;
    const none = unwrap(await closeSession(shop.integration, 'carl-none', { profileId: 'carl', cartItems: lines(40) }, ['ruleFailureReasons']));
    expect(none.effects.map((e) => e.effectType)).not.toContain('addLoyaltyPoints');
    expect(reasons(none)).toEqual(['LoyaltyCardRequired']);
    // A card of no program of the Application is no card of this program.
    const unknown = unwrap(await closeSession(shop.integration, 'carl-unknown', { profileId: 'carl', loyaltyCards: ['NO-SUCH-CARD'], cartItems: lines(40) }, ['ruleFailureReasons']));
    expect(reasons(unknown)).toEqual(['LoyaltyCardRequired']);

    unwrap(await t.admin.PUT('/v1/loyalty_programs/{programID}/cards/{cardId}', { params: { path: { programID: cardProgram, cardId: 'CARD-B' } }, body: { status: 'inactive', blockReason: 'lost' } }));
    const blocked = unwrap(await closeSession(shop.integration, 'carl-blocked', { profileId: 'carl', loyaltyCards: ['CARD-B'], cartItems: lines(40) }, ['ruleFailureReasons']));
    expect(blocked.effects.map((e) => e.effectType)).not.toContain('addLoyaltyPoints');
    expect(reasons(blocked)).toEqual(['LoyaltyCardBlocked']);
    const blockedSpend = unwrap(await closeSession(shop.integration, 'carl-blocked-spend', { profileId: 'carl', loyaltyCards: ['CARD-B'], cartItems: lines(5) }, ['ruleFailureReasons']));
    expect(reasons(blockedSpend)).toEqual(['LoyaltyCardBlocked']);
    expect((await card('CARD-B')).ledger).toEqual(before);
    // Cancelling a close that earned nothing changes nothing either.
    unwrap(await updateSession(shop.integration, 'carl-blocked', { state: 'cancelled' }));
    expect((await card('CARD-B')).ledger).toEqual(before);

    unwrap(await t.admin.PUT('/v1/loyalty_programs/{programID}/cards/{cardId}', { params: { path: { programID: cardProgram, cardId: 'CARD-B' } }, body: { status: 'active' } }));
    unwrap(await closeSession(shop.integration, 'carl-again', { profileId: 'carl', loyaltyCards: ['CARD-B'], cartItems: lines(40) }));
    expect((await card('CARD-B')).ledger).toMatchObject({ pendingBalance: 40 });
  });

  it('a cancel and a return roll back on the card', async () => {
    unwrap(await closeSession(shop.integration, 'dina-1', { profileId: 'dina', loyaltyCards: ['CARD-C'], cartItems: lines(150, 50) }));
    expect((await card('CARD-C')).ledger).toMatchObject({ pendingBalance: 200 });
    const returned = unwrap(
      await shop.integration.POST('/v2/customer_sessions/{customerSessionId}/returns', {
        params: { path: { customerSessionId: 'dina-1' } },
        body: { return: { returnedCartItems: [{ position: 1 }] }, responseContent: ['event'] },
      }),
    );
    expect((await card('CARD-C')).ledger).toMatchObject({ pendingBalance: 150 });
    expect(returned.event!.ledgerEntries).toMatchObject([{ amount: -50, reason: 'rollback', cardIdentifier: 'CARD-C', referenceId: expect.any(Number), eventId: returned.event!.id }]);

    clock.advance(2 * DAY + 60_000);
    await relogin();
    unwrap(await closeSession(shop.integration, 'dina-spend', { profileId: 'dina', loyaltyCards: ['CARD-C'], cartItems: lines(5) }));
    // Spent counts the return's rollback of 50 too.
    expect((await card('CARD-C')).ledger).toMatchObject({ currentBalance: 100, spentBalance: 100 });
    const undo = unwrap(await updateSession(shop.integration, 'dina-spend', { state: 'cancelled' }, ['event']));
    expect(undo.effects.map((e) => e.effectType)).toContain('rollbackDeductedLoyaltyPoints');
    expect(undo.event!.ledgerEntries).toMatchObject([{ amount: 50, reason: 'rollback', cardIdentifier: 'CARD-C' }]);
    expect((await card('CARD-C')).ledger).toMatchObject({ currentBalance: 150, spentBalance: 50 });
    unwrap(await updateSession(shop.integration, 'dina-1', { state: 'cancelled' }));
    expect((await card('CARD-C')).ledger).toMatchObject({ currentBalance: 0, pendingBalance: 0 });
  });

  it('shows tentative balances of an open session, and of a dry run, on cards and programs', async () => {
    const immediate = await program(t.admin, shop.applicationId, { name: `now${Date.now()}` });
    await addCampaign(t.admin, shop.applicationId, [rule(['>=', ['.', 'Session', 'Total'], 1000], [['addLoyaltyPoints', immediate, 7, { name: 'big' }]], 'big spender')]);
    const pendingBefore = (await card('CARD-A')).ledger.pendingBalance;
    const open = unwrap(await updateSession(shop.integration, 'anna-open', { profileId: 'anna', loyaltyCards: ['CARD-A'], cartItems: lines(1000) }, ['loyalty']));
    const onCard = open.loyalty!.cards.find((c) => c.identifier === 'CARD-A')!;
    expect(onCard.ledger).toMatchObject({ pendingBalance: pendingBefore, tentativePendingBalance: pendingBefore + 1000, currentBalance: 70, tentativeCurrentBalance: 70 });
    // A program the profile joins only on close shows what it would hold.
    const joining = Object.values(open.loyalty!.programs).find((p) => p.id === immediate)!;
    expect(joining.joinDate).toBeUndefined();
    expect(joining.ledger).toMatchObject({ currentBalance: 0, tentativeCurrentBalance: 7 });
    // Nothing is committed by an open session.
    expect((await card('CARD-A')).ledger.pendingBalance).toBe(pendingBefore);

    // A smaller cart spends instead: tentatively 50 less.
    const spending = unwrap(await updateSession(shop.integration, 'anna-open', { cartItems: lines(5) }, ['loyalty']));
    expect(spending.loyalty!.cards.find((c) => c.identifier === 'CARD-A')!.ledger).toMatchObject({ currentBalance: 70, tentativeCurrentBalance: 20 });
    const dry = unwrap(await updateSession(shop.integration, 'anna-dry', { profileId: 'anna', loyaltyCards: ['CARD-A'], cartItems: lines(5), state: 'closed' }, ['loyalty'], { dry: true }));
    expect(dry.loyalty!.cards.find((c) => c.identifier === 'CARD-A')!.ledger).toMatchObject({ currentBalance: 70, tentativeCurrentBalance: 20 });

    const closed = unwrap(await updateSession(shop.integration, 'anna-open', { cartItems: lines(1000), state: 'closed' }, ['loyalty']));
    const after = closed.loyalty!.cards.find((c) => c.identifier === 'CARD-A')!.ledger;
    expect(after).toMatchObject({ pendingBalance: pendingBefore + 1000, tentativePendingBalance: pendingBefore + 1000 });
    expect(Object.values(closed.loyalty!.programs).find((p) => p.id === immediate)!.ledger).toMatchObject({ currentBalance: 7, tentativeCurrentBalance: 7 });
  });

  it('custom events earn with ledger entries that carry the event id', async () => {
    unwrap(await t.admin.POST('/v1/attributes', { body: { entity: 'Event', eventType: 'reviewed', name: 'stars', type: 'number', title: 'stars' } }));
    await addCampaign(t.admin, shop.applicationId, [
      rule(['=', ['.', 'Event', 'Type'], 'reviewed'], [['addLoyaltyPoints', plainProgram, 5, { name: 'review' }], ['addLoyaltyPoints', cardProgram, 3, { name: 'card review' }]], 'reviews'),
    ]);
    const r = unwrap(
      await shop.integration.POST('/v2/events', {
        body: { profileId: 'erik', type: 'reviewed', attributes: { stars: 4 }, loyaltyCards: ['CARD-B'], responseContent: ['event', 'loyalty'] } as never,
      }),
    );
    const event = r.event!;
    expect(event.ledgerEntries).toEqual([
      expect.objectContaining({ profileId: 'erik', loyaltyProgramId: plainProgram, amount: 5, reason: 'review', eventId: event.id }),
      expect.objectContaining({ profileId: 'erik', loyaltyProgramId: cardProgram, amount: 3, reason: 'card review', cardIdentifier: 'CARD-B', eventId: event.id }),
    ]);
    // Named by the event, the card shows in the state though erik does not share it.
    expect(r.loyalty!.cards.map((c) => c.identifier)).toEqual(['CARD-B']);
    const l = unwrap(await t.admin.GET('/v1/loyalty_programs/{programID}/profile/{integrationID}', { params: { path: { programID: plainProgram, integrationID: 'erik' } } }));
    expect(l.ledger.transactions.map((x) => [x.type, x.amount, x.eventID])).toEqual([['addition', 5, event.id]]);
  });

  it('shows each of several named cards with its own ledger, as the card itself shows it', async () => {
    const ids = ['CARD-A', 'CARD-B', 'CARD-C'];
    const r = unwrap(await updateSession(shop.integration, 'several-cards', { profileId: 'anna', loyaltyCards: ids, cartItems: lines(1) }, ['loyalty']));
    const committed = (l: unknown) => {
      const { currentBalance, pendingBalance, spentBalance, negativeBalance } = l as Record<string, unknown>;
      return { currentBalance, pendingBalance, spentBalance, negativeBalance };
    };
    const shown = Object.fromEntries(r.loyalty!.cards.map((c) => [c.identifier, committed(c.ledger)]));
    const own = Object.fromEntries(await Promise.all(ids.map(async (id) => [id, committed((await card(id)).ledger)] as const)));
    expect(shown).toEqual(own);
    // The three differ, so a ledger shown on the wrong card would not pass.
    expect(new Set(Object.values(own).map((l) => JSON.stringify(l))).size).toBe(3);
  });

  it('refuses bad input with the error body, and keeps cards to their Application and account', async () => {
    const badCards = await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
      params: { path: { customerSessionId: 'bad-cards' } },
      body: { customerSession: { profileId: 'anna', loyaltyCards: 'CARD-A' } as never },
    });
    expect(badCards.response.status).toBe(400);
    expect(pointer(badCards)).toBe('/customerSession/loyaltyCards');
    const badEvent = await shop.integration.POST('/v2/events', { body: { profileId: 'anna', type: 'reviewed', attributes: { stars: 1 }, loyaltyCards: [1] } as never });
    expect(badEvent.response.status).toBe(400);
    expect(pointer(badEvent)).toMatch(/^\/loyaltyCards/);
    const badFlag = await t.admin.PUT('/v1/loyalty_programs/{programID}', { params: { path: { programID: cardProgram } }, body: { allowNegativeBalance: 'yes' } as never });
    expect(badFlag.response.status).toBe(400);
    expect(pointer(badFlag)).toBe('/allowNegativeBalance');

    const anonymous = createIntegrationClient({ baseUrl: t.url, apiKey: 'not-a-key', retries: 0 });
    expect((await closeSession(anonymous, 'x-1', { profileId: 'anna', loyaltyCards: ['CARD-A'], cartItems: lines(40) })).response.status).toBe(401);

    // The other Application does not subscribe to the program: naming the card there shows and earns nothing.
    const ledger = (await card('CARD-A')).ledger;
    await addCampaign(t.admin, other.applicationId, [rule(true, [['addLoyaltyPoints', cardProgram, 10]], 'foreign')]);
    const foreign = unwrap(await closeSession(other.integration, 'foreign-1', { profileId: 'anna', loyaltyCards: ['CARD-A'], cartItems: lines(40) }, ['loyalty', 'ruleFailureReasons']));
    expect(foreign.loyalty!.cards).toEqual([]);
    expect(reasons(foreign)).toEqual(['LoyaltyProgramNotFound']);
    expect((await card('CARD-A')).ledger).toEqual(ledger);

    // Another account neither reads the card nor its ledger.
    const stranger = (await otherAccount(t.node.db, t.url, 'card-programs-stranger@test.local')).client;
    const theirs = await stranger.GET('/v1/loyalty_programs/{programID}/cards/{cardId}', { params: { path: { programID: cardProgram, cardId: 'CARD-A' } } });
    expect(theirs.response.status).toBe(404);
    expect(JSON.stringify(theirs.error)).not.toContain('currentBalance');
  });
});
