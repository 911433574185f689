// Loyalty notifications (issue 7): LoyaltyPointsAdded / LoyaltyPointsDeducted from closes, events,
// profile updates, rollbacks and the Management API; TierUpgrade / TierDowngrade once per crossing
// (by a change, or by the scheduler when points become active or expire); LoyaltyPointsExpiring
// once per grant before its expiry. Delivered by a running node to the real receiver, each body
// exact and checked against openapi/notifications.yaml; the clock is moved (TestClock).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { login, unwrap } from '../../sdk/index.js';
import { createProgram, longKey, noopRuleset } from '../helpers/loyalty.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, setupShop, startTestNode, TestClock, type ShopSetup, type TestNode } from '../helpers/node.js';
import { contractErrors, notificationsAt, sleep, subscribe, waitForNotifications, type Notification } from '../helpers/notifications.js';
import { addCampaign, rule } from '../helpers/promotions.js';
import { Receiver } from '../helpers/receiver.js';

const DAY = 86_400_000;
const LOYALTY_TYPES = ['LoyaltyPointsAdded', 'LoyaltyPointsDeducted', 'LoyaltyPointsExpiring', 'TierUpgrade', 'TierDowngrade'];
type Client = ShopSetup['integration'];
type Body = Record<string, any>;

const lines = (...prices: number[]) => prices.map((price, i) => ({ name: `Item ${i}`, sku: `SKU-${i}`, quantity: 1, price }));
const updateSession = (c: Client, id: string, session: Record<string, unknown>) =>
  c.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: id } }, body: { customerSession: session as never } });
const touch = (c: Client, integrationId: string) => c.PUT('/v2/customer_profiles/{integrationId}', { params: { path: { integrationId } }, body: { attributes: {} } as never });
const iso = (ms: number) => new Date(ms).toISOString();

describe('loyalty notifications (PGlite, controllable clock)', () => {
  let t: TestNode;
  let rx: Receiver;
  const clock = new TestClock();
  let shop: ShopSetup;
  let pid: number;
  let employee: string;
  let adminId: number;
  const at = '/loyalty';

  beforeAll(async () => {
    rx = await Receiver.start();
    t = await startTestNode('pglite', { clock, loyaltySchedulerMs: 100, outbox: { pollMs: 50, backoffMs: 20, maxBackoffMs: 100, timeoutMs: 2000, leaseMarginMs: 500 } });
    shop = await longKey(t, await setupShop(t.url, t.admin, { ruleset: noopRuleset }));
    pid = (
      await createProgram(t.admin, shop.applicationId, {
        defaultValidity: '30D',
        tiers: [
          { name: 'Silver', minPoints: 100 },
          { name: 'Gold', minPoints: 300 },
        ],
      })
    ).id;
    unwrap(await t.admin.POST('/v1/attributes', { body: { entity: 'Event', eventType: 'review', name: 'stars', type: 'number', title: 'stars' } as never }));
    await addCampaign(t.admin, shop.applicationId, [
      rule(['>=', ['.', 'Session', 'Total'], 10], [['addLoyaltyPoints', pid, ['.', 'Session', 'Total'], { name: 'purchase' }]], 'earn'),
      rule(['and', ['<', ['.', 'Session', 'Total'], 10], ['>', ['.', 'Session', 'Total'], 0], ['>=', ['loyaltyBalance', pid], 50]], [['deductLoyaltyPoints', pid, 50, { name: 'redeem' }]], 'spend'),
      rule(['eventType', 'review'], [['addLoyaltyPoints', pid, 10, { name: 'review' }]], 'review'),
      rule(['eventType', 'service_profile_updated'], [['addLoyaltyPoints', pid, 5, { name: 'welcome' }]], 'welcome'),
    ]);
    await subscribe(t.admin, rx, shop.applicationId, at, LOYALTY_TYPES);
    const [u] = await t.node.db.query<{ id: number; name: string; email: string }>(`SELECT id, name, email FROM users WHERE email = $1`, [ADMIN_EMAIL]);
    employee = u!.name || u!.email;
    adminId = u!.id;
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
    await rx?.stop();
  });

  /** Management tokens expire with the moved clock: log in again. */
  const relogin = async () => {
    t.admin = (await login({ baseUrl: t.url, email: ADMIN_EMAIL, password: ADMIN_PASSWORD, retries: 0 })).client;
  };
  /** The loyalty notifications about a profile (of one type), each checked against the contract. */
  const about = (profile: string, type?: string, programId = pid): Notification[] => {
    const got = notificationsAt(rx, at, type).filter((n) => n.body.ProfileIntegrationID === profile && n.body.ProgramID === programId);
    for (const n of got) expect(contractErrors(n.type, n.body), n.raw).toEqual([]);
    return got;
  };
  const waitAbout = async (profile: string, count: number, type?: string, programId = pid): Promise<Body[]> => {
    const deadline = Date.now() + 10_000;
    while (about(profile, type, programId).length < count) {
      if (Date.now() > deadline) throw new Error(`waited for ${count} ${type ?? ''} about ${profile}; got ${JSON.stringify(about(profile, undefined, programId).map((n) => n.body))}`);
      await sleep(50);
    }
    return about(profile, type, programId).map((n) => n.body);
  };
  /** The ids of the profile's transactions of a type, oldest first. */
  const transactions = async (profile: string, type: string) =>
    (
      await t.node.db.query<{ id: string }>(
        `SELECT t.id::text FROM loyalty_transactions t JOIN customer_profiles p ON p.id = t.profile_id AND p.integration_id = $2 WHERE t.program_id = $1 AND t.type = $3 ORDER BY t.id`,
        [pid, profile, type],
      )
    ).map((r) => Number(r.id));
  const addPoints = (integrationID: string, body: Record<string, unknown>, programID = pid) =>
    t.admin.PUT('/v1/loyalty_programs/{programID}/profile/{integrationID}/add_points', { params: { path: { programID, integrationID } }, body: body as never });
  const deductPoints = (integrationID: string, body: Record<string, unknown>, programID = pid) =>
    t.admin.PUT('/v1/loyalty_programs/{programID}/profile/{integrationID}/deduct_points', { params: { path: { programID, integrationID } }, body: body as never });

  it('sends LoyaltyPointsAdded on close and TierUpgrade when the balance reaches a tier; a deduction and its cancel as Deducted and Added', async () => {
    const closedAt = clock.now().getTime();
    unwrap(await updateSession(shop.integration, 'ann-1', { profileId: 'ann', state: 'closed', cartItems: lines(150) }));
    await waitAbout('ann', 2);
    const [grant] = await transactions('ann', 'addition');
    const [added] = about('ann', 'LoyaltyPointsAdded').map((n) => n.body);
    expect(added).toEqual({
      NotificationType: 'LoyaltyPointsAdded',
      ProgramID: pid,
      ProfileIntegrationID: 'ann',
      SubLedgerID: '',
      Amount: 150,
      Reason: 'purchase',
      TypeOfChange: 'rule_engine',
      EmployeeName: '',
      SessionIntegrationID: 'ann-1',
      TransactionID: grant,
      StartDate: added!.Created,
      ExpiryDate: iso(Date.parse(added!.Created) + 30 * DAY),
      Created: expect.any(String),
    });
    expect(Math.abs(Date.parse(added!.Created) - closedAt)).toBeLessThan(5000);
    const [upgrade] = about('ann', 'TierUpgrade').map((n) => n.body);
    expect(upgrade).toEqual({
      NotificationType: 'TierUpgrade',
      ProgramID: pid,
      ProfileIntegrationID: 'ann',
      OldTier: null,
      NewTier: { Name: 'Silver', MinPoints: 100 },
      ActivePoints: 150,
      Timestamp: added!.Created,
    });

    // 150 − 50 = 100: still Silver, so no tier notification.
    unwrap(await updateSession(shop.integration, 'ann-2', { profileId: 'ann', state: 'closed', cartItems: lines(5) }));
    const [deducted] = await waitAbout('ann', 1, 'LoyaltyPointsDeducted');
    const [spend] = await transactions('ann', 'subtraction');
    expect(deducted).toEqual({
      NotificationType: 'LoyaltyPointsDeducted',
      ProgramID: pid,
      ProfileIntegrationID: 'ann',
      SubLedgerID: '',
      Amount: 50,
      Reason: 'redeem',
      TypeOfChange: 'rule_engine',
      EmployeeName: '',
      SessionIntegrationID: 'ann-2',
      TransactionID: spend,
      Created: expect.any(String),
    });
    // The cancel gives the 50 points back: a rollback notified as an addition of the deduction.
    unwrap(await updateSession(shop.integration, 'ann-2', { state: 'cancelled' }));
    const back = (await waitAbout('ann', 2, 'LoyaltyPointsAdded'))[1];
    expect(back).toEqual({
      NotificationType: 'LoyaltyPointsAdded',
      ProgramID: pid,
      ProfileIntegrationID: 'ann',
      SubLedgerID: '',
      Amount: 50,
      Reason: 'rollback',
      TypeOfChange: 'rule_engine',
      EmployeeName: '',
      SessionIntegrationID: 'ann-2',
      TransactionID: spend,
      Created: expect.any(String),
    });
    // Cancelling the purchase takes its 150 back: a deduction, and the tier falls (150 → 0).
    unwrap(await updateSession(shop.integration, 'ann-1', { state: 'cancelled' }));
    const [taken] = await waitAbout('ann', 2, 'LoyaltyPointsDeducted').then((d) => d.slice(1));
    const rollback = (await transactions('ann', 'subtraction')).at(-1);
    expect(taken).toMatchObject({ Amount: 150, Reason: 'rollback', SessionIntegrationID: 'ann-1', TransactionID: rollback });
    const [downgrade] = await waitAbout('ann', 1, 'TierDowngrade');
    expect(downgrade).toMatchObject({ OldTier: { Name: 'Silver', MinPoints: 100 }, NewTier: null, ActivePoints: 0 });
    await sleep(300);
    expect(about('ann').map((n) => n.type)).toEqual(['LoyaltyPointsAdded', 'TierUpgrade', 'LoyaltyPointsDeducted', 'LoyaltyPointsAdded', 'LoyaltyPointsDeducted', 'TierDowngrade']);
  });

  it('sends the Management API’s additions and deductions with the user, and each tier crossing once', async () => {
    unwrap(await touch(shop.integration, 'bea'));
    unwrap(await addPoints('bea', { points: 120, name: 'bonus' }));
    const [added] = await waitAbout('bea', 1, 'LoyaltyPointsAdded');
    const [grant] = await transactions('bea', 'addition');
    expect(added).toEqual({
      NotificationType: 'LoyaltyPointsAdded',
      ProgramID: pid,
      ProfileIntegrationID: 'bea',
      SubLedgerID: '',
      Amount: 120,
      Reason: 'bonus',
      TypeOfChange: 'management_api',
      EmployeeName: employee,
      UserID: adminId,
      SessionIntegrationID: '',
      TransactionID: grant,
      StartDate: added!.Created,
      ExpiryDate: iso(Date.parse(added!.Created) + 30 * DAY),
      Created: expect.any(String),
    });
    expect((await waitAbout('bea', 1, 'TierUpgrade'))[0]).toMatchObject({ OldTier: null, NewTier: { Name: 'Silver', MinPoints: 100 }, ActivePoints: 120 });
    unwrap(await addPoints('bea', { points: 200 }));
    expect((await waitAbout('bea', 2, 'TierUpgrade'))[1]).toMatchObject({ OldTier: { Name: 'Silver', MinPoints: 100 }, NewTier: { Name: 'Gold', MinPoints: 300 }, ActivePoints: 320 });
    // Staying in Gold is no crossing.
    unwrap(await addPoints('bea', { points: 10 }));
    unwrap(await deductPoints('bea', { points: 300, name: 'gift' }));
    const [deducted] = await waitAbout('bea', 1, 'LoyaltyPointsDeducted');
    expect(deducted).toEqual({
      NotificationType: 'LoyaltyPointsDeducted',
      ProgramID: pid,
      ProfileIntegrationID: 'bea',
      SubLedgerID: '',
      Amount: 300,
      Reason: 'gift',
      TypeOfChange: 'management_api',
      EmployeeName: employee,
      UserID: adminId,
      SessionIntegrationID: '',
      TransactionID: (await transactions('bea', 'subtraction'))[0],
      Created: expect.any(String),
    });
    expect((await waitAbout('bea', 1, 'TierDowngrade'))[0]).toMatchObject({ OldTier: { Name: 'Gold', MinPoints: 300 }, NewTier: null, ActivePoints: 30 });
    // A refused deduction (more than the balance) notifies nothing.
    expect((await deductPoints('bea', { points: 1000 })).response.status).toBe(400);
    await sleep(300);
    expect(about('bea').map((n) => n.type)).toEqual([
      'LoyaltyPointsAdded',
      'TierUpgrade',
      'LoyaltyPointsAdded',
      'TierUpgrade',
      'LoyaltyPointsAdded',
      'LoyaltyPointsDeducted',
      'TierDowngrade',
    ]);
  });

  it('sends the points of custom events and profile updates, naming the session they were committed with', async () => {
    unwrap(await shop.integration.POST('/v2/events', { body: { profileId: 'cid', type: 'review', attributes: { stars: 5 }, sessionId: 'cid-s' } as never }));
    const [review] = await waitAbout('cid', 1, 'LoyaltyPointsAdded');
    expect(review).toMatchObject({ Amount: 10, Reason: 'review', TypeOfChange: 'rule_engine', SessionIntegrationID: 'cid-s' });
    unwrap(await shop.integration.PUT('/v2/customer_profiles/{integrationId}', { params: { path: { integrationId: 'cid' }, query: { runRuleEngine: true } }, body: { attributes: {} } as never }));
    const welcome = (await waitAbout('cid', 2, 'LoyaltyPointsAdded'))[1];
    expect(welcome).toMatchObject({ Amount: 5, Reason: 'welcome', TypeOfChange: 'rule_engine', SessionIntegrationID: expect.any(String) });
    expect(about('cid', 'TierUpgrade')).toEqual([]);
  });

  it('sends a card-based program’s changes with the card and the profile whose session made them', async () => {
    const card = (
      await createProgram(t.admin, shop.applicationId, { cardBased: true, tiers: [{ name: 'Bronze', minPoints: 10 }] })
    ).id;
    unwrap(await t.admin.POST('/v1/loyalty_programs/{programID}/cards', { params: { path: { programID: card } }, body: { identifier: 'CARD-7', profiles: ['fin', 'gus'] } }));
    await addCampaign(t.admin, shop.applicationId, [rule(['>', ['count', ['.', 'Session', 'LoyaltyCards']], 0], [['addLoyaltyPoints', card, 20, { name: 'card purchase' }]], 'card')]);
    unwrap(await updateSession(shop.integration, 'gus-1', { profileId: 'gus', loyaltyCards: ['CARD-7'], state: 'closed', cartItems: lines(5) }));
    const [added] = await waitAbout('gus', 1, 'LoyaltyPointsAdded', card);
    expect(added).toMatchObject({ ProgramID: card, ProfileIntegrationID: 'gus', CardIdentifier: 'CARD-7', Amount: 20, Reason: 'card purchase', SessionIntegrationID: 'gus-1' });
    const [upgrade] = await waitAbout('gus', 1, 'TierUpgrade', card);
    expect(upgrade).toEqual({
      NotificationType: 'TierUpgrade',
      ProgramID: card,
      ProfileIntegrationID: 'gus',
      CardIdentifier: 'CARD-7',
      OldTier: null,
      NewTier: { Name: 'Bronze', MinPoints: 10 },
      ActivePoints: 20,
      Timestamp: expect.any(String),
    });
  });

  it('goes to every Application of the program, and nowhere when none of them subscribes', async () => {
    const a = await longKey(t, await setupShop(t.url, t.admin, { ruleset: noopRuleset }));
    const b = await longKey(t, await setupShop(t.url, t.admin, { ruleset: noopRuleset }));
    const shared = (await createProgram(t.admin, a.applicationId, { subscribedApplications: [a.applicationId, b.applicationId] })).id;
    const lonely = (await createProgram(t.admin, a.applicationId)).id;
    await addCampaign(t.admin, a.applicationId, [
      rule(true, [
        ['addLoyaltyPoints', shared, 7, { name: 'shared' }],
        ['addLoyaltyPoints', lonely, 3, { name: 'lonely' }],
      ]),
    ]);
    // Only b listens; a's closes reach it through the shared program.
    await subscribe(t.admin, rx, b.applicationId, '/loyalty-b', LOYALTY_TYPES);
    unwrap(await updateSession(a.integration, 'hal-1', { profileId: 'hal', state: 'closed', cartItems: lines(1) }));
    const [got] = await waitForNotifications(rx, '/loyalty-b', 1, 'LoyaltyPointsAdded');
    expect(got!.body).toMatchObject({ ProgramID: shared, ProfileIntegrationID: 'hal', Amount: 7, SessionIntegrationID: 'hal-1' });
    await sleep(300);
    expect(notificationsAt(rx, '/loyalty-b')).toHaveLength(1);
    const rows = await t.node.db.query<{ application_id: number; n: number }>(
      `SELECT application_id, count(*)::int AS n FROM outbox WHERE application_id = ANY($1::int[]) GROUP BY application_id ORDER BY application_id`,
      [[a.applicationId, b.applicationId]],
    );
    expect(rows).toEqual([{ application_id: b.applicationId, n: 1 }]);
  });

  it('shows the program’s expiringPointsNotice (default 7D), changes it, and refuses one that is not a duration', async () => {
    const made = await createProgram(t.admin, shop.applicationId);
    expect(made.expiringPointsNotice).toBe('7D');
    const path = { params: { path: { programID: made.id } } };
    expect(unwrap(await t.admin.PUT('/v1/loyalty_programs/{programID}', { ...path, body: { expiringPointsNotice: '36h' } })).expiringPointsNotice).toBe('36h');
    expect(unwrap(await t.admin.GET('/v1/loyalty_programs/{programID}', path)).expiringPointsNotice).toBe('36h');
    const bad = await t.admin.PUT('/v1/loyalty_programs/{programID}', { ...path, body: { expiringPointsNotice: '3 days' } as never });
    expect(bad.response.status).toBe(400);
    expect((bad.error as { errors: Array<{ source: { pointer: string } }> }).errors[0]!.source.pointer).toBe('/expiringPointsNotice');
  });

  it('activates pending points by the scheduler, which notifies the tier they reach once', async () => {
    unwrap(await touch(shop.integration, 'eve'));
    unwrap(await addPoints('eve', { points: 120, name: 'later', pendingDuration: '1D' }));
    const [added] = await waitAbout('eve', 1, 'LoyaltyPointsAdded');
    expect(Date.parse(added!.StartDate) - Date.parse(added!.Created)).toBe(DAY);
    expect(Date.parse(added!.ExpiryDate) - Date.parse(added!.StartDate)).toBe(30 * DAY);
    await sleep(300);
    expect(about('eve', 'TierUpgrade')).toEqual([]);
    clock.advance(DAY + 60_000);
    const [upgrade] = await waitAbout('eve', 1, 'TierUpgrade');
    expect(upgrade).toMatchObject({ OldTier: null, NewTier: { Name: 'Silver', MinPoints: 100 }, ActivePoints: 120 });
    await sleep(400);
    expect(about('eve', 'TierUpgrade')).toHaveLength(1);
    await relogin();
  });

  it('announces a grant once, expiringPointsNotice before its expiry, and the tier it leaves when it expires', async () => {
    unwrap(await touch(shop.integration, 'dan'));
    const start = clock.now().getTime();
    unwrap(await addPoints('dan', { points: 150, name: 'bonus' }));
    unwrap(await addPoints('dan', { points: 40, name: 'forever', expiryDuration: 'unlimited' }));
    await waitAbout('dan', 1, 'TierUpgrade');
    const [grant] = await transactions('dan', 'addition');
    // 22 days on, the expiry (day 30) is still more than 7 days away.
    clock.advance(22 * DAY);
    await sleep(400);
    expect(about('dan', 'LoyaltyPointsExpiring')).toEqual([]);
    clock.advance(2 * DAY);
    const [expiring] = await waitAbout('dan', 1, 'LoyaltyPointsExpiring');
    expect(expiring).toEqual({
      NotificationType: 'LoyaltyPointsExpiring',
      ProgramID: pid,
      ProfileIntegrationID: 'dan',
      SubLedgerID: '',
      Amount: 150,
      Reason: 'bonus',
      StartDate: expect.any(String),
      ExpiryDate: expect.any(String),
      TransactionID: grant,
    });
    expect(Math.abs(Date.parse(expiring!.ExpiryDate) - (start + 30 * DAY))).toBeLessThan(5000);
    expect(Date.parse(expiring!.ExpiryDate) - Date.parse(expiring!.StartDate)).toBe(30 * DAY);
    // Many scheduler rounds later, still one announcement per grant.
    await sleep(500);
    clock.advance(DAY);
    await sleep(400);
    expect(about('dan', 'LoyaltyPointsExpiring')).toHaveLength(1);
    // Past the expiry the 150 points go: 40 left, below Silver.
    clock.advance(6 * DAY);
    const [downgrade] = await waitAbout('dan', 1, 'TierDowngrade');
    expect(downgrade).toMatchObject({ OldTier: { Name: 'Silver', MinPoints: 100 }, NewTier: null, ActivePoints: 40 });
    await sleep(400);
    expect(about('dan', 'TierDowngrade')).toHaveLength(1);
    expect(about('dan', 'LoyaltyPointsExpiring')).toHaveLength(1);
    await relogin();
  });
});
