// The outboxes: what a use case wants sent (an HTTP request to a webhook, a mail) is written in the
// same transaction as the change that causes it, and sent by the dispatchers of services/notify
// once that change committed. Nothing is sent for a dry run or for work that rolled back, and
// nothing is lost when a node dies after the commit.
import { randomUUID } from 'node:crypto';
import type { Queryable } from './db.js';

/** One HTTP request to send, as the use case rendered it. */
export interface OutboundRequest {
  accountId: number;
  applicationId: number;
  /** `webhook`: a rule-triggered webhook; `notification`: a notification webhook (ext). */
  kind: 'webhook' | 'notification';
  /** The webhook's or notification webhook's id. */
  endpointId: number;
  campaignId?: number | undefined;
  /** The Integration API request that caused it (its access log `uuid`), when one did. */
  integrationRequestUuid?: string | undefined;
  /** For notifications: their NotificationType. */
  notificationType?: string | undefined;
  method: string;
  url: string;
  /** Header lines `Name: value`. */
  headers: readonly string[];
  body: string;
}

/**
 * Adds requests to the outbox; call it inside the transaction of the change that causes them.
 * Returns the notification id of each (X-Notification-Id, the same on every attempt).
 */
export async function enqueueOutbound(tx: Queryable, requests: readonly OutboundRequest[], now: Date): Promise<string[]> {
  if (requests.length === 0) return [];
  const rows = requests.map((r) => ({
    notification_id: randomUUID(),
    account_id: r.accountId,
    application_id: r.applicationId,
    kind: r.kind,
    endpoint_id: r.endpointId,
    campaign_id: r.campaignId ?? null,
    integration_request_uuid: r.integrationRequestUuid ?? '',
    notification_type: r.notificationType ?? '',
    method: r.method,
    url: r.url,
    headers: r.headers,
    body: r.body,
  }));
  await tx.query(
    `INSERT INTO outbox (notification_id, account_id, application_id, kind, endpoint_id, campaign_id, integration_request_uuid,
       notification_type, method, url, headers, body, created, next_attempt_at)
     SELECT notification_id, account_id, application_id, kind, endpoint_id, campaign_id, integration_request_uuid,
       notification_type, method, url, headers, body, $2, $2
       FROM json_to_recordset($1::json) AS x(notification_id uuid, account_id int, application_id int, kind text, endpoint_id int,
         campaign_id int, integration_request_uuid text, notification_type text, method text, url text, headers jsonb, body text)`,
    [JSON.stringify(rows), now.toISOString()],
  );
  return rows.map((r) => r.notification_id);
}

/** Notifications of one type about one Application: one body per notification. */
export interface NotificationBatch {
  accountId: number;
  applicationId: number;
  /** NotificationType, as the Application's notification webhooks subscribe to it. */
  notificationType: string;
  /** Each body, as sent (JSON). */
  bodies: readonly unknown[];
  campaignId?: number | undefined;
}

/**
 * Adds one request per body for every enabled notification webhook of the Application that
 * subscribes to the type, in one statement; call it inside the transaction of the change that
 * causes the notifications. Returns how many requests it wrote (0: nobody subscribes).
 */
export async function enqueueNotifications(tx: Queryable, batch: NotificationBatch, now: Date): Promise<number> {
  if (batch.bodies.length === 0) return 0;
  const rows = await tx.query<{ n: number }>(
    `WITH ins AS (
       INSERT INTO outbox (notification_id, account_id, application_id, kind, endpoint_id, campaign_id, notification_type, method, url, headers,
         body, created, next_attempt_at)
       SELECT gen_random_uuid(), $1, $2, 'notification', w.id, $4, $3, 'POST', w.url, w.headers, b.body::text, $6, $6
         FROM notification_webhooks w, json_array_elements($5::json) WITH ORDINALITY AS b(body, k)
        WHERE w.application_id = $2 AND w.enabled AND w.notification_types ? $3
        ORDER BY w.id, b.k
       RETURNING 1
     )
     SELECT count(*)::int AS n FROM ins`,
    [batch.accountId, batch.applicationId, batch.notificationType, batch.campaignId ?? null, JSON.stringify(batch.bodies), now.toISOString()],
  );
  return rows[0]?.n ?? 0;
}

/** A mail of the Management API (invites, password recovery). */
export interface QueuedMail {
  accountId: number;
  /** What caused it (`invite`, `password_reset`), for operators reading the outbox. */
  kind: string;
  to: string;
  subject: string;
  text: string;
}

/** Adds a mail to the mail outbox; call it inside the transaction of the change that causes it. */
export async function queueMail(tx: Queryable, mail: QueuedMail, now: Date): Promise<void> {
  await tx.query(
    `INSERT INTO mail_outbox (account_id, recipient, subject, body, kind, created, next_attempt_at) VALUES ($1, $2, $3, $4, $5, $6, $6)`,
    [mail.accountId, mail.to, mail.subject, mail.text, mail.kind, now.toISOString()],
  );
}
