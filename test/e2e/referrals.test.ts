import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresUp } from '../helpers/services.js';
import { createIntegrationClient, setupShop, startTestNode, unwrap, type ShopSetup, type TestNode } from '../helpers/node.js';
import { cart } from '../helpers/fixtures.js';
import { addCampaign, campaignStats, effectSummary, hoursFromNow, rule } from '../helpers/promotions.js';

const referralRuleset = (condition: unknown = ['referralValid']) => ({
  rules: [rule(condition, [['setDiscount', 'friend', 5]], 'referred')],
  bindings: [],
  activate: true,
});

describe.skipIf(!postgresUp)('referrals', () => {
  let t: TestNode;

  beforeAll(async () => {
    t = await startTestNode('postgres');
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  const shop = (options: Parameters<typeof setupShop>[2] = {}) => setupShop(t.url, t.admin, { ruleset: referralRuleset(), ...options });
  const refer = async (s: ShopSetup, body: Record<string, unknown>) => unwrap(await s.integration.POST('/v1/referrals', { body: body as never }));
  const put = async (s: ShopSetup, id: string, customerSession: Record<string, unknown>) =>
    unwrap(await s.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: id } }, body: { customerSession: customerSession as never } }));
  const db = () => t.node.db;

  it('creates referral codes for one advocate and for many', async () => {
    const s = await shop();
    const r = await refer(s, { campaignId: s.campaignId, advocateProfileIntegrationId: 'ada', usageLimit: 2 });
    expect(r).toMatchObject({ campaignId: s.campaignId, advocateProfileIntegrationId: 'ada', usageCounter: 0, usageLimit: 2 });
    expect(r.code).toMatch(/^[A-Z0-9]{4}-[A-Z0-9]{4}$/);
    expect(await db().query(`SELECT 1 FROM customer_profiles WHERE integration_id = 'ada'`)).toHaveLength(1);

    const many = await s.integration.POST('/v1/referrals_for_multiple_advocates', {
      params: { query: { silent: 'no' } },
      body: { campaignId: s.campaignId, advocateProfileIntegrationIds: ['m1', 'm2', 'm3', 'm2'] },
    });
    expect(many.response.status).toBe(201);
    expect(many.data!.data.map((x) => x.advocateProfileIntegrationId).sort()).toEqual(['m1', 'm2', 'm3']);
    expect(new Set(many.data!.data.map((x) => x.code)).size).toBe(3);
    const silent = await s.integration.POST('/v1/referrals_for_multiple_advocates', { body: { campaignId: s.campaignId, advocateProfileIntegrationIds: ['m4'] } });
    expect(silent.response.status).toBe(204);
    expect(await db().query(`SELECT 1 FROM referrals WHERE application_id = $1 AND advocate_profile_integration_id = 'm4'`, [s.applicationId])).toHaveLength(1);
  });

  it('refuses bad referral requests with pointers, wrong keys and other Applications’ campaigns', async () => {
    const s = await shop();
    const other = await shop();
    const cases: Array<[Record<string, unknown>, number, string]> = [
      [{ advocateProfileIntegrationId: 'ada' }, 400, '/campaignId'],
      [{ campaignId: s.campaignId }, 400, '/advocateProfileIntegrationId'],
      [{ campaignId: s.campaignId, advocateProfileIntegrationId: 'ada', friendProfileIntegrationId: 'ada' }, 400, '/friendProfileIntegrationId'],
      [{ campaignId: s.campaignId, advocateProfileIntegrationId: 'ada', startDate: hoursFromNow(2), expiryDate: hoursFromNow(1) }, 400, '/expiryDate'],
      [{ campaignId: other.campaignId, advocateProfileIntegrationId: 'ada' }, 404, '/campaignId'],
      // Values the database cannot hold are the client's: 400, never 500.
      [{ campaignId: 3_000_000_000, advocateProfileIntegrationId: 'ada' }, 400, ''],
      [{ campaignId: s.campaignId, advocateProfileIntegrationId: 'ada', expiryDate: '0000-01-01T00:00:00Z' }, 400, ''],
    ];
    for (const [body, status, pointer] of cases) {
      const r = await s.integration.POST('/v1/referrals', { body: body as never });
      expect(r.response.status, pointer).toBe(status);
      expect(r.error?.errors[0]?.source?.pointer).toBe(pointer);
    }
    const wrong = createIntegrationClient({ baseUrl: t.url, apiKey: 'wrong', retries: 0 });
    expect((await wrong.POST('/v1/referrals', { body: { campaignId: s.campaignId, advocateProfileIntegrationId: 'ada' } })).response.status).toBe(401);

    // The same for several advocates.
    const many = async (body: Record<string, unknown>, client = s.integration) => client.POST('/v1/referrals_for_multiple_advocates', { params: { query: { silent: 'no' } }, body: body as never });
    const empty = await many({ campaignId: s.campaignId, advocateProfileIntegrationIds: [] });
    expect(empty.response.status).toBe(400);
    expect(empty.error?.errors[0]?.source?.pointer).toBe('/advocateProfileIntegrationIds');
    const foreign = await many({ campaignId: other.campaignId, advocateProfileIntegrationIds: ['m1'] });
    expect(foreign.response.status).toBe(404);
    expect(foreign.error?.errors[0]?.source?.pointer).toBe('/campaignId');
    expect((await many({ campaignId: s.campaignId, advocateProfileIntegrationIds: ['m1'] }, wrong)).response.status).toBe(401);
  });

  it('redeems a referral on close, once per friend and campaign, and gives it back on cancel', async () => {
    const s = await shop();
    const r = await refer(s, { campaignId: s.campaignId, advocateProfileIntegrationId: 'ada' });
    expect(effectSummary((await put(s, 'f-1', cart([20], { profileId: 'fred', referralCode: r.code }))).effects)).toEqual(['acceptReferral', 'setDiscount']);
    expect(effectSummary((await put(s, 'f-1', { state: 'closed' })).effects)).toEqual(['acceptReferral', 'setDiscount']);
    const [row] = await db().query(`SELECT usage_counter FROM referrals WHERE id = $1`, [r.id]);
    expect(row).toEqual({ usage_counter: 1 });
    expect(await campaignStats(t.admin, s.applicationId, s.campaignId)).toMatchObject({ referralRedemptionCount: 1 });
    // Fred was referred in this campaign: a second code of it is refused.
    const second = await refer(s, { campaignId: s.campaignId, advocateProfileIntegrationId: 'bea' });
    expect(effectSummary((await put(s, 'f-2', cart([20], { profileId: 'fred', referralCode: second.code }))).effects)).toEqual(['rejectReferral:ReferralCustomerAlreadyReferred']);

    const cancelled = await put(s, 'f-1', { state: 'cancelled' });
    expect(cancelled.effects.map((e) => [e.effectType, e.props.value])).toEqual([
      ['rollbackReferral', r.code],
      ['rollbackDiscount', 5],
    ]);
    expect(await db().query(`SELECT usage_counter FROM referrals WHERE id = $1`, [r.id])).toEqual([{ usage_counter: 0 }]);
    expect(await db().query(`SELECT 1 FROM referral_redemptions WHERE referral_id = $1`, [r.id])).toHaveLength(0);
  });

  it('rejects referral codes with each reason', async () => {
    const s = await shop();
    const disabled = await addCampaign(t.admin, s.applicationId, [rule(['referralValid'], [['setDiscount', 'd', 1]])], { state: 'disabled' });
    const strict = await addCampaign(t.admin, s.applicationId, [rule(['and', ['referralValid'], ['>', ['.', 'Session', 'Total'], 1000]], [['setDiscount', 's', 1]])]);
    const code = async (body: Record<string, unknown>) => (await refer(s, { campaignId: s.campaignId, advocateProfileIntegrationId: 'ada', ...body })).code;
    const expired = await code({ expiryDate: hoursFromNow(-1) });
    const future = await code({ startDate: hoursFromNow(24) });
    const used = await refer(s, { campaignId: s.campaignId, advocateProfileIntegrationId: 'ada', usageLimit: 1 });
    await db().query(`UPDATE referrals SET usage_counter = 1 WHERE id = $1`, [used.id]);
    const forGina = await code({ friendProfileIntegrationId: 'gina' });
    const off = (await refer(s, { campaignId: disabled, advocateProfileIntegrationId: 'ada' })).code;
    const big = (await refer(s, { campaignId: strict, advocateProfileIntegrationId: 'ada' })).code;
    const own = await code({});
    const gone = (await refer(s, { campaignId: s.campaignId, advocateProfileIntegrationId: 'ghost' })).code;
    await db().query(`DELETE FROM customer_profiles WHERE integration_id = 'ghost'`);
    const cases: Array<[string, string, string]> = [
      ['NOPE-NOPE', 'fred', 'ReferralNotFound'],
      [expired, 'fred', 'ReferralExpired'],
      [future, 'fred', 'ReferralStartDateInFuture'],
      [used.code, 'fred', 'ReferralLimitReached'],
      [forGina, 'fred', 'ReferralRecipientDoesNotMatch'],
      [off, 'fred', 'ReferralPartOfNotRunningCampaign'],
      [big, 'fred', 'ReferralRejectedByCondition'],
      [own, 'ada', 'ReferralRecipientIdSameAsAdvocate'],
      [gone, 'fred', 'AdvocateNotFound'],
    ];
    for (const [referralCode, profileId, reason] of cases) {
      const r = await put(s, `why-${reason}`, cart([20], { profileId, referralCode }));
      expect(effectSummary(r.effects), reason).toEqual([`rejectReferral:${reason}`]);
    }
    expect(effectSummary((await put(s, 'why-gina', cart([20], { profileId: 'gina', referralCode: forGina }))).effects)).toEqual(['acceptReferral', 'setDiscount']);
  });

  it('holds a campaign limit on referral redemptions, counted on close', async () => {
    const s = await shop();
    const limited = await addCampaign(t.admin, s.applicationId, [rule(['referralValid'], [['setDiscount', 'once', 3]])], {
      limits: [{ action: 'redeemReferral', limit: 1 }],
    });
    const first = await refer(s, { campaignId: limited, advocateProfileIntegrationId: 'ada' });
    const second = await refer(s, { campaignId: limited, advocateProfileIntegrationId: 'bea' });
    // Open sessions hold nothing: both may show the referral as accepted until one closes.
    expect(effectSummary((await put(s, 'cl-1', cart([20], { profileId: 'fred', referralCode: first.code }))).effects)).toEqual(['acceptReferral', 'setDiscount']);
    expect(effectSummary((await put(s, 'cl-2', cart([20], { profileId: 'gus', referralCode: second.code }))).effects)).toEqual(['acceptReferral', 'setDiscount']);
    expect(effectSummary((await put(s, 'cl-1', { state: 'closed' })).effects)).toEqual(['acceptReferral', 'setDiscount']);
    expect(effectSummary((await put(s, 'cl-2', { state: 'closed' })).effects)).toEqual(['rejectReferral:CampaignLimitReached']);
    expect(await db().query(`SELECT usage_counter FROM referrals WHERE id = ANY($1::bigint[]) ORDER BY id`, [[first.id, second.id]])).toEqual([
      { usage_counter: 1 },
      { usage_counter: 0 },
    ]);
    expect(await campaignStats(t.admin, s.applicationId, limited)).toMatchObject({ referralRedemptionCount: 1 });
  });

  it('rejects the referral of an exclusive campaign that lost', async () => {
    const s = await shop({ application: { campaignPriority: 'exclusive', exclusiveCampaignsStrategy: 'highestDiscount' } });
    await addCampaign(t.admin, s.applicationId, [rule(true, [['setDiscount', 'big', 30]])]);
    const r = await refer(s, { campaignId: s.campaignId, advocateProfileIntegrationId: 'ada' });
    expect(effectSummary((await put(s, 'lost-1', cart([50], { profileId: 'fred', referralCode: r.code }))).effects)).toEqual([
      'rejectReferral:ReferralPartOfNotTriggeredCampaign',
      'setDiscount',
    ]);
  });

  it('stores referrals made by referralCreated on close, with the session profile as advocate', async () => {
    const s = await shop({
      ruleset: { rules: [rule(['not', ['referralValid']], [['createReferral', {}]], 'make'), rule(['referralValid'], [['setDiscount', 'friend', 5]], 'friend')], bindings: [], activate: true },
    });
    const open = await put(s, 'mk-1', cart([20], { profileId: 'adam' }));
    expect(open.createdReferrals).toEqual([]);
    const closed = unwrap(
      await s.integration.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'mk-1' } }, body: { customerSession: { state: 'closed' } } }),
    );
    const code = closed.effects[0]!.props.value as string;
    expect(closed.createdReferrals).toEqual([expect.objectContaining({ advocateProfileIntegrationId: 'adam', campaignId: s.campaignId, code })]);
    // The code is real: a friend's session accepts it, and its advocate's own is refused.
    expect(effectSummary((await put(s, 'mk-friend', cart([20], { profileId: 'bella', referralCode: code }))).effects)).toEqual(['acceptReferral', 'setDiscount']);
    expect(effectSummary((await put(s, 'mk-self', cart([20], { profileId: 'adam', referralCode: code }))).effects)).toContain('rejectReferral:ReferralRecipientIdSameAsAdvocate');
    const shown = unwrap(
      await s.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
        params: { path: { customerSessionId: 'mk-friend' } },
        body: { customerSession: { attributes: { seen: true } }, responseContent: ['referral'] },
      }),
    );
    expect(shown.referral).toMatchObject({ code, campaignId: s.campaignId, advocateProfileIntegrationId: 'adam', usageCounter: 0 });
  });

  it('lets one friend be referred once when two sessions with two codes close at the same time', async () => {
    const s = await shop();
    const a = await refer(s, { campaignId: s.campaignId, advocateProfileIntegrationId: 'ada' });
    const b = await refer(s, { campaignId: s.campaignId, advocateProfileIntegrationId: 'bea' });
    const [x, y] = await Promise.all([
      put(s, 'twin-a', cart([20], { profileId: 'tom', referralCode: a.code, state: 'closed' })),
      put(s, 'twin-b', cart([20], { profileId: 'tom', referralCode: b.code, state: 'closed' })),
    ]);
    const outcomes = [effectSummary(x.effects).join(','), effectSummary(y.effects).join(',')].sort();
    expect(outcomes).toEqual(['acceptReferral,setDiscount', 'rejectReferral:ReferralCustomerAlreadyReferred']);
  });
});
