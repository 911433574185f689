import type { AchievementService, AudienceService, CatalogService, EventService, ProfileService, ReferralService, ReservationService, SessionRecord, SessionService } from '../integration/index.js';
import { toV1State } from '../integration/index.js';
import type { ActorHandlers } from './local-port.js';

export interface IntegrationServices {
  sessions: SessionService;
  referrals: ReferralService;
  profiles: ProfileService;
  events: EventService;
  reservations: ReservationService;
  audiences: AudienceService;
  catalogs: CatalogService;
  achievements: AchievementService;
}


/** The integration use case behind each port operation, with the state its actor keeps. */
export function integrationActorHandlers(services: IntegrationServices): ActorHandlers {
  const { sessions, referrals, profiles, events, reservations, audiences, catalogs, achievements } = services;
  return {
    updateSession: async (call, state) => {
      const outcome = await sessions.update(call, state.get<SessionRecord>());
      if (outcome.committed) state.set(outcome.committed);
      // Legacy v1 (`PUT /v1/customer_sessions/...`) answers {session, profile, event}.
      return call.version === 'v1' ? toV1State(outcome.state) : outcome.state;
    },
    getSession: async (call, state) => (await sessions.get(call, state.get<SessionRecord>())).value,
    returnSession: async (call, state) => {
      const outcome = await sessions.returns(call, state.get<SessionRecord>());
      if (outcome.committed) state.set(outcome.committed);
      return outcome.state;
    },
    reopenSession: async (call, state) => {
      const outcome = await sessions.reopen(call, state.get<SessionRecord>());
      if (outcome.committed) state.set(outcome.committed);
      return outcome.state;
    },
    updateProfile: (call) => profiles.update(call),
    trackEvent: (call) => events.track(call),
    deleteCustomerData: async (call) => {
      await profiles.deleteCustomerData(call);
      return {};
    },
    createReferral: (call) => referrals.create(call),
    // ---- handlers G: coupon reservations and customer inventory (issue 6; keep this marker) ----
    createCouponReservation: (call) => reservations.create(call),
    deleteCouponReservation: async (call) => {
      await reservations.delete(call);
      return {};
    },
    listCouponReservationHolders: (call) => reservations.holders(call),
    customerInventory: (call) => reservations.inventory(call),
    // ---- handlers I: catalogs and pricing (issue 6; keep this marker) ----
    syncCatalog: (call) => catalogs.sync(call),
    bestPriorPrice: async (call) => ({ data: await catalogs.bestPriorPrice(call) }),
    // ---- handlers J: loyalty in sessions, cards, balances and the scheduler (issue 6; keep this marker) ----
    // ---- handlers K: achievements (issue 6; keep this marker) ----
    customerAchievements: (call) => achievements.list(call),
    customerAchievementHistory: (call) => achievements.history(call),
    // ---- handlers H: audiences (issue 6; keep this marker) ----
    createAudience: (call) => audiences.create(call),
    updateAudience: (call) => audiences.rename(call),
    deleteAudience: async (call) => {
      await audiences.delete(call);
      return {};
    },
    deleteAudienceMemberships: async (call) => {
      await audiences.removeAllMembers(call);
      return {};
    },
    updateAudienceMembers: async (call) => {
      await audiences.changeMembers(call);
      return {};
    },
    updateAudienceMembersAttributes: async (call) => {
      await audiences.updateMembersAttributes(call);
      return {};
    },
  };
}
