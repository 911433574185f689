// IDs of any length (issue 6): a session ID has no length limit (spec, Limits), so one of 10,000
// characters of every UTF-8 width goes through every session operation on both adapters; a
// profile ID is at most 1000 characters and 2000 bytes of UTF-8, refused with a 400 on its pointer
// wherever it enters and stored wherever it fits.
import { credentials, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IntegrationServiceClient, type IntegrationStateResponse } from '../../proto/gen/perkline/v1/integration.js';
import { ERROR_METADATA_KEY } from '../../services/grpc/index.js';
import { newCampaign } from '../helpers/fixtures.js';
import { setupShop, startTestNode, unwrap, type ShopSetup, type TestNode } from '../helpers/node.js';
import { addCampaign, insertCoupon, rule } from '../helpers/promotions.js';
import { postgresUp } from '../helpers/services.js';
import type { AdapterName } from '../helpers/db.js';

type ErrorBody = { message: string; StatusCode: number; errors: Array<{ title: string; details?: string; source?: { pointer?: string } }> };

/**
 * `n` characters (code points) that do not compress, of 1 to 4 bytes in UTF-8 and with what URLs,
 * JSON and SQL treat specially: an index would have to hold every byte (pglz shrinks repeated
 * text below the B-tree limit, which would hide the failure).
 */
function incompressible(n: number, seed: number): string {
  const specials = ['/', '%', '?', '#', ' ', '\\', "'", '"', '+', '&', '.'];
  let x = seed >>> 0;
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    const r = (x >>> 8) % 100;
    const v = x >>> 12;
    out.push(
      r < 5
        ? specials[v % specials.length]!
        : r < 30
          ? String.fromCharCode(97 + (v % 26))
          : r < 50
            ? String.fromCodePoint(0xe0 + (v % 0x100))
            : r < 75
              ? String.fromCodePoint(0x4e00 + (v % 20000))
              : String.fromCodePoint(0x20000 + (v % 40000)),
    );
  }
  return out.join('');
}

const codePoints = (s: string) => [...s].length;
const utf8 = (s: string) => Buffer.byteLength(s, 'utf8');

/** 500 four-byte characters that do not repeat: exactly the 2000 bytes a profile ID may take. */
const widestProfileId = (seed: number) => Array.from({ length: 500 }, (_, i) => String.fromCodePoint(0x20000 + ((i * 7919 + seed * 104729) % 40000))).join('');

const adapters: AdapterName[] = postgresUp ? ['pglite', 'postgres'] : ['pglite'];

describe.each(adapters)('IDs of any length (%s)', (adapter) => {
  let t: TestNode;
  let shop: ShopSetup;
  let other: ShopSetup;
  let creatorCampaign: number;
  let achievementId: number;
  let grpc: IntegrationServiceClient;

  beforeAll(async () => {
    t = await startTestNode(adapter);
    shop = await setupShop(t.url, t.admin, {
      ruleset: { rules: [rule(['couponValid'], [['setDiscount', 'coupon', 10]], 'coupon')], bindings: [], activate: true },
    });
    other = await setupShop(t.url, t.admin);
    // Coupons and referrals made on close, under a limit counted per profile and identifier: the
    // counter's key holds both.
    creatorCampaign = await addCampaign(
      t.admin,
      shop.applicationId,
      [rule(['=', ['.', 'Session', 'State'], 'closed'], [['createCoupon', { usageLimit: 1 }], ['createReferral', {}]], 'make')],
      { limits: [{ action: 'createCoupon', limit: 100, entities: ['Profile', 'Identifier'] }] },
    );
    const campaign = unwrap(await t.admin.POST('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId: shop.applicationId } }, body: newCampaign() as never }));
    achievementId = unwrap(
      await t.admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/achievements', {
        params: { path: { applicationId: shop.applicationId, campaignId: campaign.id } },
        body: { name: 'buyer', title: 'Buyer', target: 10, period: '1Y' } as never,
      }),
    ).id;
    unwrap(
      await t.admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets', {
        params: { path: { applicationId: shop.applicationId, campaignId: campaign.id } },
        body: { rules: [rule(['=', ['.', 'Session', 'State'], 'closed'], [['increaseAchievementProgress', achievementId, 1]], 'progress')], bindings: [], activate: true } as never,
      }),
    );
    await insertCoupon(t.node.db, shop.applicationId, shop.campaignId, { value: 'LONGID1', usageLimit: 10 });
    unwrap(await t.admin.POST('/v1/attributes', { body: { entity: 'Event', eventType: 'viewed', name: 'page', type: 'string', title: 'page' } }));
    grpc = new IntegrationServiceClient(t.node.grpcAddress, credentials.createInsecure());
  }, 120_000);
  afterAll(async () => {
    grpc?.close();
    await t?.stop();
  });

  const put = (s: ShopSetup, id: string, customerSession: Record<string, unknown>, extra: { responseContent?: string[]; headers?: Record<string, string> } = {}) =>
    s.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
      params: { path: { customerSessionId: id } },
      body: { customerSession: customerSession as never, responseContent: (extra.responseContent ?? ['customerSession', 'customerProfile']) as never },
      headers: extra.headers ?? {},
    });
  const get = (s: ShopSetup, id: string) => s.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: id } } });
  const lines = (n: number) => Array.from({ length: n }, (_, i) => ({ sku: `L${i}`, name: `Line ${i}`, quantity: 1, price: 20 }));

  it('carries a session ID of 10,000 characters through create, update, events, close, reopen, returns, reads and deletion', async () => {
    const id = incompressible(10_000, 1);
    const identifier = incompressible(10_000, 2);
    const profileId = widestProfileId(1);
    expect(codePoints(id)).toBe(10_000);
    expect(utf8(id)).toBeGreaterThan(20_000);
    expect(utf8(profileId)).toBe(2000);

    // Create and update, the update under an Idempotency-Key.
    const created = unwrap(await put(shop, id, { profileId, identifiers: [identifier], couponCodes: ['LONGID1'], cartItems: lines(2), attributes: { note: 'kept until erased' } }));
    expect(created.customerSession).toMatchObject({ integrationId: id, profileId, updateCount: 1, total: 40 });
    expect(created.customerProfile).toMatchObject({ integrationId: profileId });
    const headers = { 'Idempotency-Key': 'long-id-update' };
    const updated = unwrap(await put(shop, id, { cartItems: lines(3) }, { headers }));
    expect(updated.customerSession).toMatchObject({ integrationId: id, updateCount: 2, total: 60 });
    expect(updated.effects.map((e) => e.effectType)).toEqual(['acceptCoupon', 'setDiscount']);
    expect(unwrap(await put(shop, id, { cartItems: lines(3) }, { headers }))).toEqual(updated);
    const reused = await put(shop, id, { cartItems: lines(4) }, { headers });
    expect(reused.response.status).toBe(409);
    const read = unwrap(await get(shop, id));
    expect(read.customerSession).toMatchObject({ integrationId: id, updateCount: 2, total: 60, identifiers: [identifier] });

    // An event bound to it.
    const event = unwrap(
      await shop.integration.POST('/v2/events', { body: { profileId, sessionId: id, type: 'viewed', attributes: { page: 'cart' }, responseContent: ['event'] } as never }),
    );
    expect(event.event).toMatchObject({ sessionId: id, profileId, type: 'viewed' });

    // Close: the coupon and referral it makes name the session, the limit counter holds the
    // profile and the identifier, the achievement the profile.
    const closed = unwrap(await put(shop, id, { state: 'closed' }));
    expect(closed.customerSession).toMatchObject({ integrationId: id, state: 'closed' });
    expect(closed.createdCoupons).toHaveLength(1);
    expect(closed.createdReferrals).toEqual([expect.objectContaining({ advocateProfileIntegrationId: profileId })]);
    const db = t.node.db;
    const [made] = await db.query<{ created_in_session: string }>(`SELECT created_in_session FROM coupons WHERE id = $1`, [closed.createdCoupons[0]!.id]);
    expect(made!.created_in_session).toBe(id);
    const counter = async () =>
      (await db.query<{ counter: string }>(`SELECT counter FROM limit_counters WHERE campaign_id = $1 AND entity = $2`, [creatorCampaign, `p:${profileId}|i:${identifier}`]))[0]?.counter;
    expect(Number(await counter())).toBe(1);
    const progress = unwrap(await shop.integration.GET('/v1/customer_profiles/{integrationId}/achievements', { params: { path: { integrationId: profileId } } }));
    expect(progress.data.find((a) => a.id === achievementId)?.currentProgress).toMatchObject({ progress: 1 });

    // Reopen gives back what the close counted; closing again counts it again.
    const reopened = unwrap(await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}/reopen', { params: { path: { customerSessionId: id } } }));
    expect(reopened.customerSession).toMatchObject({ integrationId: id, state: 'open' });
    expect(Number(await counter())).toBe(0);
    unwrap(await put(shop, id, { state: 'closed' }));
    expect(Number(await counter())).toBe(1);

    // Returns, the second one seeing the first.
    const returns = (position: number) =>
      shop.integration.POST('/v2/customer_sessions/{customerSessionId}/returns', {
        params: { path: { customerSessionId: id } },
        body: { return: { returnedCartItems: [{ position }] }, responseContent: ['customerSession', 'previousReturns'] },
      });
    expect(unwrap(await returns(0)).customerSession).toMatchObject({ integrationId: id, state: 'partially_returned', total: 40 });
    const second = unwrap(await returns(1));
    expect(second.customerSession).toMatchObject({ state: 'partially_returned', total: 20 });
    expect(second.previousReturns).toHaveLength(1);

    // The backoffice finds it by its ID and by its row id.
    const listed = unwrap(
      await t.admin.GET('/v1/applications/{applicationId}/sessions', { params: { path: { applicationId: shop.applicationId }, query: { integrationId: id } } }),
    );
    expect(listed.totalResultSize).toBe(1);
    expect(listed.data[0]!.integrationId).toBe(id);
    const one = unwrap(
      await t.admin.GET('/v1/applications/{applicationId}/sessions/{sessionId}', { params: { path: { applicationId: shop.applicationId, sessionId: listed.data[0]!.id } } }),
    );
    expect(one.integrationId).toBe(id);

    // Erasing the customer's data reaches the session.
    expect((await shop.integration.DELETE('/v1/customer_data/{integrationId}', { params: { path: { integrationId: profileId } } })).response.status).toBe(204);
    expect(unwrap(await get(shop, id)).customerSession.attributes).toEqual({});
  });

  it('tells apart long IDs that differ only in their last character, and keeps each Application its own', async () => {
    const stem = incompressible(9_999, 3);
    const a = `${stem}a`;
    const b = `${stem}b`;
    unwrap(await put(shop, a, { profileId: 'twin-a', cartItems: lines(1) }));
    expect((await get(shop, b)).response.status).toBe(404);
    unwrap(await put(shop, b, { profileId: 'twin-b', cartItems: lines(2) }));
    expect(unwrap(await get(shop, a)).customerSession).toMatchObject({ integrationId: a, profileId: 'twin-a', total: 20, updateCount: 1 });
    expect(unwrap(await get(shop, b)).customerSession).toMatchObject({ integrationId: b, profileId: 'twin-b', total: 40, updateCount: 1 });

    // Another Application neither sees the session nor changes it: the same ID there is its own.
    const foreign = await get(other, a);
    expect(foreign.response.status).toBe(404);
    expect((foreign.error as ErrorBody).errors[0]!.source?.pointer).toBe('/path/customerSessionId');
    unwrap(await put(other, a, { profileId: 'twin-elsewhere', cartItems: lines(3) }));
    expect(unwrap(await get(other, a)).customerSession).toMatchObject({ profileId: 'twin-elsewhere', total: 60, updateCount: 1 });
    expect(unwrap(await get(shop, a)).customerSession).toMatchObject({ profileId: 'twin-a', total: 20, updateCount: 1 });

    // Many new long sessions at once: they are committed together (set-based) and each is its own.
    const many = Array.from({ length: 12 }, (_, i) => `${stem}${i}-many`);
    await Promise.all(many.map((id, i) => put(shop, id, { profileId: `many-${i}`, cartItems: lines(1 + (i % 3)) }).then(unwrap)));
    await Promise.all(many.map((id, i) => put(shop, id, { cartItems: lines(2 + (i % 3)) }).then(unwrap)));
    for (const [i, id] of many.entries()) {
      expect(unwrap(await get(shop, id)).customerSession).toMatchObject({ integrationId: id, profileId: `many-${i}`, updateCount: 2, total: 20 * (2 + (i % 3)) });
    }
  });

  it('creates a missing long session for an event, and serves long sessions through legacy v1 and gRPC', async () => {
    const eventSession = incompressible(10_000, 4);
    const tracked = unwrap(
      await shop.integration.POST('/v2/events', { body: { profileId: 'eve-long', sessionId: eventSession, type: 'viewed', attributes: { page: 'home' }, responseContent: ['event'] } as never }),
    );
    expect(tracked.event).toMatchObject({ sessionId: eventSession });
    expect(unwrap(await get(shop, eventSession)).customerSession).toMatchObject({ integrationId: eventSession, profileId: 'eve-long', state: 'open' });

    const v1Session = incompressible(10_000, 5);
    const v1 = unwrap(
      await shop.integration.PUT('/v1/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: v1Session } },
        body: { profileId: 'v1-long', coupon: 'LONGID1', cartItems: lines(2) } as never,
      }),
    );
    expect(v1.session).toMatchObject({ integrationId: v1Session, profileId: 'v1-long' });
    const v1Event = await shop.integration.POST('/v1/events', { body: { sessionId: v1Session, profileId: 'v1-long', type: 'viewed', attributes: { page: 'v1' } } as never });
    expect(v1Event.response.status).toBe(201);

    const grpcSession = incompressible(10_000, 6);
    const md = new Metadata();
    md.set('authorization', `ApiKey-v1 ${shop.apiKey}`);
    const state = await new Promise<IntegrationStateResponse>((resolve, reject) =>
      grpc.updateCustomerSession(
        { customerSessionId: grpcSession, request: { customerSession: { profileId: 'grpc-long', cartItems: lines(2) }, responseContent: ['customerSession'] }, dry: false, now: '' },
        md,
        (err, res) => (err ? reject(err) : resolve(res!)),
      ),
    );
    expect(state.state?.customerSession).toMatchObject({ integrationId: grpcSession, total: 40 });
    expect(unwrap(await get(shop, grpcSession)).customerSession).toMatchObject({ integrationId: grpcSession, total: 40 });
  });

  it('stores a profile ID of 2000 bytes of UTF-8 wherever one is kept', async () => {
    const profileId = widestProfileId(2);
    const friend = widestProfileId(3);
    // Sessions, profiles and events.
    unwrap(await put(shop, 'wide-profile-1', { profileId, cartItems: lines(1) }));
    unwrap(await shop.integration.PUT('/v2/customer_profiles/{integrationId}', { params: { path: { integrationId: profileId } }, body: { attributes: { tier: 'wide' } } }));
    unwrap(await shop.integration.POST('/v2/events', { body: { profileId, type: 'viewed', attributes: { page: 'p' } } as never }));
    // Referrals: advocate and friend.
    const referral = unwrap(
      await shop.integration.POST('/v1/referrals', { body: { campaignId: shop.campaignId, advocateProfileIntegrationId: profileId, friendProfileIntegrationId: friend } }),
    );
    expect(referral).toMatchObject({ advocateProfileIntegrationId: profileId, friendProfileIntegrationId: friend });
    // Coupon reservations and audience memberships.
    const reserved = await shop.integration.POST('/v1/coupon_reservations/{couponValue}', { params: { path: { couponValue: 'LONGID1' } }, body: { integrationIDs: [profileId, friend] } });
    expect(reserved.response.status).toBe(201);
    const holders = unwrap(await shop.integration.GET('/v1/coupon_reservations/customerprofiles/{couponValue}', { params: { path: { couponValue: 'LONGID1' } } }));
    expect(holders.data.map((p) => p.integrationId).sort()).toEqual([profileId, friend].sort());
    const audience = unwrap(await shop.integration.POST('/v2/audiences', { body: { name: 'wide ones' } }));
    const joined = await shop.integration.POST('/v2/customer_audiences', { body: { data: [{ action: 'add', profileIntegrationId: profileId, audienceId: audience.id }] } });
    expect(joined.response.status).toBe(204);
    // A coupon only this profile may redeem.
    const coupons = await t.admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons', {
      params: { path: { applicationId: shop.applicationId, campaignId: shop.campaignId } },
      body: { usageLimit: 1, validCharacters: ['A', 'B'], couponPattern: 'WIDE-####', numberOfCoupons: 2, recipientIntegrationId: profileId } as never,
    });
    expect(coupons.response.status).toBe(200);
    const inventory = unwrap(
      await shop.integration.GET('/v1/customer_profiles/{integrationId}/inventory', { params: { path: { integrationId: profileId }, query: { profile: true, coupons: true, referrals: true } } }),
    );
    expect(inventory.profile).toMatchObject({ integrationId: profileId, attributes: { tier: 'wide' } });
    expect(inventory.coupons!.length).toBeGreaterThanOrEqual(3);
    expect(inventory.referrals).toHaveLength(1);
  });
});

describe('profile integration IDs past the limit', () => {
  let t: TestNode;
  let shop: ShopSetup;

  beforeAll(async () => {
    t = await startTestNode('pglite');
    shop = await setupShop(t.url, t.admin);
    unwrap(await t.admin.POST('/v1/attributes', { body: { entity: 'Event', eventType: 'viewed', name: 'page', type: 'string', title: 'page' } }));
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  const call = async (method: string, path: string, body: unknown, auth: 'key' | 'token') => {
    const r = await fetch(t.url + path, {
      method,
      headers: { Authorization: auth === 'key' ? `ApiKey-v1 ${shop.apiKey}` : `Bearer ${t.adminToken}`, 'Content-Type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await r.text();
    return { status: r.status, body: (text === '' ? undefined : JSON.parse(text)) as ErrorBody };
  };

  // 1001 characters, and 1000 characters of three bytes each: both refused.
  const tooMany = 'x'.repeat(1001);
  const tooWide = Array.from({ length: 1000 }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919) % 20000))).join('');

  it('refuses one with a 400 on its pointer wherever a profile ID enters, and stores nothing', async () => {
    for (const bad of [tooMany, tooWide]) {
      const p = encodeURIComponent(bad);
      const cases: Array<[string, string, unknown, 'key' | 'token', string]> = [
        ['PUT', '/v2/customer_sessions/limit-1', { customerSession: { profileId: bad } }, 'key', '/customerSession/profileId'],
        ['PUT', '/v1/customer_sessions/limit-2', { profileId: bad }, 'key', '/profileId'],
        ['PUT', `/v2/customer_profiles/${p}`, { attributes: {} }, 'key', '/path/integrationId'],
        ['PUT', `/v1/customer_profiles/${p}`, { attributes: {} }, 'key', '/path/integrationId'],
        ['PUT', '/v2/customer_profiles', { customerProfiles: [{ integrationId: 'fine' }, { integrationId: bad }] }, 'key', '/customerProfiles/1/integrationId'],
        ['POST', '/v2/events', { profileId: bad, type: 'viewed', attributes: { page: 'x' } }, 'key', '/profileId'],
        ['POST', '/v1/events', { sessionId: 'limit-3', profileId: bad, type: 'viewed', attributes: { page: 'x' } }, 'key', '/profileId'],
        ['POST', '/v1/referrals', { campaignId: shop.campaignId, advocateProfileIntegrationId: bad }, 'key', '/advocateProfileIntegrationId'],
        ['POST', '/v1/referrals', { campaignId: shop.campaignId, advocateProfileIntegrationId: 'ok', friendProfileIntegrationId: bad }, 'key', '/friendProfileIntegrationId'],
        ['POST', '/v1/referrals_for_multiple_advocates', { campaignId: shop.campaignId, advocateProfileIntegrationIds: ['ok', bad] }, 'key', '/advocateProfileIntegrationIds/1'],
        ['POST', '/v2/customer_audiences', { data: [{ action: 'add', profileIntegrationId: bad, audienceId: 1 }] }, 'key', '/data/0/profileIntegrationId'],
        ['POST', '/v1/coupon_reservations/SOME', { integrationIDs: ['ok', bad] }, 'key', '/integrationIDs/1'],
        ['GET', `/v1/customer_profiles/${p}/inventory`, undefined, 'key', '/path/integrationId'],
        ['GET', `/v1/customer_profiles/${p}/achievements`, undefined, 'key', '/path/integrationId'],
        ['GET', `/v1/customer_profiles/${p}/achievements/1`, undefined, 'key', '/path/integrationId'],
        ['DELETE', `/v1/customer_data/${p}`, undefined, 'key', '/path/integrationId'],
        ['GET', `/v1/loyalty_programs/1/profile/${p}/balances`, undefined, 'key', '/path/integrationID'],
        ['GET', `/v1/loyalty_programs/1/profile/${p}`, undefined, 'token', '/path/integrationID'],
        ['PUT', `/v1/loyalty_programs/1/profile/${p}/add_points`, { points: 1 }, 'token', '/path/integrationID'],
        ['PUT', `/v1/loyalty_programs/1/profile/${p}/deduct_points`, { points: 1 }, 'token', '/path/integrationID'],
        ['POST', '/v1/loyalty_programs/1/cards', { identifier: 'card-1', profiles: [bad] }, 'token', '/profiles/0'],
        [
          'POST',
          `/v1/applications/${shop.applicationId}/campaigns/${shop.campaignId}/coupons`,
          { usageLimit: 1, validCharacters: ['A'], couponPattern: 'X-###', numberOfCoupons: 1, recipientIntegrationId: bad },
          'token',
          '/recipientIntegrationId',
        ],
        ['GET', `/v1/applications/${shop.applicationId}/campaigns/${shop.campaignId}/coupons?recipientIntegrationId=${p}`, undefined, 'token', '/query/recipientIntegrationId'],
        ['GET', `/v1/applications/${shop.applicationId}/campaigns/${shop.campaignId}/referrals?advocate=${p}`, undefined, 'token', '/query/advocate'],
        ['GET', `/v1/applications/${shop.applicationId}/sessions?profile=${p}`, undefined, 'token', '/query/profile'],
      ];
      for (const [method, path, body, auth, pointer] of cases) {
        const r = await call(method, path, body, auth);
        const label = `${method} ${path.slice(0, 60)} (${codePoints(bad)} characters, ${utf8(bad)} bytes)`;
        expect(r.status, label).toBe(400);
        expect(r.body.StatusCode, label).toBe(400);
        expect(r.body.errors.map((e) => e.source?.pointer), label).toContain(pointer);
      }
    }
    const stored = await t.node.db.query<{ n: number }>(
      `SELECT (SELECT count(*) FROM customer_profiles WHERE length(integration_id) >= 1000)::int + (SELECT count(*) FROM customer_sessions)::int AS n`,
    );
    expect(stored[0]!.n).toBe(0);
  });

  it('refuses one in a gRPC session update with INVALID_ARGUMENT on its pointer', async () => {
    const client = new IntegrationServiceClient(t.node.grpcAddress, credentials.createInsecure());
    try {
      const md = new Metadata();
      md.set('authorization', `ApiKey-v1 ${shop.apiKey}`);
      const err = await new Promise<ServiceError>((resolve) =>
        client.updateCustomerSession({ customerSessionId: 'grpc-limit', request: { customerSession: { profileId: tooWide } }, dry: false, now: '' }, md, (e) => resolve(e!)),
      );
      expect(err.code).toBe(status.INVALID_ARGUMENT);
      const error = JSON.parse(String(err.metadata.get(ERROR_METADATA_KEY)[0])) as { body: ErrorBody };
      expect(error.body.errors.map((e) => e.source?.pointer)).toEqual(['/customerSession/profileId']);
    } finally {
      client.close();
    }
  });

  it('makes no coupon or referral for a profile ID past the limit that a rule names, and the close succeeds (no 500)', async () => {
    await addCampaign(t.admin, shop.applicationId, [
      rule(['=', ['.', 'Session', 'State'], 'closed'], [['createCoupon', { recipient: ['.', 'Session', 'Attributes', 'who'] }]], 'coupon for who'),
      rule(['=', ['.', 'Session', 'State'], 'closed'], [['createReferral', { friendProfileIntegrationId: ['.', 'Session', 'Attributes', 'who'] }]], 'referral for who'),
    ]);
    const close = (id: string, who: string) =>
      shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: id } },
        body: { customerSession: { profileId: 'rule-buyer', state: 'closed', attributes: { who } } },
      });
    const wide = await close('rule-wide', tooWide);
    expect(wide.response.status).toBe(200);
    const state = unwrap(wide) as { createdCoupons: unknown[]; createdReferrals: unknown[] };
    expect(state.createdCoupons).toEqual([]);
    expect(state.createdReferrals).toEqual([]);
    expect((await t.node.db.query(`SELECT 1 FROM coupons WHERE recipient_integration_id = $1`, [tooWide])).length).toBe(0);
    const fine = unwrap(await close('rule-fine', 'someone')) as { createdCoupons: Array<{ recipientIntegrationId?: string }>; createdReferrals: Array<{ friendProfileIntegrationId?: string }> };
    expect(fine.createdCoupons.map((c) => c.recipientIntegrationId)).toEqual(['someone']);
    expect(fine.createdReferrals.map((r) => r.friendProfileIntegrationId)).toEqual(['someone']);
  });

  it('takes 1000 one-byte characters, as before', async () => {
    const id = 'y'.repeat(1000);
    const r = unwrap(await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'limit-ok' } }, body: { customerSession: { profileId: id }, responseContent: ['customerProfile'] } }));
    expect(r.customerProfile).toMatchObject({ integrationId: id });
  });
});
