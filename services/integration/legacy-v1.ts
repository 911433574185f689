// Legacy Integration API v1 (service-spec "Integration API v1 (legacy)"): the same use cases as v2,
// answered as `{session, profile, event}` with the v1 shapes. The edge maps v1 request bodies to
// v2 ones before calling the port with `version: 'v1'`; the actor side reshapes the v2 state here,
// so v1 and v2 calls share sessions, profiles and events.
import type { JsonObject } from '../actors/port.js';

type Json = Record<string, unknown>;

/** The v1 session: the flat shape of the v1 request (`coupon`, `referral`, `total`). */
export function v1SessionView(s: Json): Json {
  const codes = (s.couponCodes as string[] | undefined) ?? [];
  return {
    id: s.id,
    integrationId: s.integrationId,
    created: s.created,
    applicationId: s.applicationId,
    profileId: s.profileId,
    coupon: codes[0] ?? '',
    referral: (s.referralCode as string | undefined) ?? '',
    state: s.state,
    cartItems: s.cartItems,
    total: s.total,
    attributes: s.attributes,
    firstSession: s.firstSession,
    updated: s.updated,
  };
}

/** The legacy v1 profile (service-spec "Customer profile (v2)", last paragraph). */
export function v1ProfileView(p: Json): Json {
  return {
    integrationId: p.integrationId,
    created: p.created,
    attributes: p.attributes,
    accountId: p.accountId,
    closedSessions: p.closedSessions,
    totalSales: p.totalSales,
    // Loyalty programs arrive with their own issue: no memberships yet.
    loyaltyMemberships: [],
    lastActivity: p.lastActivity,
  };
}

/** The v1 event: the v2 event without `storeIntegrationId` (v2 only). */
export function v1EventView(e: Json): Json {
  const { storeIntegrationId: _v2Only, ...rest } = e;
  return rest;
}

/**
 * `{session, profile, event}` from a v2 integration state that carries `customerSession`,
 * `customerProfile` and `event` (null where the call has none: a profile update has no session,
 * an anonymous session no profile).
 */
export function toV1State(state: JsonObject): JsonObject {
  const session = state.customerSession as Json | null | undefined;
  const profile = state.customerProfile as Json | null | undefined;
  const event = state.event as Json | null | undefined;
  return {
    session: session ? v1SessionView(session) : null,
    profile: profile ? v1ProfileView(profile) : null,
    event: event ? v1EventView(event) : null,
  };
}

/** What v1 calls ask the v2 use cases for, so that toV1State finds every part. */
export const V1_RESPONSE_CONTENT = ['customerSession', 'customerProfile', 'event'] as const;
