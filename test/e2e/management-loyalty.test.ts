import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManagementClient, login, unwrap, type ManagementClient } from '../../sdk/index.js';
import { hashPassword } from '../../services/management/passwords.js';
import { addDuration } from '../../services/management/index.js';
import { newApplication } from '../helpers/fixtures.js';
import { startTestNode, TestClock, type TestNode } from '../helpers/node.js';

type Err = { StatusCode: number; message: string; errors: Array<{ title?: string; source?: { pointer?: string } }> } | undefined;
const pointers = (e: Err) => (e?.errors ?? []).map((x) => x.source?.pointer);
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

describe('loyalty durations', () => {
  it('adds fixed units exactly and calendar months and years to the same day or the month end', () => {
    const at = (s: string) => new Date(s);
    expect(addDuration(at('2026-01-31T10:00:00Z'), '40m', '/x').toISOString()).toBe('2026-01-31T10:40:00.000Z');
    expect(addDuration(at('2026-01-31T10:00:00Z'), '90s', '/x').toISOString()).toBe('2026-01-31T10:01:30.000Z');
    expect(addDuration(at('2026-01-31T10:00:00Z'), '2W', '/x').toISOString()).toBe('2026-02-14T10:00:00.000Z');
    expect(addDuration(at('2026-01-31T10:00:00Z'), '1M', '/x').toISOString()).toBe('2026-02-28T10:00:00.000Z');
    expect(addDuration(at('2028-01-31T10:00:00Z'), '1M', '/x').toISOString()).toBe('2028-02-29T10:00:00.000Z');
    expect(addDuration(at('2026-03-15T10:00:00Z'), '13M', '/x').toISOString()).toBe('2027-04-15T10:00:00.000Z');
    expect(addDuration(at('2028-02-29T10:00:00Z'), '1Y', '/x').toISOString()).toBe('2029-02-28T10:00:00.000Z');
    expect(() => addDuration(at('2026-01-01T00:00:00Z'), '1d', '/expiryDuration')).toThrow(/not a duration/);
    expect(() => addDuration(at('2026-01-01T00:00:00Z'), '8000Y', '/expiryDuration')).toThrow(/9999/);
  });
});

describe('Management API: loyalty programs and ledgers', () => {
  let t: TestNode;
  const clock = new TestClock();
  let stranger: ManagementClient;
  let anonymous: ManagementClient;
  let appA: number;
  let appB: number;
  let strangerApp: number;
  let seq = 0;

  const addUser = async (policy: Record<string, unknown>, accountId?: number): Promise<ManagementClient> => {
    const email = `user${++seq}@loyalty.test`;
    const [admin] = await t.node.db.query<{ account_id: number }>(`SELECT account_id FROM users ORDER BY id LIMIT 1`);
    await t.node.db.query(`INSERT INTO users (account_id, email, name, password_hash, policy) VALUES ($1, $2, 'U', $3, $4::jsonb)`, [
      accountId ?? admin!.account_id,
      email,
      await hashPassword('user-password'),
      JSON.stringify(policy),
    ]);
    return (await login({ baseUrl: t.url, email, password: 'user-password', retries: 0 })).client;
  };
  /** A profile of the first account, made as the Integration API would (account-level). */
  const addProfile = async (integrationId: string, accountId?: number) => {
    await t.node.db.query(
      `INSERT INTO customer_profiles (account_id, integration_id) VALUES (COALESCE($2::int, (SELECT account_id FROM users ORDER BY id LIMIT 1)), $1)`,
      [integrationId, accountId ?? null],
    );
  };
  const program = async (body: Record<string, unknown> = {}) =>
    unwrap(await t.admin.POST('/v1/loyalty_programs', { body: { name: `p${++seq}`, title: 'Points', ...body } as never }));
  const path = (programID: number, integrationID: string) => ({ params: { path: { programID, integrationID } } });
  const add = (c: ManagementClient, programID: number, integrationID: string, body: Record<string, unknown>) =>
    c.PUT('/v1/loyalty_programs/{programID}/profile/{integrationID}/add_points', { ...path(programID, integrationID), body: body as never });
  const deduct = (c: ManagementClient, programID: number, integrationID: string, body: Record<string, unknown>) =>
    c.PUT('/v1/loyalty_programs/{programID}/profile/{integrationID}/deduct_points', { ...path(programID, integrationID), body: body as never });
  const ledger = async (programID: number, integrationID: string) =>
    unwrap(await t.admin.GET('/v1/loyalty_programs/{programID}/profile/{integrationID}', path(programID, integrationID)));

  beforeAll(async () => {
    t = await startTestNode('pglite', { clock });
    const [account] = await t.node.db.query<{ id: number }>(`INSERT INTO accounts (company_name) VALUES ('Other') RETURNING id`);
    await t.node.db.query(
      `INSERT INTO users (account_id, email, name, password_hash, policy) VALUES ($1, 'other@loyalty.test', 'Other', $2, '{"role":"admin"}'::jsonb)`,
      [account!.id, await hashPassword('other-password')],
    );
    stranger = (await login({ baseUrl: t.url, email: 'other@loyalty.test', password: 'other-password', retries: 0 })).client;
    anonymous = createManagementClient({ baseUrl: t.url, retries: 0 });
    appA = unwrap(await t.admin.POST('/v1/applications', { body: newApplication({ name: 'A' }) as never })).id;
    appB = unwrap(await t.admin.POST('/v1/applications', { body: newApplication({ name: 'B' }) as never })).id;
    strangerApp = unwrap(await stranger.POST('/v1/applications', { body: newApplication({ name: 'Theirs' }) as never })).id;
  }, 30_000);
  afterAll(async () => {
    await t?.stop();
  });

  describe('programs', () => {
    it('creates, lists, gets and updates a program', async () => {
      const created = await program({
        name: 'gold',
        title: 'Gold club',
        description: 'For regulars',
        subscribedApplications: [appB, appA],
        defaultValidity: '30D',
        defaultPending: '1h',
        allowSubledger: true,
        tiers: [
          { name: 'Silver', minPoints: 100 },
          { name: 'Gold', minPoints: 500 },
        ],
        cardBased: true,
        usersPerCardLimit: 2,
      });
      expect(created).toMatchObject({
        name: 'gold',
        title: 'Gold club',
        description: 'For regulars',
        subscribedApplications: [Math.min(appA, appB), Math.max(appA, appB)],
        defaultValidity: '30D',
        defaultPending: '1h',
        allowSubledger: true,
        tiers: [
          { name: 'Silver', minPoints: 100 },
          { name: 'Gold', minPoints: 500 },
        ],
        cardBased: true,
        usersPerCardLimit: 2,
        accountID: expect.any(Number),
        id: expect.any(Number),
      });
      const plain = await program({ name: 'plain' });
      expect(plain).toMatchObject({ subscribedApplications: [], defaultValidity: 'unlimited', defaultPending: 'immediate', allowSubledger: false, tiers: [], cardBased: false, description: '' });
      expect(plain).not.toHaveProperty('usersPerCardLimit');

      const got = unwrap(await t.admin.GET('/v1/loyalty_programs/{programID}', { params: { path: { programID: created.id } } }));
      expect(got).toEqual(created);
      const list = unwrap(await t.admin.GET('/v1/loyalty_programs', { params: { query: { sort: '-id', pageSize: 2 } } }));
      expect(list.data.map((p) => p.id)).toEqual([plain.id, created.id]);
      expect(list.totalResultSize).toBeGreaterThanOrEqual(2);
      const byName = unwrap(await t.admin.GET('/v1/loyalty_programs', { params: { query: { sort: 'name' } } }));
      const names = byName.data.map((p) => p.name);
      expect(names).toEqual([...names].sort());

      const updated = unwrap(
        await t.admin.PUT('/v1/loyalty_programs/{programID}', {
          params: { path: { programID: created.id } },
          body: { title: 'Gold members', subscribedApplications: [appA], defaultValidity: 'unlimited', cardBased: false },
        }),
      );
      expect(updated).toMatchObject({ id: created.id, name: 'gold', title: 'Gold members', subscribedApplications: [appA], defaultValidity: 'unlimited', defaultPending: '1h', cardBased: false });
      expect(updated).not.toHaveProperty('usersPerCardLimit');
      expect(unwrap(await t.admin.GET('/v1/loyalty_programs/{programID}', { params: { path: { programID: created.id } } }))).toEqual(updated);

      // The Applications show the programs they are subscribed to.
      const programsOf = async (applicationId: number) =>
        (unwrap(await t.admin.GET('/v1/applications/{applicationId}', { params: { path: { applicationId } } })).loyaltyPrograms as Array<{ id: number }>).map((p) => p.id);
      expect(await programsOf(appA)).toContain(created.id);
      expect(await programsOf(appB)).not.toContain(created.id);
      const listed = unwrap(await t.admin.GET('/v1/applications')).data as unknown as Array<{ id: number; loyaltyPrograms: Array<{ id: number }> }>;
      expect(listed.find((a) => a.id === appA)!.loyaltyPrograms.map((p) => p.id)).toContain(created.id);
      expect(listed.find((a) => a.id === appB)!.loyaltyPrograms.map((p) => p.id)).not.toContain(created.id);
    });

    it('refuses bad input with pointers', async () => {
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ title: 'No name' }, '/name'],
        [{ name: 'x1', title: '' }, '/title'],
        [{ name: 'x2', title: 'T', defaultValidity: '30 days' }, '/defaultValidity'],
        [{ name: 'x3', title: 'T', defaultValidity: '0D' }, '/defaultValidity'],
        [{ name: 'x4', title: 'T', defaultPending: 'unlimited' }, '/defaultPending'],
        [{ name: 'x5', title: 'T', defaultValidity: '999999Y' }, '/defaultValidity'],
        [{ name: 'x6', title: 'T', subscribedApplications: [appA, strangerApp] }, '/subscribedApplications/1'],
        [{ name: 'x7', title: 'T', tiers: [{ name: 'A', minPoints: 10 }, { name: 'A', minPoints: 20 }] }, '/tiers/1/name'],
        [{ name: 'x8', title: 'T', tiers: [{ name: 'A', minPoints: 10 }, { name: 'B', minPoints: 10 }] }, '/tiers/1/minPoints'],
        [{ name: 'x9', title: 'T', tiers: [{ name: 'A', minPoints: -1 }] }, '/tiers/0/minPoints'],
        [{ name: 'x10', title: 'T', usersPerCardLimit: 3 }, '/usersPerCardLimit'],
        [{ name: 'x11', title: 'T', cardBased: true, usersPerCardLimit: 0 }, '/usersPerCardLimit'],
      ];
      for (const [body, pointer] of cases) {
        const r = await t.admin.POST('/v1/loyalty_programs', { body: body as never });
        expect(r.response.status, JSON.stringify(body)).toBe(400);
        expect(r.error?.StatusCode).toBe(400);
        expect(pointers(r.error), JSON.stringify(body)).toContain(pointer);
      }
      const names = unwrap(await t.admin.GET('/v1/loyalty_programs')).data.map((p) => p.name);
      expect(names.filter((n) => /^x\d+$/.test(n ?? ''))).toEqual([]);

      const dup = await t.admin.POST('/v1/loyalty_programs', { body: { name: 'dup', title: 'T' } });
      expect(dup.response.status).toBe(201);
      const again = await t.admin.POST('/v1/loyalty_programs', { body: { name: 'dup', title: 'T' } });
      expect(again.response.status).toBe(409);
      expect(pointers(again.error)).toContain('/name');
      const other = await program();
      const rename = await t.admin.PUT('/v1/loyalty_programs/{programID}', { params: { path: { programID: other.id } }, body: { name: 'dup' } });
      expect(rename.response.status).toBe(409);
      expect(pointers(rename.error)).toContain('/name');
      const badSort = await t.admin.GET('/v1/loyalty_programs', { params: { query: { sort: 'accountID' } } });
      expect(pointers(badSort.error)).toContain('/query/sort');
      const badId = await t.admin.GET('/v1/loyalty_programs/{programID}', { params: { path: { programID: 'x' as never } } });
      expect(badId.response.status).toBe(400);
      expect(pointers(badId.error)).toContain('/path/programID');
    });

    it('refuses calls without a token', async () => {
      const p = await program();
      const calls = [
        anonymous.GET('/v1/loyalty_programs'),
        anonymous.POST('/v1/loyalty_programs', { body: { name: 'anon', title: 'T' } }),
        anonymous.GET('/v1/loyalty_programs/{programID}', { params: { path: { programID: p.id } } }),
        anonymous.PUT('/v1/loyalty_programs/{programID}', { params: { path: { programID: p.id } }, body: { title: 'Anon' } }),
        anonymous.GET('/v1/loyalty_programs/{programID}/profile/{integrationID}', path(p.id, 'anyone')),
        add(anonymous, p.id, 'anyone', { points: 1 }),
        deduct(anonymous, p.id, 'anyone', { points: 1 }),
      ];
      for (const r of await Promise.all(calls)) {
        expect(r.response.status).toBe(401);
        expect((r.error as Err)?.StatusCode).toBe(401);
        expect(pointers(r.error as Err)).toContain('/headers/authorization');
      }
      expect(unwrap(await t.admin.GET('/v1/loyalty_programs/{programID}', { params: { path: { programID: p.id } } })).title).toBe('Points');
    });

    it("never shows another account's program or ledger", async () => {
      const mine = await program({ name: 'secret', title: 'Secret', subscribedApplications: [appA] });
      await addProfile('shared-id');
      expect((await add(t.admin, mine.id, 'shared-id', { points: 7 })).response.status).toBe(200);
      // The same integration ID in the other account is another profile.
      const [acc] = await t.node.db.query<{ account_id: number }>(`SELECT account_id FROM users WHERE email = 'other@loyalty.test'`);
      await addProfile('shared-id', acc!.account_id);

      const id = { params: { path: { programID: mine.id } } };
      const got = await stranger.GET('/v1/loyalty_programs/{programID}', id);
      expect(got.response.status).toBe(404);
      expect(JSON.stringify(got.error)).not.toContain('Secret');
      expect((await stranger.PUT('/v1/loyalty_programs/{programID}', { ...id, body: { title: 'Mine now' } })).response.status).toBe(404);
      const theirList = unwrap(await stranger.GET('/v1/loyalty_programs'));
      expect(theirList.data.map((p) => p.id)).not.toContain(mine.id);
      expect(theirList.totalResultSize).toBe(0);
      const l = await stranger.GET('/v1/loyalty_programs/{programID}/profile/{integrationID}', path(mine.id, 'shared-id'));
      expect(l.response.status).toBe(404);
      expect(JSON.stringify(l.error)).not.toContain('"total"');
      expect((await add(stranger, mine.id, 'shared-id', { points: 100 })).response.status).toBe(404);
      expect((await deduct(stranger, mine.id, 'shared-id', { points: 7 })).response.status).toBe(404);
      // Their program cannot subscribe my Application either.
      const sub = await stranger.POST('/v1/loyalty_programs', { body: { name: 'steal', title: 'T', subscribedApplications: [appA] } });
      expect(sub.response.status).toBe(400);
      expect(pointers(sub.error)).toContain('/subscribedApplications/0');

      expect(unwrap(await t.admin.GET('/v1/loyalty_programs/{programID}', id)).title).toBe('Secret');
      expect((await ledger(mine.id, 'shared-id')).ledger.total).toBe(7);
    });

    it('lets only admins create and update; every user of the account reads', async () => {
      const p = await program({ name: 'readable', subscribedApplications: [appA] });
      const writer = await addUser({ applications: { [String(appA)]: 'write' } });
      const nobody = await addUser({});
      const create = await writer.POST('/v1/loyalty_programs', { body: { name: 'by-writer', title: 'T' } });
      expect(create.response.status).toBe(403);
      expect(create.error?.StatusCode).toBe(403);
      const update = await writer.PUT('/v1/loyalty_programs/{programID}', { params: { path: { programID: p.id } }, body: { title: 'Changed' } });
      expect(update.response.status).toBe(403);
      expect(unwrap(await nobody.GET('/v1/loyalty_programs/{programID}', { params: { path: { programID: p.id } } })).title).toBe('Points');
      expect(unwrap(await nobody.GET('/v1/loyalty_programs')).data.map((x) => x.id)).toContain(p.id);
      expect(unwrap(await t.admin.GET('/v1/loyalty_programs')).data.map((x) => x.name)).not.toContain('by-writer');
    });
  });

  describe('ledgers', () => {
    it('adds and deducts points and shows the ledger', async () => {
      const p = await program({ subscribedApplications: [appA] });
      await addProfile('alice');
      const empty = await ledger(p.id, 'alice');
      expect(empty).toEqual({
        ledger: { total: 0, totalActivePoints: 0, totalPendingPoints: 0, totalSpentPoints: 0, totalExpiredPoints: 0, totalNegativePoints: 0, transactions: [], expiringPoints: [] },
        subLedgers: {},
      });
      const r = await add(t.admin, p.id, 'alice', { points: 120.5, name: 'Welcome' });
      expect(r.response.status).toBe(200);
      expect((await deduct(t.admin, p.id, 'alice', { points: 20.25, name: 'Spent' })).response.status).toBe(200);
      const l = await ledger(p.id, 'alice');
      expect(l.ledger).toMatchObject({ total: 100.25, totalActivePoints: 100.25, totalSpentPoints: 20.25, totalPendingPoints: 0, expiringPoints: [] });
      const userId = l.ledger.transactions[0]?.userID;
      expect(userId).toEqual(expect.any(Number));
      expect(l.ledger.transactions).toEqual([
        { created: expect.any(String), programID: p.id, customerProfileID: 'alice', type: 'addition', amount: 120.5, startDate: expect.any(String), name: 'Welcome', subLedgerID: '', userID: userId },
        { created: expect.any(String), programID: p.id, customerProfileID: 'alice', type: 'subtraction', amount: 20.25, startDate: expect.any(String), name: 'Spent', subLedgerID: '', userID: userId },
      ]);
      expect(l.ledger.transactions[0]).not.toHaveProperty('expiryDate');
    });

    it('refuses bad input with pointers and changes nothing', async () => {
      const p = await program({ subscribedApplications: [appA] });
      await addProfile('bob');
      expect((await add(t.admin, p.id, 'bob', { points: 50 })).response.status).toBe(200);
      const cases: Array<[Record<string, unknown>, string]> = [
        [{}, '/points'],
        [{ points: -5 }, '/points'],
        [{ points: 0 }, '/points'],
        [{ points: '5' }, '/points'],
        [{ points: 5, expiryDuration: '1 hour' }, '/expiryDuration'],
        [{ points: 5, expiryDuration: '1d' }, '/expiryDuration'],
        [{ points: 5, pendingDuration: 'h1' }, '/pendingDuration'],
        [{ points: 5, pendingDuration: 'unlimited' }, '/pendingDuration'],
        [{ points: 5, subLedgerID: 'drinks' }, '/subLedgerID'],
        [{ points: 5, subLedgerID: '' }, '/subLedgerID'],
      ];
      for (const [body, pointer] of cases) {
        const r = await add(t.admin, p.id, 'bob', body);
        expect(r.response.status, JSON.stringify(body)).toBe(400);
        expect(pointers(r.error), JSON.stringify(body)).toContain(pointer);
      }
      const tooMuch = await deduct(t.admin, p.id, 'bob', { points: 50.01 });
      expect(tooMuch.response.status).toBe(400);
      expect(pointers(tooMuch.error)).toEqual(['/points']);
      const negative = await deduct(t.admin, p.id, 'bob', { points: -1 });
      expect(pointers(negative.error)).toContain('/points');
      const noSub = await deduct(t.admin, p.id, 'bob', { points: 1, subLedgerID: 'drinks' });
      expect(pointers(noSub.error)).toContain('/subLedgerID');
      const l = await ledger(p.id, 'bob');
      expect(l.ledger.total).toBe(50);
      expect(l.ledger.transactions.map((x) => x.type)).toEqual(['addition']);

      const unknownProfile = await add(t.admin, p.id, 'nobody-here', { points: 5 });
      expect(unknownProfile.response.status).toBe(404);
      expect(pointers(unknownProfile.error)).toContain('/integrationID');
      expect((await t.admin.GET('/v1/loyalty_programs/{programID}/profile/{integrationID}', path(p.id, 'nobody-here'))).response.status).toBe(404);
      expect((await t.admin.GET('/v1/loyalty_programs/{programID}/profile/{integrationID}', path(999_999, 'bob'))).response.status).toBe(404);
    });

    it('keeps subledgers apart and refuses an unknown subledger', async () => {
      const p = await program({ allowSubledger: true });
      await addProfile('carol');
      expect((await add(t.admin, p.id, 'carol', { points: 10 })).response.status).toBe(200);
      expect((await add(t.admin, p.id, 'carol', { points: 30, subLedgerID: 'drinks' })).response.status).toBe(200);
      expect((await deduct(t.admin, p.id, 'carol', { points: 5, subLedgerID: 'drinks' })).response.status).toBe(200);
      const over = await deduct(t.admin, p.id, 'carol', { points: 11 });
      expect(pointers(over.error)).toEqual(['/points']);
      const unknown = await deduct(t.admin, p.id, 'carol', { points: 1, subLedgerID: 'food' });
      expect(unknown.response.status).toBe(400);
      expect(pointers(unknown.error)).toEqual(['/subLedgerID']);
      // A subledger is part of its ledger's key: one that an index could not hold is refused on its pointer.
      for (const long of ['s'.repeat(1001), '\u{1F600}'.repeat(600)]) {
        for (const call of [add, deduct]) {
          const r = await call(t.admin, p.id, 'carol', { points: 1, subLedgerID: long });
          expect(r.response.status).toBe(400);
          expect(pointers(r.error)).toEqual(['/subLedgerID']);
        }
      }
      expect((await add(t.admin, p.id, 'carol', { points: 1, subLedgerID: 'é'.repeat(1000) })).response.status).toBe(200);
      expect((await deduct(t.admin, p.id, 'carol', { points: 1, subLedgerID: 'é'.repeat(1000) })).response.status).toBe(200);
      const l = await ledger(p.id, 'carol');
      expect(l.ledger.total).toBe(10);
      expect(Object.keys(l.subLedgers).sort()).toEqual(['drinks', 'é'.repeat(1000)]);
      expect(l.subLedgers.drinks).toMatchObject({ total: 25, totalSpentPoints: 5 });
      expect(l.subLedgers.drinks!.transactions.map((x) => [x.type, x.amount, x.subLedgerID])).toEqual([
        ['addition', 30, 'drinks'],
        ['subtraction', 5, 'drinks'],
      ]);
    });

    it('counts pending points as pending until their start', async () => {
      const p = await program({ defaultPending: '2h' });
      await addProfile('dave');
      expect((await add(t.admin, p.id, 'dave', { points: 40 })).response.status).toBe(200); // program default: 2h
      expect((await add(t.admin, p.id, 'dave', { points: 15, pendingDuration: '30m' })).response.status).toBe(200);
      expect((await add(t.admin, p.id, 'dave', { points: 5, pendingDuration: 'immediate' })).response.status).toBe(200);
      let l = await ledger(p.id, 'dave');
      expect(l.ledger).toMatchObject({ total: 5, totalPendingPoints: 55 });
      const [first, second] = l.ledger.transactions;
      expect(Date.parse(first!.startDate) - Date.parse(first!.created)).toBe(2 * HOUR);
      expect(Date.parse(second!.startDate) - Date.parse(second!.created)).toBe(30 * 60_000);
      // Pending points cannot be spent.
      expect(pointers((await deduct(t.admin, p.id, 'dave', { points: 6 })).error)).toEqual(['/points']);

      clock.advance(31 * 60_000);
      l = await ledger(p.id, 'dave');
      expect(l.ledger).toMatchObject({ total: 20, totalPendingPoints: 40 });
      expect((await deduct(t.admin, p.id, 'dave', { points: 20 })).response.status).toBe(200);
      clock.advance(90 * 60_000);
      l = await ledger(p.id, 'dave');
      expect(l.ledger).toMatchObject({ total: 40, totalPendingPoints: 0, totalSpentPoints: 20 });
    });

    it('expires points after expiryDuration or the program default, counted from their start', async () => {
      const p = await program({ defaultValidity: '1D' });
      await addProfile('erin');
      expect((await add(t.admin, p.id, 'erin', { points: 10, name: 'default validity' })).response.status).toBe(200);
      expect((await add(t.admin, p.id, 'erin', { points: 20, expiryDuration: '3h', pendingDuration: '1h' })).response.status).toBe(200);
      expect((await add(t.admin, p.id, 'erin', { points: 30, expiryDuration: 'unlimited' })).response.status).toBe(200);
      let l = await ledger(p.id, 'erin');
      expect(l.ledger).toMatchObject({ total: 40, totalPendingPoints: 20 });
      const [d, pend] = l.ledger.transactions;
      expect(Date.parse(d!.expiryDate!) - Date.parse(d!.startDate)).toBe(DAY);
      expect(Date.parse(pend!.expiryDate!) - Date.parse(pend!.created)).toBe(4 * HOUR);
      expect(l.ledger.expiringPoints.map((x) => [x.type, x.amount])).toEqual([['expiring', 10]]);

      clock.advance(2 * HOUR);
      expect((await deduct(t.admin, p.id, 'erin', { points: 5 })).response.status).toBe(200); // from the 3h grant, which expires first
      l = await ledger(p.id, 'erin');
      expect(l.ledger).toMatchObject({ total: 55, totalPendingPoints: 0 });
      expect(l.ledger.expiringPoints.map((x) => x.amount)).toEqual([15, 10]);

      clock.advance(2 * HOUR + 1000); // the 3h grant expired with 15 left
      l = await ledger(p.id, 'erin');
      expect(l.ledger).toMatchObject({ total: 40, totalExpiredPoints: 15 });
      const shownBefore = l.ledger.transactions.filter((x) => x.type === 'expire');
      expect(shownBefore.map((x) => [x.amount, x.created])).toEqual([[15, pend!.expiryDate]]);
      // The next change writes the expiry; the ledger reads the same.
      expect((await add(t.admin, p.id, 'erin', { points: 1 })).response.status).toBe(200);
      l = await ledger(p.id, 'erin');
      expect(l.ledger.transactions.filter((x) => x.type === 'expire').map((x) => [x.amount, x.created])).toEqual([[15, pend!.expiryDate]]);
      expect(l.ledger).toMatchObject({ total: 41, totalExpiredPoints: 15 });

      clock.advance(DAY - HOUR); // past the default-validity grant's expiry, not the 1-point one's
      l = await ledger(p.id, 'erin');
      expect(l.ledger).toMatchObject({ total: 31, totalExpiredPoints: 25 });
      expect(pointers((await deduct(t.admin, p.id, 'erin', { points: 32 })).error)).toEqual(['/points']);
    });

    it('deducts the earliest-expiring points first and records which grants it took', async () => {
      const p = await program();
      await addProfile('frank');
      await add(t.admin, p.id, 'frank', { points: 100, name: 'late', expiryDuration: '30D' });
      await add(t.admin, p.id, 'frank', { points: 50, name: 'never' });
      await add(t.admin, p.id, 'frank', { points: 30, name: 'soon', expiryDuration: '2D' });
      await add(t.admin, p.id, 'frank', { points: 40, name: 'sooner', expiryDuration: '1D' });
      expect((await deduct(t.admin, p.id, 'frank', { points: 60, name: 'order 1' })).response.status).toBe(200);
      let l = await ledger(p.id, 'frank');
      expect(l.ledger.total).toBe(160);
      // sooner (40) all, then 20 of soon.
      expect(l.ledger.expiringPoints.map((x) => [x.name, x.amount])).toEqual([
        ['soon', 10],
        ['late', 100],
      ]);
      expect((await deduct(t.admin, p.id, 'frank', { points: 115, name: 'order 2' })).response.status).toBe(200);
      l = await ledger(p.id, 'frank');
      expect(l.ledger.total).toBe(45);
      expect(l.ledger.expiringPoints).toEqual([]); // soon 10 and late 100 gone, 5 of never taken
      const consumed = await t.node.db.query<{ deduction: string; grant_name: string; amount: number }>(
        `SELECT d.name AS deduction, g.name AS grant_name, c.amount::float8 AS amount
         FROM loyalty_consumptions c JOIN loyalty_transactions d ON d.id = c.transaction_id JOIN loyalty_transactions g ON g.id = c.grant_id
         WHERE d.program_id = $1 ORDER BY d.id, g.expiry_date NULLS LAST`,
        [p.id],
      );
      expect(consumed.map((c) => [c.deduction, c.grant_name, c.amount])).toEqual([
        ['order 1', 'sooner', 40],
        ['order 1', 'soon', 20],
        ['order 2', 'soon', 10],
        ['order 2', 'late', 100],
        ['order 2', 'never', 5],
      ]);
    });

    it('lets admins and writers of a subscribed Application change ledgers, and refuses others', async () => {
      const p = await program({ subscribedApplications: [appA] });
      await addProfile('gina');
      const writer = await addUser({ applications: { [String(appA)]: 'write' } });
      const reader = await addUser({ applications: { [String(appA)]: 'read' } });
      const otherWriter = await addUser({ applications: { [String(appB)]: 'write' } });
      expect((await add(writer, p.id, 'gina', { points: 10 })).response.status).toBe(200);
      expect((await deduct(writer, p.id, 'gina', { points: 3 })).response.status).toBe(200);
      for (const c of [reader, otherWriter]) {
        const a = await add(c, p.id, 'gina', { points: 1000 });
        expect(a.response.status).toBe(403);
        expect(a.error?.StatusCode).toBe(403);
        expect((await deduct(c, p.id, 'gina', { points: 7 })).response.status).toBe(403);
      }
      const read = unwrap(await reader.GET('/v1/loyalty_programs/{programID}/profile/{integrationID}', path(p.id, 'gina')));
      expect(read.ledger.total).toBe(7);
      expect(read.ledger.transactions.map((x) => x.type)).toEqual(['addition', 'subtraction']);
    });
  });
});
