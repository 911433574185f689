// Notifications that more than one module writes (service-spec "Outbound notifications"): the
// closed list of notification types that notification webhooks subscribe to, and the coupon
// notifications, which the Management API and the rule engine both cause. Each is written to the
// outbox in the transaction of its change (enqueueNotifications) and only for subscribers.
import { couponView } from './coupons.js';
import type { Queryable } from './db.js';
import { LOYALTY_NOTIFICATION_TYPES } from './loyalty-notifications.js';
import { enqueueNotifications } from './outbox.js';

export const NOTIFICATION_TYPES = [
  'CampaignNotification',
  'CampaignEvaluationTreeChanged',
  'CouponCreated',
  'CouponUpdated',
  'CouponDeleted',
  'AsyncCouponsCreated',
  'CouponsUpdated',
  'CouponsDeleted',
  'StrikethroughPrice',
  ...LOYALTY_NOTIFICATION_TYPES,
] as const;
export type NotificationType = (typeof NOTIFICATION_TYPES)[number];

/** Addendum: a coupon notification carries at most this many coupons; more go in pages of it. */
export const COUPON_PAGE_SIZE = 1000;

/** Who changed the coupons (spec `TypeOfChange`). */
export type CouponChangeSource = 'campaign_manager' | 'management_api' | 'rule_engine';

export interface CouponNotificationMeta {
  notificationType: 'CouponCreated' | 'CouponUpdated' | 'CouponDeleted';
  typeOfChange: CouponChangeSource;
  /** The user's name for the Management API; blank for the rule engine. */
  employeeName: string;
  /** The batch of created coupons, the same in every page. */
  batchId?: string | undefined;
}

/** One notification of created, updated or deleted coupons: `data` one page, `totalResultSize` all of them. */
export function couponNotificationBody(meta: CouponNotificationMeta, page: readonly unknown[], total: number): Record<string, unknown> {
  return {
    NotificationType: meta.notificationType,
    Operation: meta.notificationType,
    TypeOfChange: meta.typeOfChange,
    EmployeeName: meta.employeeName,
    ...(meta.batchId ? { BatchID: meta.batchId } : {}),
    totalResultSize: total,
    data: page,
  };
}

/** Coupons held in memory (as couponView shows them) as notification bodies of at most COUPON_PAGE_SIZE each. */
export function couponNotificationPages(meta: CouponNotificationMeta, coupons: readonly unknown[]): Array<Record<string, unknown>> {
  const pages: Array<Record<string, unknown>> = [];
  for (let i = 0; i < coupons.length; i += COUPON_PAGE_SIZE) pages.push(couponNotificationBody(meta, coupons.slice(i, i + COUPON_PAGE_SIZE), coupons.length));
  return pages;
}

/**
 * Whether an enabled notification webhook of the Application subscribes to the type, read in the
 * caller's transaction: a notification whose body costs reads (a batch of coupons) is built only
 * then.
 */
export async function hasNotificationSubscribers(tx: Queryable, applicationId: number, type: NotificationType): Promise<boolean> {
  const rows = await tx.query(`SELECT 1 FROM notification_webhooks WHERE application_id = $1 AND enabled AND notification_types ? $2 LIMIT 1`, [
    applicationId,
    type,
  ]);
  return rows.length > 0;
}

export interface CouponBatchNotification {
  accountId: number;
  applicationId: number;
  campaignId: number;
  batchId: string;
  typeOfChange: CouponChangeSource;
  employeeName: string;
}

/**
 * CouponCreated for every coupon of a batch, in pages of COUPON_PAGE_SIZE (one body per page, each
 * with the batch id and the batch's size), read back page by page in the caller's transaction so
 * that a batch of 200,000 is never held whole. Returns the requests written (0 without
 * subscribers, and then nothing is read).
 */
export async function enqueueCouponBatchCreated(tx: Queryable, batch: CouponBatchNotification, now: Date): Promise<number> {
  if (!(await hasNotificationSubscribers(tx, batch.applicationId, 'CouponCreated'))) return 0;
  const ids = (
    await tx.query<{ id: string }>(`SELECT id::text FROM coupons WHERE application_id = $1 AND batch_id = $2 ORDER BY id`, [batch.applicationId, batch.batchId])
  ).map((r) => r.id);
  const meta: CouponNotificationMeta = { notificationType: 'CouponCreated', typeOfChange: batch.typeOfChange, employeeName: batch.employeeName, batchId: batch.batchId };
  let written = 0;
  for (let i = 0; i < ids.length; i += COUPON_PAGE_SIZE) {
    const rows = await tx.query(`SELECT * FROM coupons WHERE id = ANY($1::bigint[]) ORDER BY id`, [ids.slice(i, i + COUPON_PAGE_SIZE)]);
    written += await enqueueNotifications(
      tx,
      {
        accountId: batch.accountId,
        applicationId: batch.applicationId,
        campaignId: batch.campaignId,
        notificationType: 'CouponCreated',
        bodies: [couponNotificationBody(meta, rows.map(couponView), ids.length)],
      },
      now,
    );
  }
  return written;
}
