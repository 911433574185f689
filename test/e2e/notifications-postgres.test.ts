import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unwrap } from '../../sdk/index.js';
import { newApplication, newCampaign } from '../helpers/fixtures.js';
import { startTestNode, type TestNode } from '../helpers/node.js';
import { subscribe, waitForNotifications } from '../helpers/notifications.js';
import { Receiver } from '../helpers/receiver.js';
import { postgresUp } from '../helpers/services.js';

/** Notifications of changes that race on a real PostgreSQL (PGlite runs one transaction at a time). */
describe.runIf(postgresUp)('notifications of racing changes (postgres)', () => {
  let t: TestNode;
  let rx: Receiver;

  beforeAll(async () => {
    rx = await Receiver.start();
    t = await startTestNode('postgres', { outbox: { pollMs: 50 } });
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
    await rx?.stop();
  });

  it('numbers the evaluation trees of campaigns created at once one after the other, each old tree the previous new one', async () => {
    const applicationId = unwrap(await t.admin.POST('/v1/applications', { body: newApplication() as never })).id;
    await subscribe(t.admin, rx, applicationId, '/race', ['CampaignEvaluationTreeChanged', 'CampaignNotification']);
    const created = await Promise.all(
      Array.from({ length: 10 }, async (_, i) =>
        unwrap(await t.admin.POST('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId } }, body: newCampaign({ name: `c${i}` }) as never })),
      ),
    );
    const trees = (await waitForNotifications(rx, '/race', 10, 'CampaignEvaluationTreeChanged')).map((n) => n.body.Data[0]);
    trees.sort((a, b) => a.evaluationTree.version - b.evaluationTree.version);
    expect(trees.map((d) => [d.oldEvaluationTree.version, d.evaluationTree.version])).toEqual(Array.from({ length: 10 }, (_, i) => [i + 1, i + 2]));
    for (let i = 1; i < trees.length; i++) expect(trees[i].oldEvaluationTree).toEqual(trees[i - 1].evaluationTree);
    // Each version adds exactly one campaign, and the last holds them all in list order.
    for (const d of trees) expect(d.evaluationTree.set.elements.length).toBe(d.oldEvaluationTree.set.elements.length + 1);
    const ids = created.map((c) => c.id).sort((a, b) => a - b);
    expect(trees[9].evaluationTree.set.elements.map((e: { campaignId: number }) => e.campaignId)).toEqual(ids);
    // Every campaign_created names the position its campaign has in the tree of its own version.
    const positions = (await waitForNotifications(rx, '/race', 10, 'CampaignNotification')).map((n) => n.body.Data[0]);
    for (const p of positions) {
      const tree = trees.find((d) => d.evaluationTree.set.elements.some((e: { campaignId: number }) => e.campaignId === p.campaign.id) && !d.oldEvaluationTree.set.elements.some((e: { campaignId: number }) => e.campaignId === p.campaign.id))!;
      expect(tree.evaluationTree.set.elements[p.evaluationPosition.position].campaignId).toBe(p.campaign.id);
    }
  });
});
