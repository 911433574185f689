import type { AchievementService, AudienceService, CatalogService, EventService, LoyaltyService, ProfileService, ReferralService, ReservationService, SessionRecord, SessionService } from '../integration/index.js';
import { toV1State, type LoyaltyStateRequest } from '../integration/index.js';
import type { ActorHandlers, ActorState } from './local-port.js';

export interface IntegrationServices {
  sessions: SessionService;
  referrals: ReferralService;
  profiles: ProfileService;
  events: EventService;
  reservations: ReservationService;
  audiences: AudienceService;
  catalogs: CatalogService;
  achievements: AchievementService;
  loyalty: LoyaltyService;
}


/** The integration use case behind each port operation, with the state its actor keeps. */
export function integrationActorHandlers(services: IntegrationServices): ActorHandlers {
  const { sessions, referrals, profiles, events, reservations, audiences, catalogs, achievements, loyalty } = services;
  /**
   * IntegrationStateV2 `loyalty` (asked for by responseContent): the profile's programs and cards,
   * and the cards the call names, as of the answer (issue 6, area J).
   */
  const withLoyalty = async (
    out: unknown,
    app: { applicationId: number; accountId: number },
    request: () => LoyaltyStateRequest | Promise<LoyaltyStateRequest>,
  ): Promise<void> => {
    const o = out as Record<string, unknown> | undefined;
    // The request is made only when the answer asks for loyalty (it may read the session).
    if (o && typeof o === 'object' && 'loyalty' in o) o.loyalty = await loyalty.state(app, await request());
  };
  /**
   * The actor keeps the session it committed while the session is open, when the next call is
   * likely; an ended session (closed, cancelled, returned) is read from Postgres if it is called
   * again. So the cache holds the sessions in progress, not every session of the last hours: the
   * live heap, and the time the garbage collector takes to mark it, stays small.
   */
  const keep = (state: ActorState, committed: SessionRecord | undefined): void => {
    if (!committed) return;
    if (committed.state === 'open') state.set(committed);
    else state.drop();
  };
  /** The session as a call left it: what it committed, else as stored (a replay or dry return commits nothing). */
  const sessionAfter = (call: { app: Parameters<SessionService['stored']>[0]; customerSessionId: string }, committed: SessionRecord | undefined, state: ActorState) =>
    committed ?? sessions.stored(call.app, call.customerSessionId, state.get<SessionRecord>());
  /** The effects of a state that nothing committed: the tentative balances count them. */
  const effectsOf = (out: unknown): LoyaltyStateRequest['uncommitted'] => (out as { effects?: LoyaltyStateRequest['uncommitted'] } | undefined)?.effects ?? [];
  return {
    updateSession: async (call, state) => {
      const outcome = await sessions.update(call, state.get<SessionRecord>());
      keep(state, outcome.committed);
      // A dry run is the payload alone (spec: Dry requests), and commits none of its effects; an
      // open session's effects become final only when it closes.
      const sent = (call.request as { customerSession?: { profileId?: string; loyaltyCards?: string[] } }).customerSession;
      await withLoyalty(outcome.state, call.app, async () => {
        if (call.dry) return { profileId: sent?.profileId ?? '', cards: sent?.loyaltyCards ?? [], uncommitted: effectsOf(outcome.state) };
        const session = await sessionAfter(call, outcome.committed, state);
        return { profileId: session?.profileId ?? '', cards: session?.loyaltyCards, uncommitted: session?.state === 'open' ? effectsOf(outcome.state) : undefined };
      });
      // Legacy v1 (`PUT /v1/customer_sessions/...`) answers {session, profile, event}.
      return call.version === 'v1' ? toV1State(outcome.state) : outcome.state;
    },
    getSession: async (call, state) => (await sessions.get(call, state.get<SessionRecord>())).value,
    returnSession: async (call, state) => {
      const outcome = await sessions.returns(call, state.get<SessionRecord>());
      keep(state, outcome.committed);
      await withLoyalty(outcome.state, call.app, async () => {
        const session = await sessionAfter(call, outcome.committed, state);
        return { profileId: session?.profileId ?? '', cards: session?.loyaltyCards, uncommitted: call.dry ? effectsOf(outcome.state) : undefined };
      });
      return outcome.state;
    },
    reopenSession: async (call, state) => {
      const outcome = await sessions.reopen(call, state.get<SessionRecord>());
      keep(state, outcome.committed);
      return outcome.state;
    },
    updateProfile: async (call) => {
      const out = await profiles.update(call);
      await withLoyalty(out, call.app, () => ({ profileId: call.integrationId, uncommitted: call.dry ? effectsOf(out) : undefined }));
      return out;
    },
    trackEvent: async (call) => {
      const out = await events.track(call);
      const cards = (call.request as { loyaltyCards?: string[] }).loyaltyCards;
      await withLoyalty(out, call.app, () => ({ profileId: call.profileId, cards, uncommitted: call.dry ? effectsOf(out) : undefined }));
      return out;
    },
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
    loyaltyBalances: (call) => loyalty.balances(call),
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
