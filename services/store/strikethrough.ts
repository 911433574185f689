// Strikethrough pricing jobs (addendum "Strikethrough notifications"): a change that can move the
// strikethrough prices of an Application's catalog items writes a job in its own transaction (so a
// job exists exactly when the change committed), for each Application that has a StrikethroughPrice
// subscriber and subscribes to a catalog. The nodes' StrikethroughJobRunners
// (services/integration/strikethrough.ts) evaluate the items in the background: nothing of it runs
// in the request that made the change.
import type { Queryable } from './db.js';

/** What moved the prices: a sync of a catalog (its synced items), or a change of a campaign (every item of the Application's catalogs). */
export type StrikethroughChange =
  | { type: 'catalog_sync'; catalogId: number; version: number }
  | { type: 'campaign_change'; accountId: number; applicationId: number; campaignId: number };

const SUBSCRIBED = (application: string) =>
  `EXISTS (SELECT 1 FROM notification_webhooks w WHERE w.application_id = ${application} AND w.enabled AND w.notification_types ? 'StrikethroughPrice')`;

/**
 * Queues the jobs of a change in the caller's transaction; returns how many. A sync queues one job
 * per subscribing Application when it set at least one priced item (a REMOVE queues none). A
 * campaign change whose Application already has a job of the same campaign waiting to start adds
 * none: that job reads the campaigns when it starts, after this change (the waiting job is locked
 * until this transaction ends, so a runner cannot start it in between).
 */
export async function queueStrikethroughJobs(tx: Queryable, change: StrikethroughChange, now: string): Promise<number> {
  if (change.type === 'catalog_sync') {
    const rows = await tx.query(
      `INSERT INTO strikethrough_jobs (account_id, application_id, event, catalog_id, version, created, updated, lease_until)
       SELECT c.account_id, ca.application_id, 'catalog_sync', c.id, $2, $3, $3, $3
         FROM catalogs c JOIN catalog_applications ca ON ca.catalog_id = c.id
        WHERE c.id = $1 AND ${SUBSCRIBED('ca.application_id')}
          AND EXISTS (SELECT 1 FROM catalog_items i WHERE i.catalog_id = c.id AND i.version = $2 AND i.price IS NOT NULL)
        ORDER BY ca.application_id
       RETURNING id`,
      [change.catalogId, change.version, now],
    );
    return rows.length;
  }
  const rows = await tx.query(
    `WITH waiting AS (
       SELECT id FROM strikethrough_jobs
        WHERE application_id = $2 AND event = 'campaign_change' AND campaign_id = $3 AND state = 'pending'
        LIMIT 1 FOR UPDATE
     )
     INSERT INTO strikethrough_jobs (account_id, application_id, event, campaign_id, created, updated, lease_until)
     SELECT $1, $2, 'campaign_change', $3, $4, $4, $4
      WHERE ${SUBSCRIBED('$2')}
        AND EXISTS (SELECT 1 FROM catalog_applications WHERE application_id = $2)
        AND NOT EXISTS (SELECT 1 FROM waiting)
     RETURNING id`,
    [change.accountId, change.applicationId, change.campaignId, now],
  );
  return rows.length;
}
