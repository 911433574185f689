// Storage: one Db interface with two adapters (postgres.js against a server, PGlite embedded),
// numbered SQL migrations applied at start, and the repositories the use cases call.
import type { Db, DbOptions } from './db.js';
import { createPgliteDb } from './pglite-adapter.js';
import { createPostgresDb } from './postgres-adapter.js';

export type { Db, DbOptions, Queryable, Row } from './db.js';
export { createPgliteDb } from './pglite-adapter.js';
export { createPostgresDb } from './postgres-adapter.js';
export { migrate, loadMigrations, type Migration } from './migrate.js';
export { ROWS_MARK } from './recordset.js';
export { againOnConflict, isConflictAbort, isUniqueViolation } from './conflicts.js';

/** Postgres when a URL is given, embedded PGlite otherwise. */
export function openDb(options: DbOptions): Promise<Db> {
  return options.databaseUrl ? createPostgresDb(options.databaseUrl, options) : createPgliteDb(options);
}
export {
  foldCampaignStats,
  STATS_DELTA_COLUMNS,
  statsDeltaJson,
  statsDeltaRows,
  statsDeltaSelect,
  statsDeltaSumSelect,
  type CampaignStatsDelta,
} from './campaign-stats.js';
export { couponView, normalizeCode, referralView } from './coupons.js';
export {
  addDuration,
  balancesOf,
  balancesOfOwners,
  EMPTY_BALANCES,
  grantPoints,
  isDuration,
  keyParams,
  ledgerObject,
  ledgerObjects,
  ledgerObjectsOf,
  lockLedger,
  ledgerWhere,
  netOfDebt,
  ownerColumn,
  payDebts,
  roundPoints,
  settleExpired,
  settleLedger,
  spendPoints,
  tierOf,
  type Balances,
  type Grant,
  type LedgerKey,
  type LedgerOwner,
  type Spend,
  type Tentative,
  type Tier,
} from './loyalty-ledger.js';
export { enqueueNotifications, enqueueOutbound, queueMail, type NotificationBatch, type OutboundRequest, type QueuedMail } from './outbox.js';
export {
  COUPON_PAGE_SIZE,
  couponNotificationBody,
  couponNotificationPages,
  enqueueCouponBatchCreated,
  hasNotificationSubscribers,
  NOTIFICATION_TYPES,
  type CouponBatchNotification,
  type CouponChangeSource,
  type CouponNotificationMeta,
  type NotificationType,
} from './notifications.js';
export { LeasedJobRunner, type JobStep, type LeasedJobRunnerOptions } from './jobs.js';
export {
  checkTier,
  enqueueProgramNotifications,
  LOYALTY_NOTIFICATION_TYPES,
  loyaltySubscriptions,
  notifyExpiringPoints,
  notifyPointsChanges,
  pointsChangedBody,
  subscribedLoyaltyTypesSql,
  subscribes,
  type LedgerOwnerNames,
  type LoyaltyNotificationType,
  type LoyaltySubscriptions,
  type PointsChange,
} from './loyalty-notifications.js';
export { queueStrikethroughJobs, type StrikethroughChange } from './strikethrough.js';
