// The IntegrationPort is what the edge (REST) and the gRPC layer call. The node entry hands them
// the cluster router, which implements it by calling the local actors or the owner node.

/** The Application an Integration API key resolved to. */
export interface AppRef {
  applicationId: number;
  accountId: number;
}

export type JsonObject = Record<string, unknown>;

/** Which shape the caller wants back: the v2 integration state or the legacy v1 response. */
export type ApiVersion = 'v1' | 'v2';

export interface UpdateSessionCall {
  app: AppRef;
  customerSessionId: string;
  /** IntegrationRequest as received (validated by the caller); v1 bodies are mapped to it first. */
  request: JsonObject;
  dry: boolean;
  /** RFC 3339, dry runs only. */
  now?: string | undefined;
  idempotencyKey?: string | undefined;
  version?: ApiVersion;
  /** The access log `uuid` of the request (webhook logs name it as integrationRequestUuid). */
  requestUuid?: string | undefined;
}

export interface GetSessionCall {
  app: AppRef;
  customerSessionId: string;
}

export interface ReturnSessionCall {
  app: AppRef;
  customerSessionId: string;
  /** ReturnIntegrationRequest as received. */
  request: JsonObject;
  dry: boolean;
  runRuleEngine: boolean;
  idempotencyKey?: string | undefined;
}

export interface ReopenSessionCall {
  app: AppRef;
  customerSessionId: string;
  idempotencyKey?: string | undefined;
}

export interface UpdateProfileCall {
  app: AppRef;
  integrationId: string;
  request: JsonObject;
  runRuleEngine: boolean;
  dry: boolean;
  idempotencyKey?: string | undefined;
  version?: ApiVersion;
  /** The access log `uuid` of the request (webhook logs name it as integrationRequestUuid). */
  requestUuid?: string | undefined;
}

export interface TrackEventCall {
  app: AppRef;
  /** The event's profile ('' for an anonymous session). */
  profileId: string;
  request: JsonObject;
  dry: boolean;
  idempotencyKey?: string | undefined;
  version?: ApiVersion;
  /** The access log `uuid` of the request (webhook logs name it as integrationRequestUuid). */
  requestUuid?: string | undefined;
}

export interface DeleteCustomerDataCall {
  app: AppRef;
  integrationId: string;
}

export interface CreateReferralCall {
  app: AppRef;
  /** One referral (`/v1/referrals`) or several advocates (`/v1/referrals_for_multiple_advocates`). */
  request: JsonObject;
  advocateProfileIntegrationId: string;
}

// Issue 6, area J: a profile's loyalty balances.
export interface LoyaltyBalancesCall {
  app: AppRef;
  programId: number;
  integrationId: string;
  endDate?: string;
  subledgerId?: string;
}

// Issue 6, area G: coupon reservations and the customer inventory.
export interface CouponReservationCall {
  app: AppRef;
  /** As in the path; matched under the Application's caseSensitivity. */
  couponValue: string;
  integrationIDs: string[];
}

export interface CouponReservationHoldersCall {
  app: AppRef;
  couponValue: string;
}

export interface CustomerInventoryCall {
  app: AppRef;
  integrationId: string;
  profile: boolean;
  referrals: boolean;
  coupons: boolean;
  loyalty: boolean;
  achievements: boolean;
}

// Issue 6, area K: the two customer achievement reads.
export interface CustomerAchievementsCall {
  app: AppRef;
  integrationId: string;
  campaignIds?: string | undefined;
  achievementIds?: string | undefined;
  achievementStatus?: string | undefined;
  currentProgressStatus?: string | undefined;
  pageSize?: number | undefined;
  skip?: number | undefined;
}

export interface CustomerAchievementHistoryCall {
  app: AppRef;
  integrationId: string;
  achievementId: number;
  progressStatus?: string | undefined;
  startDate?: string | undefined;
  endDate?: string | undefined;
  pageSize?: number | undefined;
  skip?: number | undefined;
}

/** A short stable digest (FNV-1a, 32 bits) for actor keys. */
function digest(s: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(36);
}

/** An audience call (issue 6): the audience in the path, if any, and the body as received. */
export interface AudienceCall {
  app: AppRef;
  audienceId?: number | undefined;
  request: JsonObject;
  /** Made by the edge for each call: the call's own actor key. */
  callId: string;
  idempotencyKey?: string | undefined;
}

/** A catalog call (issue 6): the catalog in the path (sync), the body as received. */
export interface CatalogSyncCall {
  app: AppRef;
  catalogId: number;
  request: JsonObject;
  /** Made by the edge for each call: the call's own actor key. */
  callId: string;
}
export interface BestPriorPriceCall {
  app: AppRef;
  request: JsonObject;
  callId: string;
}

/** Every operation by name with its call, as it crosses the wire between nodes. */
export interface PortCalls {
  updateSession: UpdateSessionCall;
  getSession: GetSessionCall;
  returnSession: ReturnSessionCall;
  reopenSession: ReopenSessionCall;
  updateProfile: UpdateProfileCall;
  trackEvent: TrackEventCall;
  deleteCustomerData: DeleteCustomerDataCall;
  createReferral: CreateReferralCall;
  // ---- calls G: coupon reservations and customer inventory (issue 6; keep this marker) ----
  createCouponReservation: CouponReservationCall;
  deleteCouponReservation: CouponReservationCall;
  listCouponReservationHolders: CouponReservationHoldersCall;
  customerInventory: CustomerInventoryCall;
  // ---- calls I: catalogs and pricing (issue 6; keep this marker) ----
  syncCatalog: CatalogSyncCall;
  bestPriorPrice: BestPriorPriceCall;
  // ---- calls J: loyalty in sessions, cards, balances and the scheduler (issue 6; keep this marker) ----
  loyaltyBalances: LoyaltyBalancesCall;
  // ---- calls K: achievements (issue 6; keep this marker) ----
  customerAchievements: CustomerAchievementsCall;
  customerAchievementHistory: CustomerAchievementHistoryCall;
  // ---- calls H: audiences (issue 6; keep this marker) ----
  createAudience: AudienceCall;
  updateAudience: AudienceCall;
  deleteAudience: AudienceCall;
  deleteAudienceMemberships: AudienceCall;
  updateAudienceMembers: AudienceCall;
  updateAudienceMembersAttributes: AudienceCall;
}
export type PortOperation = keyof PortCalls;

export const PORT_OPERATIONS: readonly PortOperation[] = [
  'updateSession',
  'getSession',
  'returnSession',
  'reopenSession',
  'updateProfile',
  'trackEvent',
  'deleteCustomerData',
  'createReferral',
  // ---- operations G: coupon reservations and customer inventory (issue 6; keep this marker) ----
  'createCouponReservation',
  'deleteCouponReservation',
  'listCouponReservationHolders',
  'customerInventory',
  // ---- operations I: catalogs and pricing (issue 6; keep this marker) ----
  'syncCatalog',
  'bestPriorPrice',
  // ---- operations J: loyalty in sessions, cards, balances and the scheduler (issue 6; keep this marker) ----
  'loyaltyBalances',
  // ---- operations K: achievements (issue 6; keep this marker) ----
  'customerAchievements',
  'customerAchievementHistory',
  // ---- operations H: audiences (issue 6; keep this marker) ----
  'createAudience',
  'updateAudience',
  'deleteAudience',
  'deleteAudienceMemberships',
  'updateAudienceMembers',
  'updateAudienceMembersAttributes',
];

export interface PortResult<T> {
  value: T;
  /** The node whose actor processed the call. */
  servedBy: string;
}

export interface IntegrationPort {
  invoke<O extends PortOperation>(operation: O, call: PortCalls[O]): Promise<PortResult<JsonObject>>;
}

/** Reads run beside the writes of their key instead of queueing behind them. */
export const READ_OPERATIONS: ReadonlySet<PortOperation> = new Set([
  'getSession',
  'listCouponReservationHolders',
  'customerInventory',
  // Issue 6, area K.
  'customerAchievements',
  'customerAchievementHistory',
  // Issue 6, area J.
  'loyaltyBalances',
]);

/**
 * The actor key (and so the shard key) of a call: the session for session calls, the profile for
 * profile, event and referral calls. Profiles belong to the account, so their keys do too; an
 * anonymous event has no profile and runs in its session's actor.
 */
export function actorKeyOf<O extends PortOperation>(operation: O, payload: PortCalls[O]): string {
  switch (operation) {
    // ---- keys G: coupon reservations and customer inventory (issue 6; keep this marker) ----
    // Reservation changes are serialised by the coupon's row lock in their transaction
    // (reservations.ts), which holds across nodes and between values differing only in case. An
    // actor per coupon would refuse the fourth parallel request with 409 (the mailbox bound), so
    // the key is the coupon with the request's IDs: a retried request queues behind its first
    // try, different requests on one coupon wait for the lock instead of being refused.
    case 'createCouponReservation':
    case 'deleteCouponReservation': {
      const p = payload as CouponReservationCall;
      const ids = Array.isArray(p.integrationIDs) ? [...p.integrationIDs].map(String).sort() : [];
      return `c:${p.app.applicationId}:${p.couponValue}:${digest(ids.join('\u0000'))}`;
    }
    case 'listCouponReservationHolders': {
      const p = payload as CouponReservationHoldersCall;
      return `c:${p.app.applicationId}:${p.couponValue}`;
    }
    // The inventory reads a profile: its actor, without queueing (READ_OPERATIONS).
    case 'customerInventory': {
      const p = payload as CustomerInventoryCall;
      return `p:${p.app.accountId}:${p.integrationId}`;
    }
    // ---- keys I: catalogs and pricing (issue 6; keep this marker) ----
    // A sync is ordered by its catalog's row lock (services/integration/catalogs.ts), which holds
    // across nodes; each call is its own actor so parallel syncs wait for the lock, not a mailbox.
    case 'syncCatalog': {
      const p = payload as CatalogSyncCall;
      return `cat:${p.app.accountId}:${p.callId}`;
    }
    case 'bestPriorPrice': {
      const p = payload as BestPriorPriceCall;
      return `cat:${p.app.accountId}:${p.callId}`;
    }
    // ---- keys J: loyalty in sessions, cards, balances and the scheduler (issue 6; keep this marker) ----
    // Balances read a profile's ledger: its actor, without queueing (READ_OPERATIONS).
    case 'loyaltyBalances': {
      const p = payload as LoyaltyBalancesCall;
      return `p:${p.app.accountId}:${p.integrationId}`;
    }
    // ---- keys K: achievements (issue 6; keep this marker) ----
    // Achievement reads read a profile: its actor, without queueing (READ_OPERATIONS).
    case 'customerAchievements':
    case 'customerAchievementHistory': {
      const p = payload as CustomerAchievementsCall;
      return `p:${p.app.accountId}:${p.integrationId}`;
    }
    // ---- keys H: audiences (issue 6; keep this marker) ----
    // Audience calls need no actor's ordering (the database orders them; see
    // services/integration/audiences.ts): each call is its own actor, so that parallel calls on
    // one audience are never refused as busy.
    case 'createAudience':
    case 'updateAudience':
    case 'deleteAudience':
    case 'deleteAudienceMemberships':
    case 'updateAudienceMembers':
    case 'updateAudienceMembersAttributes': {
      const p = payload as AudienceCall;
      return `a:${p.app.accountId}:${p.callId}`;
    }
    case 'updateSession':
    case 'getSession':
    case 'returnSession':
    case 'reopenSession': {
      const p = payload as UpdateSessionCall;
      return `s:${p.app.applicationId}:${p.customerSessionId}`;
    }
    case 'updateProfile':
    case 'deleteCustomerData': {
      const p = payload as UpdateProfileCall;
      return `p:${p.app.accountId}:${p.integrationId}`;
    }
    case 'createReferral': {
      const p = payload as CreateReferralCall;
      return `p:${p.app.accountId}:${p.advocateProfileIntegrationId}`;
    }
    case 'trackEvent': {
      const p = payload as TrackEventCall;
      if (p.profileId !== '') return `p:${p.app.accountId}:${p.profileId}`;
      return `s:${p.app.applicationId}:${String((p.request as { sessionId?: unknown }).sessionId ?? '')}`;
    }
  }
  throw new Error(`unknown operation ${String(operation)}`);
}
