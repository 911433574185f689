import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commitSession, commitSessionsTogether, SESSIONS_TOGETHER_SQL, StaleSessionError, type SessionCommit, type SessionCommitResult } from '../../services/integration/repository.js';
import { applyPayload, emptySession } from '../../services/integration/session-model.js';
import { createTestDb, genericPlan, type AdapterName, type TestDb } from '../helpers/db.js';
import { postgresUp } from '../helpers/services.js';

const adapters: AdapterName[] = postgresUp ? ['pglite', 'postgres'] : ['pglite'];

describe.each(adapters)('commitSessionsTogether (%s)', (adapter) => {
  let t: TestDb;
  const now = '2026-11-23T10:00:00.000Z';
  const commitOf = (id: string, profileId: string, expected = 0, events = ['service_session_created', 'service_session_updated']): SessionCommit => ({
    accountId: 1,
    session: applyPayload(emptySession(1, id, now), { profileId, cartItems: [{ sku: 'A', quantity: 2, price: 3.3 }] }),
    expectedUpdateCount: expected,
    closing: false,
    now,
    events: events.map((type) => ({ type, attributes: {}, effects: [{ effectType: type }] })),
  });

  beforeAll(async () => {
    t = await createTestDb(adapter);
    await t.db.query(`INSERT INTO accounts DEFAULT VALUES`);
    await t.db.query(`INSERT INTO applications (account_id, name, timezone, currency, signing_secret) VALUES (1, 'a', 'UTC', 'EUR', 'x')`);
  }, 30_000);
  afterAll(async () => {
    await t?.cleanup();
  });

  it('writes new and updated sessions, their events in order and each new profile once, and refuses the stale one', async () => {
    const existing = await commitSession(t.db, commitOf('old', 'ann'));
    const results = await commitSessionsTogether(t.db, [
      commitOf('new-1', 'bob'),
      commitOf('new-2', 'bob'),
      { ...commitOf('old', 'ann', existing.session.updateCount, ['service_session_updated']), session: { ...existing.session, total: 99 } },
      commitOf('old', 'ann', 7, ['service_session_updated']),
      commitOf('anon', ''),
    ]);
    expect(results[3]).toBeInstanceOf(StaleSessionError);
    const ok = results.filter((r) => !(r instanceof StaleSessionError)) as Array<Exclude<(typeof results)[number], StaleSessionError>>;
    expect(ok.map((r) => [r.session.integrationId, r.session.updateCount])).toEqual([
      ['new-1', 1],
      ['new-2', 1],
      ['old', 2],
      ['anon', 1],
    ]);
    expect(ok[0]!.events.map((e) => e.type)).toEqual(['service_session_created', 'service_session_updated']);
    expect(ok[0]!.events[0]!.id).toBeLessThan(ok[0]!.events[1]!.id);
    const rows = await t.db.query<{ integration_id: string; total: string; update_count: number }>(
      `SELECT integration_id, total::text, update_count FROM customer_sessions ORDER BY integration_id`,
    );
    expect(rows).toEqual([
      { integration_id: 'anon', total: '6.6', update_count: 1 },
      { integration_id: 'new-1', total: '6.6', update_count: 1 },
      { integration_id: 'new-2', total: '6.6', update_count: 1 },
      { integration_id: 'old', total: '99', update_count: 2 },
    ]);
    expect(await t.db.query(`SELECT integration_id FROM customer_profiles ORDER BY integration_id`)).toEqual([{ integration_id: 'ann' }, { integration_id: 'bob' }]);
    const events = await t.db.query<{ session_id: string; type: string }>(`SELECT session_id, type FROM events ORDER BY id`);
    // The stale update wrote nothing, not even its event.
    expect(events.filter((e) => e.session_id === 'old').map((e) => e.type)).toEqual(['service_session_created', 'service_session_updated', 'service_session_updated']);
  });

  it('commits closes with the rest: profile counters add up per profile, statistics are appended summed per campaign, a stale close writes neither', async () => {
    const [campaign] = await t.db.query<{ id: number }>(`INSERT INTO campaigns (application_id, name) VALUES (1, 'c') RETURNING id`);
    const stats = [{ campaignId: campaign!.id, coupons: 0, referrals: 0, discount: 2.5, discountEffects: 1, createdCoupons: 0 }];
    const open = await commitSessionsTogether(t.db, [commitOf('close-1', 'cara'), commitOf('close-2', 'cara'), commitOf('close-3', 'dan')]);
    const stored = open.map((r) => {
      if (r instanceof StaleSessionError) throw r;
      return r.session;
    });
    const effects = [{ effectType: 'setDiscount', props: { name: 'close', value: 1.5 } }];
    const closeOf = (i: number, total: number, expected = stored[i]!.updateCount): SessionCommit => ({
      ...commitOf(stored[i]!.integrationId, stored[i]!.profileId, expected, ['service_session_updated', 'service_session_closed']),
      // As a close commits them: its committed effects are its effects (the same array).
      session: { ...stored[i]!, state: 'closed', total, effects, committedEffects: effects },
      closing: true,
      profileNeeded: true,
      profileDelta: { closedSessions: 1, totalSales: total },
      stats,
    });
    const results = await commitSessionsTogether(t.db, [
      closeOf(0, 10.25),
      closeOf(1, 4.5),
      closeOf(2, 7, 9), // stale: nothing of it is written
      commitOf('plain-cara', 'cara'),
      commitOf('plain-eve', 'eve'),
    ]);
    expect(results[2]).toBeInstanceOf(StaleSessionError);
    const [first, second] = results as Array<Exclude<(typeof results)[number], StaleSessionError>>;
    expect(first!.session.state).toBe('closed');
    expect(first!.events.map((e) => e.type)).toEqual(['service_session_updated', 'service_session_closed']);
    // Both closes of cara see her profile as it is after both.
    expect([first!.profile?.closedSessions, second!.profile?.closedSessions]).toEqual([2, 2]);
    expect(first!.profile?.totalSales).toBe(14.75);
    const profiles = await t.db.query<{ integration_id: string; closed_sessions: number; total_sales: string }>(
      `SELECT integration_id, closed_sessions, total_sales::text FROM customer_profiles WHERE integration_id IN ('cara', 'dan', 'eve') ORDER BY integration_id`,
    );
    expect(profiles).toEqual([
      { integration_id: 'cara', closed_sessions: 2, total_sales: '14.75' },
      { integration_id: 'dan', closed_sessions: 0, total_sales: '0' },
      { integration_id: 'eve', closed_sessions: 0, total_sales: '0' },
    ]);
    const sessions = await t.db.query<{ integration_id: string; state: string; closed: boolean; committed_effects: unknown }>(
      `SELECT integration_id, state, closed_at IS NOT NULL AS closed, committed_effects FROM customer_sessions WHERE integration_id LIKE 'close-%' ORDER BY integration_id`,
    );
    expect(sessions).toEqual([
      { integration_id: 'close-1', state: 'closed', closed: true, committed_effects: effects },
      { integration_id: 'close-2', state: 'closed', closed: true, committed_effects: effects },
      { integration_id: 'close-3', state: 'open', closed: false, committed_effects: [] },
    ]);
    // The two closes' statistics, summed: one delta row per campaign and statement.
    const deltas = await t.db.query<{ discount: number; discount_effects: number; last_activity: string }>(
      `SELECT discount::float8 AS discount, discount_effects, to_json(last_activity)#>>'{}' AS last_activity FROM campaign_stat_deltas WHERE campaign_id = $1`,
      [campaign!.id],
    );
    expect(deltas.map((d) => ({ ...d, last_activity: new Date(d.last_activity).toISOString() }))).toEqual([{ discount: 5, discount_effects: 2, last_activity: now }]);
  });

  it('commits a close alone with its effects as its committed effects, and other committed effects as they are', async () => {
    const effects = [{ effectType: 'setDiscount', props: { name: 'alone', value: 2 } }];
    const created = await commitSession(t.db, commitOf('alone', 'fay'));
    const closed = await commitSession(t.db, {
      ...commitOf('alone', 'fay', created.session.updateCount, ['service_session_closed']),
      session: { ...created.session, state: 'closed', effects, committedEffects: effects },
      closing: true,
      profileDelta: { closedSessions: 1, totalSales: 6.6 },
    });
    const own = [{ effectType: 'rollbackDiscount', props: { name: 'alone', value: 2 } }];
    await commitSession(t.db, {
      ...commitOf('alone-new', 'fay', 0, ['service_session_created']),
      session: { ...commitOf('alone-new', 'fay').session, effects, committedEffects: own },
    });
    const rows = await t.db.query<{ integration_id: string; effects: unknown; committed_effects: unknown }>(
      `SELECT integration_id, effects, committed_effects FROM customer_sessions WHERE integration_id LIKE 'alone%' ORDER BY integration_id`,
    );
    expect(closed.session.updateCount).toBe(2);
    expect(rows).toEqual([
      { integration_id: 'alone', effects, committed_effects: effects },
      { integration_id: 'alone-new', effects, committed_effects: own },
    ]);
  });

  it('stores every character of ids, codes, attributes and cart lines as it was sent (quotes, backslashes, braces, commas, NULL, newlines, emoji)', async () => {
    const odd = ['q"uote', 'back\\slash', '{brace}', 'a,b', 'NULL', 'line\nbreak', 'tab\there', 'émoji 🎟️', ' spaced ', ''];
    const commits = odd.map((x, i): SessionCommit => {
      const base = commitOf(`odd-${i}-${x}`, x === '' ? '' : `p-${x}`);
      const session = applyPayload(base.session, {
        couponCodes: [x || 'empty'],
        referralCode: x,
        attributes: { [`k${x}`]: x, nested: { list: [x, null, 1.5] } },
        cartItems: [{ sku: x || 'S', name: x, quantity: 1, price: 2.5, attributes: { note: x } }],
      });
      return { ...base, session, events: [{ type: 'service_session_created', attributes: { x }, effects: [] }] };
    });
    const results = await commitSessionsTogether(t.db, commits);
    expect(results.every((r) => !(r instanceof StaleSessionError))).toBe(true);
    const rows = await t.db.query<{ integration_id: string; profile_id: string; referral_code: string; coupon_codes: string[]; attributes: unknown; cart_items: unknown }>(
      `SELECT integration_id, profile_id, referral_code, coupon_codes, attributes, cart_items FROM customer_sessions WHERE integration_id LIKE 'odd-%'`,
    );
    const byId = new Map(rows.map((r) => [r.integration_id, r]));
    for (const c of commits) {
      const row = byId.get(c.session.integrationId);
      expect(row, c.session.integrationId).toBeDefined();
      expect(row!.profile_id).toBe(c.session.profileId);
      expect(row!.referral_code).toBe(c.session.referralCode);
      expect(row!.coupon_codes).toEqual(c.session.couponCodes);
      expect(row!.attributes).toEqual(c.session.attributes);
      expect(row!.cart_items).toEqual(JSON.parse(JSON.stringify(c.session.cartItems)));
    }
    const events = await t.db.query<{ session_id: string; attributes: { x: string } }>(`SELECT session_id, attributes FROM events WHERE session_id LIKE 'odd-%'`);
    expect(new Set(events.map((e) => e.attributes.x))).toEqual(new Set(odd));
  });

  it('has a generic plan that finds sessions and profiles by index, made while the tables are small', async () => {
    // What a connection keeps from the sixth batch on (PostgreSQL's plan cache): planned for the
    // tables as they are now, a few rows each, never analyzed.
    const plan = await genericPlan(t.db, SESSIONS_TOGETHER_SQL, ['json', 'int'], [`'[]'`, '1']);
    expect(plan).toMatch(/Index Scan using customer_sessions_integration_id on customer_sessions/);
    expect(plan).toMatch(/Index (Only )?Scan using customer_profiles_account_id_integration_id_key on customer_profiles/);
    expect(plan).not.toMatch(/Seq Scan on customer_(sessions|profiles)/);
    expect(plan).not.toMatch(/hashed SubPlan/);
  });

  it('commits batches that run at once over the same profiles (new, a minute idle, closing and not) without deadlock or lost counts', async () => {
    // The session lane keeps two batches in flight (sessions.ts), and nodes have lanes of their
    // own: batches that share profiles run at once, each holding them in an order of its own.
    // A deadlock between two of them shows only when their row locks interleave, so the three
    // kinds of profile write (insert a missing one, touch a minute-old lastActivity, add to the
    // counters, some of each in one batch) race over many rounds. With the profiles written by
    // one statement each in its own order (the UPDATE ... FROM before this test), 100 rounds
    // deadlocked every time tried. PGlite has one connection, so there a few rounds check the counts.
    const rounds = adapter === 'postgres' ? 40 : 3;
    const batches = 6;
    const size = 8;
    const sessionsOf = (results: Array<SessionCommitResult | StaleSessionError>) =>
      results.map((r) => {
        if (r instanceof StaleSessionError) throw r;
        return r.session;
      });
    const idle = (round: number) =>
      t.db.query(`UPDATE customer_profiles SET last_activity = last_activity - interval '1 hour' WHERE integration_id LIKE $1`, [`par${round}-%`]);
    for (let round = 0; round < rounds; round++) {
      const profiles = Array.from({ length: size }, (_, i) => `par${round}-${i}`);
      // Batch b holds every profile, in an order of its own (steps coprime to the size).
      const orderOf = (b: number) => profiles.map((_, i) => profiles[(i * (2 * b + 1) + b) % size]!);
      let sessions = (
        await Promise.all(Array.from({ length: batches }, (_, b) => commitSessionsTogether(t.db, orderOf(b).map((p) => commitOf(`par${round}-${b}-${p}`, p)))))
      ).map(sessionsOf);
      await idle(round);
      sessions = (
        await Promise.all(
          sessions.map((ss) => commitSessionsTogether(t.db, ss.map((s) => commitOf(s.integrationId, s.profileId, s.updateCount, ['service_session_updated'])))),
        )
      ).map(sessionsOf);
      await idle(round);
      // Half of each batch closes (counters), the other half is a plain update of an idle profile.
      const closed = await Promise.all(
        sessions.map((ss, b) =>
          commitSessionsTogether(
            t.db,
            ss.map((s, i) =>
              (i + b) % 2 === 0
                ? {
                    ...commitOf(s.integrationId, s.profileId, s.updateCount, ['service_session_closed']),
                    session: { ...s, state: 'closed', total: 2.5 },
                    closing: true,
                    profileDelta: { closedSessions: 1, totalSales: 2.5 },
                  }
                : commitOf(s.integrationId, s.profileId, s.updateCount, ['service_session_updated']),
            ),
          ),
        ),
      );
      expect(closed.flat().filter((r) => r instanceof StaleSessionError)).toEqual([]);
    }
    const rows = await t.db.query<{ profiles: number; closed: number; sales: number; distinct_ids: number }>(
      `SELECT count(*)::int AS profiles, sum(closed_sessions)::int AS closed, sum(total_sales)::float8 AS sales, count(DISTINCT integration_id)::int AS distinct_ids
         FROM customer_profiles WHERE integration_id LIKE 'par%'`,
    );
    // Every profile once, with every close of every batch counted.
    const closes = (rounds * batches * size) / 2;
    expect(rows).toEqual([{ profiles: rounds * size, closed: closes, sales: 2.5 * closes, distinct_ids: rounds * size }]);
  });
});
