// Campaign notifications (service-spec "Outbound notifications"): CampaignNotification items for
// campaigns created, edited, changing state or active ruleset, and deleted; and
// CampaignEvaluationTreeChanged when the Application's evaluation tree changes. Each is written in
// the transaction of its change, for the Application's subscribed notification webhooks only.
//
// The evaluation tree of this engine: there are no evaluation groups, and campaigns are evaluated
// in list order (by id) under the Application's campaignPriority. The tree is therefore one set,
// `root`, whose elements are the campaigns that are not archived (archived campaigns are never
// evaluated; disabled ones and drafts keep their place), with the Application's priority as its
// evaluation mode: `stackable` for universal and stackable, and exclusiveCampaignsStrategy
// (`listOrder`, `lowestDiscount`, `highestDiscount`) for exclusive. It changes when a campaign is
// created, deleted, archived or unarchived, or the Application's priority changes; each change
// gives the Application's tree a new version.
import { notFound } from '../shared/index.js';
import { enqueueNotifications, queueStrikethroughJobs, type Queryable } from '../store/index.js';
import { iso } from './context.js';

export interface CampaignSetElement {
  type: 'CAMPAIGN';
  campaignId: number;
}

export interface CampaignSet {
  type: 'SET';
  name: string;
  operator: 'ALL';
  elements: CampaignSetElement[];
  groupId: number;
  description: string;
  evaluationMode: 'stackable' | 'listOrder' | 'lowestDiscount' | 'highestDiscount';
}

export interface EvaluationTree {
  id: number;
  created: string;
  applicationId: number;
  version: number;
  set: CampaignSet;
  updatedBy: string;
}

export interface TreeChange {
  oldTree: EvaluationTree;
  tree: EvaluationTree;
}

/** The Application a notification is about. */
export interface NotifiedApplication {
  accountId: number;
  applicationId: number;
}

const ROOT = { name: 'root', groupId: 0, description: 'The campaigns of the Application that are not archived, in evaluation (list) order' };

function setOf(priority: string, strategy: string, campaignIds: readonly number[]): CampaignSet {
  return {
    type: 'SET',
    name: ROOT.name,
    operator: 'ALL',
    elements: campaignIds.map((campaignId) => ({ type: 'CAMPAIGN', campaignId })),
    groupId: ROOT.groupId,
    description: ROOT.description,
    evaluationMode: priority === 'exclusive' ? (strategy as CampaignSet['evaluationMode']) : 'stackable',
  };
}

/** The set as the Application's rows make it now (in the caller's transaction). */
async function currentSet(tx: Queryable, applicationId: number): Promise<CampaignSet> {
  const [row] = await tx.query<{ campaign_priority: string; exclusive_campaigns_strategy: string; ids: number[] }>(
    `SELECT a.campaign_priority, a.exclusive_campaigns_strategy,
            (SELECT coalesce(json_agg(c.id ORDER BY c.id), '[]'::json) FROM campaigns c WHERE c.application_id = a.id AND c.state <> 'archived') AS ids
       FROM applications a WHERE a.id = $1`,
    [applicationId],
  );
  return setOf(row?.campaign_priority ?? 'universal', row?.exclusive_campaigns_strategy ?? 'listOrder', row?.ids ?? []);
}

function treeView(r: Record<string, unknown>): EvaluationTree {
  const stored = r.tree as CampaignSet;
  return {
    id: r.id as number,
    created: iso(r.created)!,
    applicationId: r.application_id as number,
    version: r.version as number,
    // Rebuilt rather than passed on: jsonb keeps its keys in its own order.
    set: { ...setOf('', '', stored.elements.map((e) => e.campaignId)), evaluationMode: stored.evaluationMode },
    updatedBy: r.updated_by as string,
  };
}

const sameSet = (a: CampaignSet, b: CampaignSet): boolean =>
  a.evaluationMode === b.evaluationMode && a.elements.length === b.elements.length && a.elements.every((e, i) => e.campaignId === b.elements[i]!.campaignId);

/**
 * The Application's tree, locked until the caller's transaction ends: call it before changing the
 * campaigns (or the priority), then advanceEvaluationTree after. An Application without a stored
 * tree gets one now, as its campaigns are before the change (version 1).
 */
export async function lockEvaluationTree(tx: Queryable, applicationId: number, now: Date): Promise<EvaluationTree> {
  const select = `SELECT * FROM campaign_evaluation_trees WHERE application_id = $1 FOR UPDATE`;
  const [row] = await tx.query(select, [applicationId]);
  if (row) return treeView(row);
  // A racing first change inserts too: this insert then waits for it and the select reads its tree.
  await tx.query(
    `INSERT INTO campaign_evaluation_trees (application_id, version, created, updated_by, tree)
     SELECT id, 1, $2, '', $3::jsonb FROM applications WHERE id = $1
     ON CONFLICT (application_id) DO NOTHING`,
    [applicationId, now.toISOString(), JSON.stringify(await currentSet(tx, applicationId))],
  );
  const [locked] = await tx.query(select, [applicationId]);
  // Deleted by a racing request since it was checked.
  if (!locked) throw notFound('Application', '/applicationId');
  return treeView(locked);
}

/** After the change: a new version of the tree when its set changed (undefined otherwise). */
export async function advanceEvaluationTree(tx: Queryable, before: EvaluationTree, by: string, now: Date): Promise<TreeChange | undefined> {
  const set = await currentSet(tx, before.applicationId);
  if (sameSet(set, before.set)) return undefined;
  const [row] = await tx.query(
    `UPDATE campaign_evaluation_trees SET version = version + 1, created = $2, updated_by = $3, tree = $4::jsonb WHERE id = $1 RETURNING *`,
    [before.id, now.toISOString(), by, JSON.stringify(set)],
  );
  return { oldTree: before, tree: treeView(row!) };
}

/** Where a campaign stands in a tree (spec `evaluationPosition`); `position` is null outside it (created archived). */
export function evaluationPosition(tree: EvaluationTree, campaignId: number): { groupId: number; groupName: string; position: number | null } {
  const i = tree.set.elements.findIndex((e) => e.campaignId === campaignId);
  return { groupId: tree.set.groupId, groupName: tree.set.name, position: i >= 0 ? i : null };
}

/** CampaignEvaluationTreeChanged for a change of the tree; returns the requests written. */
export function notifyEvaluationTreeChanged(tx: Queryable, app: NotifiedApplication, change: TreeChange | undefined, now: Date): Promise<number> {
  if (!change) return Promise.resolve(0);
  const item = { applicationId: app.applicationId, oldEvaluationTree: change.oldTree, evaluationTree: change.tree, event: 'campaign_evaluation_tree_changed' };
  return enqueueNotifications(
    tx,
    {
      accountId: app.accountId,
      applicationId: app.applicationId,
      notificationType: 'CampaignEvaluationTreeChanged',
      bodies: [{ TotalResultSize: 1, NotificationType: 'CampaignEvaluationTreeChanged', Data: [item] }],
    },
    now,
  );
}

type View = Record<string, unknown>;

/** One item of a CampaignNotification's `Data`, with the fields of its `Event`. */
export type CampaignEvent =
  | { Event: 'campaign_created'; campaign: View; ruleset: View | null; evaluationPosition: ReturnType<typeof evaluationPosition> }
  | { Event: 'campaign_state_changed'; campaign: View; ruleset: View | null; oldState: string; newState: string }
  | { Event: 'campaign_ruleset_changed'; campaign: View; oldRuleset: View | null; ruleset: View | null }
  | { Event: 'campaign_edited'; campaign: View; oldCampaign: View; ruleset: View | null }
  | { Event: 'campaign_deleted'; campaign: View; deletedAt: string };

/**
 * One CampaignNotification with the events of one change of one campaign (a PUT that edits the
 * campaign and changes its state gives both items in one notification); returns the requests
 * written. Every change of a campaign comes through here, so here it also queues the
 * re-evaluation of the Application's strikethrough prices (when it has a StrikethroughPrice
 * subscriber and catalogs); the node's runner starts on the change's configuration announcement.
 */
export async function notifyCampaign(tx: Queryable, app: NotifiedApplication, campaignId: number, events: readonly CampaignEvent[], now: Date): Promise<number> {
  if (events.length === 0) return 0;
  await queueStrikethroughJobs(tx, { type: 'campaign_change', accountId: app.accountId, applicationId: app.applicationId, campaignId }, now.toISOString());
  return enqueueNotifications(
    tx,
    {
      accountId: app.accountId,
      applicationId: app.applicationId,
      campaignId,
      notificationType: 'CampaignNotification',
      bodies: [{ TotalResultSize: events.length, NotificationType: 'CampaignNotification', Data: events }],
    },
    now,
  );
}
