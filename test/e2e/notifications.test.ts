import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIntegrationClient, createManagementClient, unwrap } from '../../sdk/index.js';
import { anonymousClient, pointers, strangerAdmin, userWithScopes, type Err } from '../helpers/coupon-management.js';
import { cart, newApplication, newCampaign } from '../helpers/fixtures.js';
import { startTestNode, type TestNode } from '../helpers/node.js';
import { contractErrors, notificationsAt, sleep, subscribe, waitForNotifications, type Notification } from '../helpers/notifications.js';
import { rule } from '../helpers/promotions.js';
import { Receiver } from '../helpers/receiver.js';
import { eventually } from '../helpers/users.js';

const NW = '/v1/applications/{applicationId}/notification_webhooks' as const;
const NW_ONE = '/v1/applications/{applicationId}/notification_webhooks/{notificationWebhookId}' as const;
const CAMPAIGNS = '/v1/applications/{applicationId}/campaigns' as const;
const CAMPAIGN = '/v1/applications/{applicationId}/campaigns/{campaignId}' as const;
const RULESETS = '/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets' as const;
const RULESET = '/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets/{rulesetId}' as const;
const COUPONS = '/v1/applications/{applicationId}/campaigns/{campaignId}/coupons' as const;
const COUPON = '/v1/applications/{applicationId}/campaigns/{campaignId}/coupons/{couponId}' as const;
const ASYNC = '/v1/applications/{applicationId}/campaigns/{campaignId}/coupons_async' as const;
const JOB = '/v1/applications/{applicationId}/campaigns/{campaignId}/coupons_async/{batchId}' as const;
const ALNUM = [...'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'];

type Body = Record<string, any>;

/** The root set of this engine's evaluation tree with these campaigns. */
const rootSet = (ids: number[], evaluationMode = 'stackable') => ({
  type: 'SET',
  name: 'root',
  operator: 'ALL',
  elements: ids.map((campaignId) => ({ type: 'CAMPAIGN', campaignId })),
  groupId: 0,
  description: expect.any(String),
  evaluationMode,
});

/**
 * Notifications of the Management API and the rule engine, delivered by a running node to a real
 * local receiver through notification webhooks (ext): each type with its exact body (checked
 * against openapi/notifications.yaml too), only to enabled webhooks subscribed to it, signed with
 * their secret.
 */
describe('notifications', () => {
  let t: TestNode;
  let rx: Receiver;

  beforeAll(async () => {
    rx = await Receiver.start();
    t = await startTestNode('pglite', {
      outbox: { pollMs: 50, backoffMs: 20, maxBackoffMs: 100, timeoutMs: 2000, leaseMarginMs: 500 },
      couponJobs: { pollMs: 50, chunkSize: 1000 },
    });
  });
  afterAll(async () => {
    await t?.stop();
    await rx?.stop();
  });

  const newApp = async (overrides: Body = {}): Promise<number> => unwrap(await t.admin.POST('/v1/applications', { body: newApplication(overrides) as never })).id;
  const createCampaign = async (applicationId: number, overrides: Body = {}): Promise<Body> =>
    unwrap(await t.admin.POST(CAMPAIGNS, { params: { path: { applicationId } }, body: newCampaign(overrides) as never })) as Body;
  const getCampaign = async (applicationId: number, campaignId: number): Promise<Body> =>
    unwrap(await t.admin.GET(CAMPAIGN, { params: { path: { applicationId, campaignId } } })) as Body;
  /** Waits for `count` notifications at the prefix, each conforming to the contract. */
  const expectNotifications = async (prefix: string, count: number, type?: string): Promise<Notification[]> => {
    const got = await waitForNotifications(rx, prefix, count, type);
    for (const n of got) expect(contractErrors(n.type, n.body), `${n.type} ${n.raw}`).toEqual([]);
    return got;
  };
  const outboxRows = async (applicationId: number, type?: string): Promise<number> => {
    const [row] = await t.node.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM outbox WHERE application_id = $1 AND kind = 'notification' AND ($2::text IS NULL OR notification_type = $2)`,
      [applicationId, type ?? null],
    );
    return row!.n;
  };

  describe('notification webhooks (ext)', () => {
    it('are created, listed, read, replaced and deleted; the secret is never shown', async () => {
      const applicationId = await newApp();
      const created = await t.admin.POST(NW, {
        params: { path: { applicationId } },
        body: { url: 'https://crm.example/hooks', headers: ['Authorization: Bearer abc'], notificationTypes: ['CouponCreated', 'CampaignNotification'], secret: 's3' },
      });
      expect(created.response.status).toBe(201);
      const w = created.data as Body;
      expect(w).toEqual({
        id: expect.any(Number),
        created: expect.any(String),
        modified: w.created,
        applicationId,
        url: 'https://crm.example/hooks',
        headers: ['Authorization: Bearer abc'],
        notificationTypes: ['CouponCreated', 'CampaignNotification'],
        enabled: true,
      });
      const path = { applicationId, notificationWebhookId: w.id as number };
      expect(unwrap(await t.admin.GET(NW, { params: { path: { applicationId } } }))).toEqual({ totalResultSize: 1, data: [w] });
      expect(unwrap(await t.admin.GET(NW_ONE, { params: { path } }))).toEqual(w);
      const replaced = unwrap(
        await t.admin.PUT(NW_ONE, { params: { path }, body: { url: 'http://crm.example/v2', headers: [], notificationTypes: ['CouponsDeleted'], enabled: false } }),
      ) as Body;
      expect(replaced).toEqual({ ...w, url: 'http://crm.example/v2', headers: [], notificationTypes: ['CouponsDeleted'], enabled: false, modified: expect.any(String) });
      expect(JSON.stringify(replaced)).not.toContain('s3');
      const [stored] = await t.node.db.query<{ secret: string }>(`SELECT secret FROM notification_webhooks WHERE id = $1`, [w.id]);
      expect(stored!.secret).toBe('s3');
      expect((await t.admin.DELETE(NW_ONE, { params: { path } })).response.status).toBe(204);
      const gone = await t.admin.GET(NW_ONE, { params: { path } });
      expect(gone.response.status).toBe(404);
      expect(pointers(gone.error as Err)).toEqual(['/notificationWebhookId']);
      expect(unwrap(await t.admin.GET(NW, { params: { path: { applicationId } } }))).toEqual({ totalResultSize: 0, data: [] });
    });

    it('refuses bad input with the error body and the pointer of the offending value', async () => {
      const applicationId = await newApp();
      const good = { url: 'https://x.example/n', headers: [], notificationTypes: ['CouponCreated'] };
      const cases: Array<[Body, string]> = [
        [{ ...good, notificationTypes: ['CouponCreated', 'Nope'] }, '/notificationTypes/1'],
        [{ ...good, notificationTypes: [] }, '/notificationTypes'],
        [{ ...good, notificationTypes: ['CouponCreated', 'CouponCreated'] }, '/notificationTypes'],
        [{ url: good.url, headers: [] }, '/notificationTypes'],
        [{ url: good.url, notificationTypes: good.notificationTypes }, '/headers'],
        [{ ...good, headers: ['NoColonHere'] }, '/headers/0'],
        [{ ...good, url: 'ftp://x.example/n' }, '/url'],
        [{ ...good, url: 'not a url' }, '/url'],
        [{ ...good, secret: 'x'.repeat(1001) }, '/secret'],
        [{ ...good, enabled: 'yes' }, '/enabled'],
      ];
      for (const [body, pointer] of cases) {
        const r = await t.admin.POST(NW, { params: { path: { applicationId } }, body: body as never });
        expect(r.response.status, JSON.stringify(body)).toBe(400);
        const error = r.error as Body;
        expect(error).toMatchObject({ message: expect.any(String), StatusCode: 400 });
        expect(error.errors[0]).toMatchObject({ title: expect.any(String), details: expect.any(String), source: { pointer } });
      }
      expect(unwrap(await t.admin.GET(NW, { params: { path: { applicationId } } })).totalResultSize).toBe(0);
      const missing = await t.admin.PUT(NW_ONE, { params: { path: { applicationId, notificationWebhookId: 999_999 } }, body: good as never });
      expect(missing.response.status).toBe(404);
      expect(pointers(missing.error as Err)).toEqual(['/notificationWebhookId']);
    });

    it('are refused without a valid token, hidden from other accounts and other Applications, and read-only users see header values redacted', async () => {
      const applicationId = await newApp();
      const otherApp = await newApp();
      const w = await subscribe(t.admin, rx, applicationId, '/acl', ['CouponCreated'], { headers: ['X-Key: secret-value'] });
      const path = { applicationId, notificationWebhookId: w.id as number };

      const anonymous = await anonymousClient(t).GET(NW, { params: { path: { applicationId } } });
      expect(anonymous.response.status).toBe(401);
      expect(pointers(anonymous.error as Err)).toEqual(['/headers/authorization']);
      const badToken = createManagementClient({ baseUrl: t.url, token: 'not-a-token', retries: 0 });
      expect((await badToken.GET(NW_ONE, { params: { path } })).response.status).toBe(401);

      const stranger = await strangerAdmin(t);
      for (const r of [
        await stranger.GET(NW, { params: { path: { applicationId } } }),
        await stranger.GET(NW_ONE, { params: { path } }),
        await stranger.DELETE(NW_ONE, { params: { path } }),
        await stranger.POST(NW, { params: { path: { applicationId } }, body: { url: 'https://x.example', headers: [], notificationTypes: ['CouponCreated'] } }),
      ]) {
        expect(r.response.status).toBe(404);
        expect(pointers(r.error as Err)).toEqual(['/applicationId']);
      }
      // Another Application of the same account does not reach it either.
      const elsewhere = await t.admin.GET(NW_ONE, { params: { path: { applicationId: otherApp, notificationWebhookId: w.id } } });
      expect(elsewhere.response.status).toBe(404);
      expect(pointers(elsewhere.error as Err)).toEqual(['/notificationWebhookId']);
      expect((await t.admin.DELETE(NW_ONE, { params: { path: { applicationId: otherApp, notificationWebhookId: w.id } } })).response.status).toBe(404);

      const reader = await userWithScopes(t, { [String(applicationId)]: 'read' });
      expect((unwrap(await reader.GET(NW_ONE, { params: { path } })) as Body).headers).toEqual(['X-Key: [redacted]']);
      expect((unwrap(await reader.GET(NW, { params: { path: { applicationId } } })) as Body).data[0].headers).toEqual(['X-Key: [redacted]']);
      for (const r of [
        await reader.POST(NW, { params: { path: { applicationId } }, body: { url: 'https://x.example', headers: [], notificationTypes: ['CouponCreated'] } }),
        await reader.PUT(NW_ONE, { params: { path }, body: { url: 'https://x.example', headers: [], notificationTypes: ['CouponCreated'] } }),
        await reader.DELETE(NW_ONE, { params: { path } }),
      ]) {
        expect(r.response.status).toBe(403);
      }
      const writer = await userWithScopes(t, { [String(applicationId)]: 'write' });
      expect((unwrap(await writer.GET(NW_ONE, { params: { path } })) as Body).headers).toEqual(['X-Key: secret-value']);
      // An Application outside the user's policy is not found.
      expect((await writer.GET(NW, { params: { path: { applicationId: otherApp } } })).response.status).toBe(404);
    });
  });

  describe('campaign notifications', () => {
    it('notifies campaign_created with its evaluation position, and each new version of the evaluation tree', async () => {
      const applicationId = await newApp();
      const at = `/campaigns-${applicationId}/`;
      await subscribe(t.admin, rx, applicationId, at, ['CampaignNotification', 'CampaignEvaluationTreeChanged']);
      const first = await createCampaign(applicationId, { name: 'First' });
      const [created] = await expectNotifications(at, 1, 'CampaignNotification');
      expect(created!.body).toEqual({
        TotalResultSize: 1,
        NotificationType: 'CampaignNotification',
        Data: [{ Event: 'campaign_created', campaign: first, ruleset: null, evaluationPosition: { groupId: 0, groupName: 'root', position: 0 } }],
      });
      const [tree] = await expectNotifications(at, 1, 'CampaignEvaluationTreeChanged');
      expect(tree!.body).toEqual({
        TotalResultSize: 1,
        NotificationType: 'CampaignEvaluationTreeChanged',
        Data: [
          {
            applicationId,
            event: 'campaign_evaluation_tree_changed',
            oldEvaluationTree: { id: expect.any(Number), created: expect.any(String), applicationId, version: 1, set: rootSet([]), updatedBy: '' },
            evaluationTree: { id: expect.any(Number), created: first.created, applicationId, version: 2, set: rootSet([first.id]), updatedBy: 'Admin' },
          },
        ],
      });
      const treeId = tree!.body.Data[0].evaluationTree.id;
      expect(tree!.body.Data[0].oldEvaluationTree.id).toBe(treeId);

      const second = await createCampaign(applicationId, { name: 'Second' });
      const campaigns = await expectNotifications(at, 2, 'CampaignNotification');
      expect(campaigns[1]!.body.Data).toEqual([{ Event: 'campaign_created', campaign: second, ruleset: null, evaluationPosition: { groupId: 0, groupName: 'root', position: 1 } }]);
      const trees = await expectNotifications(at, 2, 'CampaignEvaluationTreeChanged');
      expect(trees[1]!.body.Data[0].oldEvaluationTree).toEqual(tree!.body.Data[0].evaluationTree);
      expect(trees[1]!.body.Data[0].evaluationTree).toEqual({ id: treeId, created: second.created, applicationId, version: 3, set: rootSet([first.id, second.id]), updatedBy: 'Admin' });

      // A campaign created archived is in no set: no new tree, and no position.
      const archived = await createCampaign(applicationId, { name: 'Old', state: 'archived' });
      const all = await expectNotifications(at, 3, 'CampaignNotification');
      expect(all[2]!.body.Data[0]).toEqual({ Event: 'campaign_created', campaign: archived, ruleset: null, evaluationPosition: { groupId: 0, groupName: 'root', position: null } });

      // The Application's priority is the tree's evaluation mode.
      unwrap(
        await t.admin.PUT('/v1/applications/{applicationId}', {
          params: { path: { applicationId } },
          body: newApplication({ campaignPriority: 'exclusive', exclusiveCampaignsStrategy: 'lowestDiscount' }) as never,
        }),
      );
      const afterPriority = await expectNotifications(at, 3, 'CampaignEvaluationTreeChanged');
      expect(afterPriority[2]!.body.Data[0].evaluationTree).toMatchObject({ version: 4, set: rootSet([first.id, second.id], 'lowestDiscount') });
      expect(afterPriority[2]!.body.Data[0].oldEvaluationTree).toEqual(trees[1]!.body.Data[0].evaluationTree);
      // A change of the Application that is not its priority leaves the tree alone.
      unwrap(await t.admin.PUT('/v1/applications/{applicationId}', { params: { path: { applicationId } }, body: newApplication({ name: 'Renamed' }) as never }));
      await sleep(300);
      expect(notificationsAt(rx, at, 'CampaignEvaluationTreeChanged')).toHaveLength(3);
    });

    it('notifies campaign_edited with the old campaign, campaign_state_changed in the same notification, and archiving as a tree change', async () => {
      const applicationId = await newApp();
      const at = `/edits-${applicationId}/`;
      const campaign = await createCampaign(applicationId, { name: 'Spring' });
      await subscribe(t.admin, rx, applicationId, at, ['CampaignNotification', 'CampaignEvaluationTreeChanged']);
      const put = async (body: Body) => unwrap(await t.admin.PUT(CAMPAIGN, { params: { path: { applicationId, campaignId: campaign.id } }, body: body as never })) as Body;

      const renamed = await put({ name: 'Spring sale' });
      const [edited] = await expectNotifications(at, 1, 'CampaignNotification');
      expect(edited!.body).toEqual({
        TotalResultSize: 1,
        NotificationType: 'CampaignNotification',
        Data: [{ Event: 'campaign_edited', campaign: renamed, oldCampaign: campaign, ruleset: null }],
      });

      const disabled = await put({ name: 'Spring sale', state: 'disabled' });
      const second = (await expectNotifications(at, 2, 'CampaignNotification'))[1]!;
      expect(second.body).toEqual({
        TotalResultSize: 2,
        NotificationType: 'CampaignNotification',
        Data: [
          { Event: 'campaign_edited', campaign: disabled, oldCampaign: renamed, ruleset: null },
          { Event: 'campaign_state_changed', campaign: disabled, ruleset: null, oldState: 'enabled', newState: 'disabled' },
        ],
      });
      // Disabled campaigns keep their place in the tree.
      await sleep(200);
      expect(notificationsAt(rx, at, 'CampaignEvaluationTreeChanged')).toEqual([]);

      const archived = await put({ name: 'Spring sale', state: 'archived' });
      const third = (await expectNotifications(at, 3, 'CampaignNotification'))[2]!;
      expect(third.body.Data).toEqual([
        { Event: 'campaign_edited', campaign: archived, oldCampaign: disabled, ruleset: null },
        { Event: 'campaign_state_changed', campaign: archived, ruleset: null, oldState: 'disabled', newState: 'archived' },
      ]);
      const [tree] = await expectNotifications(at, 1, 'CampaignEvaluationTreeChanged');
      expect(tree!.body.Data[0].oldEvaluationTree.set).toEqual(rootSet([campaign.id]));
      // Version 2 came with the campaign's creation, before the subscription.
      expect(tree!.body.Data[0].evaluationTree).toMatchObject({ version: 3, set: rootSet([]), updatedBy: 'Admin' });
    });

    it('notifies campaign_ruleset_changed when the active ruleset changes, and nothing for a ruleset that is not active', async () => {
      const applicationId = await newApp();
      const at = `/rulesets-${applicationId}/`;
      const campaign = await createCampaign(applicationId);
      await subscribe(t.admin, rx, applicationId, at, ['CampaignNotification', 'CampaignEvaluationTreeChanged']);
      const where = { applicationId, campaignId: campaign.id as number };
      const rules = (percent: number) => [{ title: `${percent}%`, condition: true, effects: [['setDiscount', 'off', ['*', ['.', 'Session', 'Total'], percent / 100]]] }];
      const events = async (count: number) => (await expectNotifications(at, count, 'CampaignNotification')).map((n) => n.body.Data);

      const r1 = unwrap(await t.admin.POST(RULESETS, { params: { path: where }, body: { rules: rules(10), bindings: [], activate: true } as never })) as Body;
      expect((await events(1))[0]).toEqual([{ Event: 'campaign_ruleset_changed', campaign: await getCampaign(applicationId, campaign.id), oldRuleset: null, ruleset: r1 }]);

      const r2 = unwrap(await t.admin.POST(RULESETS, { params: { path: where }, body: { rules: rules(20), bindings: [] } as never })) as Body;
      await sleep(200);
      expect(notificationsAt(rx, at, 'CampaignNotification')).toHaveLength(1);

      const r2Active = unwrap(await t.admin.PUT(RULESET, { params: { path: { ...where, rulesetId: r2.id } }, body: { rules: rules(20), bindings: [], activate: true } as never })) as Body;
      expect((await events(2))[1]).toEqual([{ Event: 'campaign_ruleset_changed', campaign: await getCampaign(applicationId, campaign.id), oldRuleset: r1, ruleset: r2Active }]);

      // The active ruleset rewritten: the campaign runs other rules.
      const r2Rewritten = unwrap(await t.admin.PUT(RULESET, { params: { path: { ...where, rulesetId: r2.id } }, body: { rules: rules(30), bindings: [] } as never })) as Body;
      expect((await events(3))[2]).toEqual([{ Event: 'campaign_ruleset_changed', campaign: await getCampaign(applicationId, campaign.id), oldRuleset: r2Active, ruleset: r2Rewritten }]);

      // r1 is no longer active: deleting it changes nothing the campaign runs.
      expect((await t.admin.DELETE(RULESET, { params: { path: { ...where, rulesetId: r1.id } } })).response.status).toBe(204);
      await sleep(200);
      expect(notificationsAt(rx, at, 'CampaignNotification')).toHaveLength(3);

      expect((await t.admin.DELETE(RULESET, { params: { path: { ...where, rulesetId: r2.id } } })).response.status).toBe(204);
      const draft = await getCampaign(applicationId, campaign.id);
      expect(draft.activeRulesetId).toBeUndefined();
      expect((await events(4))[3]).toEqual([{ Event: 'campaign_ruleset_changed', campaign: draft, oldRuleset: r2Rewritten, ruleset: null }]);
      // Rulesets never move a campaign in the tree.
      expect(notificationsAt(rx, at, 'CampaignEvaluationTreeChanged')).toEqual([]);
    });

    it('notifies campaign_deleted, and a copy into another Application as campaign_created there', async () => {
      const source = await newApp();
      const target = await newApp();
      const atSource = `/deleted-${source}/`;
      const atTarget = `/copied-${target}/`;
      const keep = await createCampaign(source, { name: 'Keep' });
      const campaign = await createCampaign(source, { name: 'Gone soon' });
      const ruleset = unwrap(
        await t.admin.POST(RULESETS, { params: { path: { applicationId: source, campaignId: campaign.id } }, body: { rules: [rule(true, [['setDiscount', 'x', 1]])], bindings: [], activate: true } as never }),
      ) as Body;
      await subscribe(t.admin, rx, source, atSource, ['CampaignNotification', 'CampaignEvaluationTreeChanged']);
      await subscribe(t.admin, rx, target, atTarget, ['CampaignNotification', 'CampaignEvaluationTreeChanged']);

      const copies = unwrap(
        await t.admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/campaign_duplicate', {
          params: { path: { applicationId: source, campaignId: campaign.id } },
          body: { applicationIds: [target] },
        }),
      ) as Body;
      const copy = copies.data[0] as Body;
      const [copied] = await expectNotifications(atTarget, 1, 'CampaignNotification');
      const copiedRuleset = copied!.body.Data[0].ruleset as Body;
      expect(copied!.body.Data).toEqual([
        {
          Event: 'campaign_created',
          campaign: copy,
          ruleset: { ...ruleset, id: copy.activeRulesetId, campaignId: copy.id, created: expect.any(String), activatedAt: expect.any(String), userId: expect.any(Number) },
          evaluationPosition: { groupId: 0, groupName: 'root', position: 0 },
        },
      ]);
      expect(copiedRuleset.rules).toEqual(ruleset.rules);
      const [targetTree] = await expectNotifications(atTarget, 1, 'CampaignEvaluationTreeChanged');
      expect(targetTree!.body.Data[0].evaluationTree.set).toEqual(rootSet([copy.id]));

      const before = await getCampaign(source, campaign.id);
      expect((await t.admin.DELETE(CAMPAIGN, { params: { path: { applicationId: source, campaignId: campaign.id } } })).response.status).toBe(204);
      const [deleted] = await expectNotifications(atSource, 1, 'CampaignNotification');
      expect(deleted!.body).toEqual({ TotalResultSize: 1, NotificationType: 'CampaignNotification', Data: [{ Event: 'campaign_deleted', campaign: before, deletedAt: expect.any(String) }] });
      expect(Math.abs(Date.parse(deleted!.body.Data[0].deletedAt) - Date.now())).toBeLessThan(60_000);
      const [sourceTree] = await expectNotifications(atSource, 1, 'CampaignEvaluationTreeChanged');
      expect(sourceTree!.body.Data[0].oldEvaluationTree.set).toEqual(rootSet([keep.id, campaign.id]));
      expect(sourceTree!.body.Data[0].evaluationTree.set).toEqual(rootSet([keep.id]));
    });
  });

  describe('coupon notifications', () => {
    const couponPlace = async () => {
      const applicationId = await newApp();
      const campaign = await createCampaign(applicationId);
      return { applicationId, campaignId: campaign.id as number };
    };
    const batchOf = (numberOfCoupons: number, overrides: Body = {}) => ({ usageLimit: 1, validCharacters: ALNUM, couponPattern: 'N-######', numberOfCoupons, ...overrides });

    it('sends 2,500 created coupons as 3 pages of at most 1000 with one BatchID and the total', async () => {
      const where = await couponPlace();
      const at = `/created-${where.applicationId}/`;
      await subscribe(t.admin, rx, where.applicationId, at, ['CouponCreated']);
      const r = await t.admin.POST(COUPONS, { params: { path: where, query: { silent: 'yes' } }, body: batchOf(2500, { attributes: { wave: 1 } }) as never });
      expect(r.response.status).toBe(204);
      const pages = await expectNotifications(at, 3, 'CouponCreated');
      await sleep(200);
      expect(notificationsAt(rx, at)).toHaveLength(3);
      const listed = unwrap(await t.admin.GET(COUPONS, { params: { path: where, query: { pageSize: 1000 } } })) as Body;
      const all: Body[] = [];
      for (let skip = 0; skip < 2500; skip += 1000) all.push(...(unwrap(await t.admin.GET(COUPONS, { params: { path: where, query: { pageSize: 1000, skip } } })) as Body).data);
      expect(listed.totalResultSize).toBe(2500);
      const batchId = all[0]!.batchId as string;
      for (const p of pages) {
        expect(Object.keys(p.body).sort()).toEqual(['BatchID', 'EmployeeName', 'NotificationType', 'Operation', 'TypeOfChange', 'data', 'totalResultSize']);
        expect(p.body).toMatchObject({ NotificationType: 'CouponCreated', Operation: 'CouponCreated', TypeOfChange: 'management_api', EmployeeName: 'Admin', BatchID: batchId, totalResultSize: 2500 });
      }
      expect(pages.map((p) => p.body.data.length).sort()).toEqual([1000, 1000, 500]);
      const sent = pages.flatMap((p) => p.body.data as Body[]).sort((a, b) => a.id - b.id);
      // Every coupon exactly once, as the Management API lists it.
      expect(sent).toEqual(all.sort((a, b) => a.id - b.id));
      expect(new Set(pages.map((p) => p.id)).size).toBe(3);
    });

    it('sends CouponUpdated and CouponDeleted for one coupon, CouponsUpdated for a batch and CouponsDeleted for a delete by filter', async () => {
      const where = await couponPlace();
      const at = `/changed-${where.applicationId}/`;
      await subscribe(t.admin, rx, where.applicationId, at, ['CouponUpdated', 'CouponDeleted', 'CouponsUpdated', 'CouponsDeleted']);
      const made = unwrap(await t.admin.POST(COUPONS, { params: { path: where }, body: batchOf(5) as never })) as Body;
      const [one, two] = made.data as Body[];
      const batchId = one!.batchId as string;

      const updated = unwrap(
        await t.admin.PUT(COUPON, { params: { path: { ...where, couponId: String(one!.id) } }, body: { usageLimit: 7, attributes: { vip: true }, recipientIntegrationId: 'ada' } }),
      ) as Body;
      expect(updated).toMatchObject({ id: one!.id, value: one!.value, usageLimit: 7, attributes: { vip: true }, recipientIntegrationId: 'ada', batchId });
      const [u] = await expectNotifications(at, 1, 'CouponUpdated');
      expect(u!.body).toEqual({ NotificationType: 'CouponUpdated', Operation: 'CouponUpdated', TypeOfChange: 'management_api', EmployeeName: 'Admin', totalResultSize: 1, data: [updated] });

      expect((await t.admin.DELETE(COUPON, { params: { path: { ...where, couponId: String(two!.id) } } })).response.status).toBe(204);
      const [d] = await expectNotifications(at, 1, 'CouponDeleted');
      expect(d!.body).toEqual({ NotificationType: 'CouponDeleted', Operation: 'CouponDeleted', TypeOfChange: 'management_api', EmployeeName: 'Admin', totalResultSize: 1, data: [two] });
      const again = await t.admin.DELETE(COUPON, { params: { path: { ...where, couponId: String(two!.id) } } });
      expect(again.response.status).toBe(404);
      expect(pointers(again.error as Err)).toEqual(['/couponId']);

      unwrap(await t.admin.PUT(COUPONS, { params: { path: where }, body: { batchID: batchId, usageLimit: 3 } }));
      const [bu] = await expectNotifications(at, 1, 'CouponsUpdated');
      expect(bu!.body).toEqual({
        NotificationType: 'CouponsUpdated',
        Operation: 'CouponsUpdated',
        TypeOfChange: 'management_api',
        EmployeeName: 'Admin',
        BatchID: batchId,
        ApplicationID: where.applicationId,
        CampaignID: where.campaignId,
      });

      // A delete that matches nothing changed nothing and notifies nothing.
      expect((await t.admin.DELETE(COUPONS, { params: { path: where, query: { batchId: 'no-such-batch' } } })).response.status).toBe(204);
      expect((await t.admin.DELETE(COUPONS, { params: { path: where, query: { batchId } } })).response.status).toBe(204);
      const [bd] = await expectNotifications(at, 1, 'CouponsDeleted');
      expect(bd!.body).toEqual({
        NotificationType: 'CouponsDeleted',
        Operation: 'CouponsDeleted',
        TypeOfChange: 'management_api',
        EmployeeName: 'Admin',
        BatchID: batchId,
        ApplicationID: where.applicationId,
        CampaignID: where.campaignId,
        TotalResultSize: 4,
      });
      await sleep(200);
      expect(notificationsAt(rx, at, 'CouponsDeleted')).toHaveLength(1);
    });

    it('refuses a bad single-coupon update on its pointer, and another campaign\'s coupon is not found', async () => {
      const where = await couponPlace();
      const other = await createCampaign(where.applicationId);
      const made = unwrap(await t.admin.POST(COUPONS, { params: { path: where }, body: batchOf(1) as never })) as Body;
      const couponId = String((made.data as Body[])[0]!.id);
      const bad = await t.admin.PUT(COUPON, { params: { path: { ...where, couponId } }, body: { usageLimit: -1 } });
      expect(bad.response.status).toBe(400);
      expect(pointers(bad.error as Err)).toEqual(['/usageLimit']);
      const dates = await t.admin.PUT(COUPON, { params: { path: { ...where, couponId } }, body: { startDate: '2030-01-02T00:00:00Z', expiryDate: '2030-01-01T00:00:00Z' } });
      expect(dates.response.status).toBe(400);
      expect(pointers(dates.error as Err)).toEqual(['/expiryDate']);
      for (const path of [{ ...where, campaignId: other.id as number, couponId }, { ...where, couponId: 'abc' }, { ...where, couponId: '99999999' }]) {
        const r = await t.admin.PUT(COUPON, { params: { path }, body: { usageLimit: 2 } });
        expect(r.response.status).toBe(404);
        expect(pointers(r.error as Err)).toEqual(['/couponId']);
      }
      const reader = await userWithScopes(t, { [String(where.applicationId)]: 'read' });
      expect((await reader.PUT(COUPON, { params: { path: { ...where, couponId } }, body: { usageLimit: 2 } })).response.status).toBe(403);
      expect((await reader.DELETE(COUPON, { params: { path: { ...where, couponId } } })).response.status).toBe(403);
      const stranger = await strangerAdmin(t);
      expect((await stranger.DELETE(COUPON, { params: { path: { ...where, couponId } } })).response.status).toBe(404);
    });

    it('sends CouponCreated from the rule engine for coupons made final by a close, an event and a profile update', async () => {
      const applicationId = await newApp();
      const at = `/rule-engine-${applicationId}/`;
      await subscribe(t.admin, rx, applicationId, at, ['CouponCreated']);
      unwrap(await t.admin.POST('/v1/attributes', { body: { entity: 'Event', eventType: 'signup', name: 'source', title: 'Source', type: 'string' } as never }));
      const campaign = await createCampaign(applicationId, { features: ['coupons'], couponSettings: { validCharacters: ALNUM, couponPattern: 'RE-#####' } });
      unwrap(
        await t.admin.POST(RULESETS, {
          params: { path: { applicationId, campaignId: campaign.id } },
          body: { rules: [rule(true, [['createCoupon', { usageLimit: 1 }]], 'reward')], bindings: [], activate: true } as never,
        }),
      );
      const key = unwrap(await t.admin.POST('/v1/applications/{applicationId}/api_keys', { params: { path: { applicationId } }, body: { title: 'k', expires: new Date(Date.now() + 3600_000).toISOString() } }));
      const shop = createIntegrationClient({ baseUrl: t.url, apiKey: key.key, retries: 0 });
      const session = (id: string, customerSession: Body) =>
        shop.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: id } }, body: { customerSession } as never });

      // An open session shows the coupon; nothing is final, nothing is sent.
      unwrap(await session('re-1', cart([10], { profileId: 're-ada' })));
      await sleep(300);
      expect(notificationsAt(rx, at)).toEqual([]);
      const closed = unwrap(await session('re-1', { state: 'closed' })) as Body;
      expect(closed.createdCoupons).toHaveLength(1);
      const [byClose] = await expectNotifications(at, 1, 'CouponCreated');
      const stored = async (value: string) =>
        (unwrap(await t.admin.GET(COUPONS, { params: { path: { applicationId, campaignId: campaign.id }, query: { value, exactMatch: true } } })) as Body).data;
      expect(byClose!.body).toEqual({
        NotificationType: 'CouponCreated',
        Operation: 'CouponCreated',
        TypeOfChange: 'rule_engine',
        EmployeeName: '',
        totalResultSize: 1,
        data: await stored(closed.createdCoupons[0].value),
      });

      const event = unwrap(await shop.POST('/v2/events', { body: { profileId: 're-ada', type: 'signup', attributes: { source: 'web' } } as never })) as Body;
      expect(event.createdCoupons).toHaveLength(1);
      const profile = unwrap(
        await shop.PUT('/v2/customer_profiles/{integrationId}', { params: { path: { integrationId: 're-bob' }, query: { runRuleEngine: true } }, body: { attributes: {} } as never }),
      ) as Body;
      expect(profile.createdCoupons).toHaveLength(1);
      const all = await expectNotifications(at, 3, 'CouponCreated');
      const values = all.map((n) => n.body.data[0].value).sort();
      expect(values).toEqual([closed.createdCoupons[0].value, event.createdCoupons[0].value, profile.createdCoupons[0].value].sort());
      for (const n of all) expect(n.body).toMatchObject({ TypeOfChange: 'rule_engine', EmployeeName: '', totalResultSize: 1 });
      expect(all.map((n) => n.body.data[0].value).find((v) => v === profile.createdCoupons[0].value)).toBeDefined();
      const fromProfile = all.find((n) => n.body.data[0].value === profile.createdCoupons[0].value)!;
      expect(fromProfile.body.data).toEqual(await stored(profile.createdCoupons[0].value));
      // A dry close sends nothing.
      unwrap(await session('re-2', cart([10], { profileId: 're-cy' })));
      unwrap(await shop.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 're-2' }, query: { dry: true } }, body: { customerSession: { state: 'closed' } } as never }));
      await sleep(300);
      expect(notificationsAt(rx, at)).toHaveLength(3);
    });

    it('sends nothing for types nobody subscribed to or to disabled webhooks, and a commit learns of a new subscription', async () => {
      const applicationId = await newApp();
      const campaign = await createCampaign(applicationId, { couponSettings: { validCharacters: ALNUM, couponPattern: 'UN-#####' } });
      const only = await subscribe(t.admin, rx, applicationId, `/only-${applicationId}/`, ['CouponsUpdated']);
      const off = await subscribe(t.admin, rx, applicationId, `/off-${applicationId}/`, [
        'CampaignNotification',
        'CampaignEvaluationTreeChanged',
        'CouponCreated',
        'CouponsUpdated',
        'CouponsDeleted',
      ], { enabled: false });
      unwrap(
        await t.admin.POST(RULESETS, {
          params: { path: { applicationId, campaignId: campaign.id } },
          body: { rules: [rule(true, [['createCoupon', { usageLimit: 1 }]], 'reward')], bindings: [], activate: true } as never,
        }),
      );
      const key = unwrap(await t.admin.POST('/v1/applications/{applicationId}/api_keys', { params: { path: { applicationId } }, body: { title: 'k', expires: new Date(Date.now() + 3600_000).toISOString() } }));
      const shop = createIntegrationClient({ baseUrl: t.url, apiKey: key.key, retries: 0 });
      const close = async (id: string) =>
        (unwrap(await shop.PUT('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: id } }, body: { customerSession: cart([5], { state: 'closed' }) } as never })) as Body)
          .createdCoupons as Body[];
      const where = { applicationId, campaignId: campaign.id as number };

      expect(await close('un-1')).toHaveLength(1);
      const made = unwrap(await t.admin.POST(COUPONS, { params: { path: where }, body: batchOf(3) as never })) as Body;
      await createCampaign(applicationId, { name: 'Another' });
      unwrap(await t.admin.PUT(COUPONS, { params: { path: where }, body: { batchID: (made.data as Body[])[0]!.batchId, usageLimit: 2 } }));
      const [updated] = await expectNotifications(`/only-${applicationId}/`, 1, 'CouponsUpdated');
      expect(updated!.body.BatchID).toBe((made.data as Body[])[0]!.batchId);
      await sleep(300);
      expect(notificationsAt(rx, `/only-${applicationId}/`)).toHaveLength(1);
      expect(rx.to(`/off-${applicationId}/`)).toEqual([]);
      // Nothing was even written for the disabled webhook or the unsubscribed types.
      expect(await outboxRows(applicationId)).toBe(1);
      const [forOff] = await t.node.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM outbox WHERE kind = 'notification' AND endpoint_id = $1`, [off.id]);
      expect(forOff!.n).toBe(0);

      // Subscribing to CouponCreated reaches the rule engine's next commit (the snapshot is dropped).
      unwrap(
        await t.admin.PUT(NW_ONE, {
          params: { path: { applicationId, notificationWebhookId: only.id } },
          body: { url: `${rx.url}/only-${applicationId}/`, headers: [], notificationTypes: ['CouponsUpdated', 'CouponCreated'] },
        }),
      );
      const [coupon] = await close('un-2');
      const [created] = await expectNotifications(`/only-${applicationId}/`, 1, 'CouponCreated');
      expect(created!.body).toMatchObject({ TypeOfChange: 'rule_engine', totalResultSize: 1, data: [{ value: coupon!.value }] });
      // And disabling the webhook reaches it too.
      unwrap(
        await t.admin.PUT(NW_ONE, {
          params: { path: { applicationId, notificationWebhookId: only.id } },
          body: { url: `${rx.url}/only-${applicationId}/`, headers: [], notificationTypes: ['CouponsUpdated', 'CouponCreated'], enabled: false },
        }),
      );
      expect(await close('un-3')).toHaveLength(1);
      await sleep(300);
      expect(notificationsAt(rx, `/only-${applicationId}/`, 'CouponCreated')).toHaveLength(1);
      expect(await outboxRows(applicationId, 'CouponCreated')).toBe(1);
    });

    it('signs notifications with the webhook secret, keeps it when a replacement leaves it out and stops when it is emptied', async () => {
      const where = await couponPlace();
      const at = `/signed-${where.applicationId}/`;
      const w = await subscribe(t.admin, rx, where.applicationId, at, ['CouponsUpdated'], { secret: 'shh', headers: ['X-Api-Key: k1'] });
      const made = unwrap(await t.admin.POST(COUPONS, { params: { path: where }, body: batchOf(1) as never })) as Body;
      const batchID = (made.data as Body[])[0]!.batchId as string;
      const update = () => t.admin.PUT(COUPONS, { params: { path: where }, body: { batchID, usageLimit: 4 } });
      const replace = (extra: Body) =>
        t.admin.PUT(NW_ONE, { params: { path: { ...where, notificationWebhookId: w.id } }, body: { url: `${rx.url}${at}`, headers: ['X-Api-Key: k1'], notificationTypes: ['CouponsUpdated'], ...extra } });
      const hmac = (key: string, body: string) => `sha256=${createHmac('sha256', key).update(body).digest('hex')}`;

      unwrap(await update());
      const [first] = await expectNotifications(at, 1);
      expect(first!.headers['x-signature']).toBe(hmac('shh', first!.raw));
      expect(first!.headers['x-notification-type']).toBe('CouponsUpdated');
      expect(first!.headers['x-notification-id']).toMatch(/^[0-9a-f-]{36}$/);
      expect(first!.headers['x-api-key']).toBe('k1');
      expect(first!.headers['content-type']).toBe('application/json');

      unwrap(await replace({}));
      unwrap(await update());
      const second = (await expectNotifications(at, 2))[1]!;
      expect(second.headers['x-signature']).toBe(hmac('shh', second.raw));

      unwrap(await replace({ secret: '' }));
      unwrap(await update());
      const third = (await expectNotifications(at, 3))[2]!;
      expect(third.headers['x-signature']).toBeUndefined();
      // Every attempt is a webhook log entry of the notification webhook, its header value and signature redacted.
      const [log] = await t.node.db.query<{ request: { headers: Record<string, string> }; status: number; kind: string }>(
        `SELECT request, status, kind FROM webhook_logs WHERE notification_id = $1::uuid`,
        [first!.id],
      );
      expect(log).toMatchObject({ status: 200, kind: 'notification', request: { headers: { 'X-Api-Key': '[redacted]', 'X-Signature': 'sha256=[redacted]' } } });
    });
  });

  describe('asynchronous coupon creation', () => {
    it('answers 202 at once, creates the coupons in chunks with readable progress, and sends one AsyncCouponsCreated', async () => {
      const applicationId = await newApp();
      const campaign = await createCampaign(applicationId);
      const where = { applicationId, campaignId: campaign.id as number };
      const at = `/async-${applicationId}/`;
      await subscribe(t.admin, rx, applicationId, at, ['AsyncCouponsCreated', 'CouponCreated']);
      const r = await t.admin.POST(ASYNC, { params: { path: where }, body: { usageLimit: 2, validCharacters: ALNUM, couponPattern: 'AS-######', numberOfCoupons: 2345, attributes: { wave: 'a' } } });
      expect(r.response.status).toBe(202);
      const job = r.data as Body;
      expect(job).toEqual({
        batchId: expect.any(String),
        applicationId,
        campaignId: campaign.id,
        state: 'pending',
        numberOfCoupons: 2345,
        createdCoupons: 0,
        created: expect.any(String),
        updated: job.created,
      });
      const done = await eventually(async () => {
        const j = unwrap(await t.admin.GET(JOB, { params: { path: { ...where, batchId: job.batchId } } })) as Body;
        return j.state === 'done' ? j : undefined;
      }, 30_000);
      expect(done).toMatchObject({ batchId: job.batchId, state: 'done', numberOfCoupons: 2345, createdCoupons: 2345, finishedAt: expect.any(String) });
      const [n] = await expectNotifications(at, 1, 'AsyncCouponsCreated');
      expect(n!.body).toEqual({
        NotificationType: 'AsyncCouponsCreated',
        Operation: 'AsyncCouponsCreated',
        TypeOfChange: 'management_api',
        EmployeeName: 'Admin',
        BatchID: job.batchId,
        ApplicationID: applicationId,
        CampaignID: campaign.id,
        TotalResultSize: 2345,
      });
      const listed = unwrap(await t.admin.GET(COUPONS, { params: { path: where, query: { batchId: job.batchId, pageSize: 1000 } } })) as Body;
      expect(listed.totalResultSize).toBe(2345);
      expect(listed.data[0]).toMatchObject({ usageLimit: 2, attributes: { wave: 'a' }, batchId: job.batchId, created: job.created });
      expect(listed.data.every((c: Body) => /^AS-[A-Z0-9]{6}$/.test(c.value))).toBe(true);
      // One notification for the whole batch, not its coupons page by page.
      await sleep(300);
      expect(notificationsAt(rx, at)).toHaveLength(1);
    });

    it('ends a job failed, without a notification, when the pattern runs out of free codes', async () => {
      const applicationId = await newApp();
      const campaign = await createCampaign(applicationId);
      const where = { applicationId, campaignId: campaign.id as number };
      const at = `/async-failed-${applicationId}/`;
      await subscribe(t.admin, rx, applicationId, at, ['AsyncCouponsCreated']);
      // Ten codes in the pattern, six of them taken: ten more cannot be made.
      const pattern = { usageLimit: 1, validCharacters: [...'0123456789'], couponPattern: 'FULL-#' };
      unwrap(await t.admin.POST(COUPONS, { params: { path: where }, body: { ...pattern, numberOfCoupons: 6 } }));
      const job = unwrap(await t.admin.POST(ASYNC, { params: { path: where }, body: { ...pattern, numberOfCoupons: 10 } })) as Body;
      const failed = await eventually(async () => {
        const j = unwrap(await t.admin.GET(JOB, { params: { path: { ...where, batchId: job.batchId } } })) as Body;
        return j.state === 'failed' ? j : undefined;
      }, 10_000);
      expect(failed).toMatchObject({ state: 'failed', numberOfCoupons: 10, createdCoupons: 0, error: expect.stringContaining('no free codes'), finishedAt: expect.any(String) });
      expect((unwrap(await t.admin.GET(COUPONS, { params: { path: where } })) as Body).totalResultSize).toBe(6);
      await sleep(300);
      expect(rx.to(at)).toEqual([]);
    });

    it('refuses bad input on its pointer, lets readers follow a job but not start one, and hides jobs from other accounts', async () => {
      const applicationId = await newApp();
      const campaign = await createCampaign(applicationId);
      const where = { applicationId, campaignId: campaign.id as number };
      const good = { usageLimit: 1, validCharacters: ALNUM, couponPattern: 'B-######', numberOfCoupons: 10 };
      const cases: Array<[Body, string]> = [
        [{ ...good, numberOfCoupons: 5_000_001 }, '/numberOfCoupons'],
        [{ ...good, numberOfCoupons: 0 }, '/numberOfCoupons'],
        [{ ...good, couponPattern: 'B-#', validCharacters: ['A', 'B'] }, '/couponPattern'],
        [{ ...good, validCharacters: [] }, '/validCharacters'],
        [{ ...good, startDate: '2030-01-02T00:00:00Z', expiryDate: '2030-01-01T00:00:00Z' }, '/expiryDate'],
      ];
      for (const [body, pointer] of cases) {
        const r = await t.admin.POST(ASYNC, { params: { path: where }, body: body as never });
        expect(r.response.status, JSON.stringify(body)).toBe(400);
        expect((r.error as Body).StatusCode).toBe(400);
        expect(pointers(r.error as Err)).toContain(pointer);
      }
      const [jobs] = await t.node.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM coupon_jobs WHERE application_id = $1`, [applicationId]);
      expect(jobs!.n).toBe(0);
      const missing = await t.admin.GET(JOB, { params: { path: { ...where, batchId: 'nope' } } });
      expect(missing.response.status).toBe(404);
      expect(pointers(missing.error as Err)).toEqual(['/batchId']);

      const job = unwrap(await t.admin.POST(ASYNC, { params: { path: where }, body: good })) as Body;
      const reader = await userWithScopes(t, { [String(applicationId)]: 'read' });
      expect((await reader.POST(ASYNC, { params: { path: where }, body: good })).response.status).toBe(403);
      expect((unwrap(await reader.GET(JOB, { params: { path: { ...where, batchId: job.batchId } } })) as Body).batchId).toBe(job.batchId);
      const stranger = await strangerAdmin(t);
      expect((await stranger.GET(JOB, { params: { path: { ...where, batchId: job.batchId } } })).response.status).toBe(404);
      expect((await stranger.POST(ASYNC, { params: { path: where }, body: good })).response.status).toBe(404);
      expect((await anonymousClient(t).POST(ASYNC, { params: { path: where }, body: good })).response.status).toBe(401);
    });
  });
});
