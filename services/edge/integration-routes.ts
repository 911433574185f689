import { randomUUID } from 'node:crypto';
import type { AppRef, IntegrationPort } from '../actors/port.js';
import { mapLimited } from '../shared/index.js';
import type { RouteHandler, RouteInput } from './app.js';
import { customerHandlers } from './customer-routes.js';

export const served = (node: string) => ({ 'X-Perkline-Node': node });

/** The Idempotency-Key header of a v2 write, when sent. */
export const idempotencyKeyOf = (headers: RouteInput['headers']): string | undefined => {
  const v = headers['idempotency-key'];
  return typeof v === 'string' ? v : undefined;
};


/** Integration API v2 handlers: thin calls into the IntegrationPort (the cluster router). */
export function integrationHandlers(port: IntegrationPort): Record<string, RouteHandler> {
  return {
    ...customerHandlers(port),
    // ---- handlers G: coupon reservations and customer inventory (issue 6; keep this marker) ----
    createCouponReservation: async ({ app, params, body }) => {
      const r = await port.invoke('createCouponReservation', { app: app as AppRef, couponValue: params.couponValue, integrationIDs: body.integrationIDs });
      return { status: 201, body: r.value, headers: served(r.servedBy) };
    },
    deleteCouponReservation: async ({ app, params, body }) => {
      const r = await port.invoke('deleteCouponReservation', { app: app as AppRef, couponValue: params.couponValue, integrationIDs: body.integrationIDs });
      return { status: 204, headers: served(r.servedBy) };
    },
    listCouponReservationHolders: async ({ app, params }) => {
      const r = await port.invoke('listCouponReservationHolders', { app: app as AppRef, couponValue: params.couponValue });
      return { status: 200, body: r.value, headers: served(r.servedBy) };
    },
    getCustomerInventory: async ({ app, params, query }) => {
      const r = await port.invoke('customerInventory', {
        app: app as AppRef,
        integrationId: params.integrationId,
        profile: query.profile === true,
        referrals: query.referrals === true,
        coupons: query.coupons === true,
        loyalty: query.loyalty === true,
        achievements: query.achievements === true,
      });
      return { status: 200, body: r.value, headers: served(r.servedBy) };
    },
    // ---- handlers I: catalogs and pricing (issue 6; keep this marker) ----
    syncCatalog: async ({ app, params, body }) => {
      const r = await port.invoke('syncCatalog', { app: app as AppRef, catalogId: params.catalogId, request: body ?? {}, callId: randomUUID() });
      return { status: 200, body: r.value, headers: served(r.servedBy) };
    },
    bestPriorPrice: async ({ app, body }) => {
      const r = await port.invoke('bestPriorPrice', { app: app as AppRef, request: body ?? {}, callId: randomUUID() });
      return { status: 200, body: r.value.data, headers: served(r.servedBy) };
    },
    // ---- handlers J: loyalty in sessions, cards, balances and the scheduler (issue 6; keep this marker) ----
    getLoyaltyBalances: async ({ app, params, query }) => {
      const r = await port.invoke('loyaltyBalances', {
        app: app as AppRef,
        programId: params.programID,
        integrationId: params.integrationID,
        ...(query.endDate !== undefined ? { endDate: query.endDate } : {}),
        ...(query.subledgerId !== undefined ? { subledgerId: query.subledgerId } : {}),
      });
      return { status: 200, body: r.value, headers: served(r.servedBy) };
    },
    // ---- handlers K: achievements (issue 6; keep this marker) ----
    getCustomerAchievements: async ({ app, params, query }) => {
      const r = await port.invoke('customerAchievements', {
        app: app as AppRef,
        integrationId: params.integrationId,
        campaignIds: query.campaignIds,
        achievementIds: query.achievementIds,
        achievementStatus: query.achievementStatus,
        currentProgressStatus: query.currentProgressStatus,
        pageSize: query.pageSize,
        skip: query.skip,
      });
      return { status: 200, body: r.value, headers: served(r.servedBy) };
    },
    getCustomerAchievementHistory: async ({ app, params, query }) => {
      const r = await port.invoke('customerAchievementHistory', {
        app: app as AppRef,
        integrationId: params.integrationId,
        achievementId: params.achievementId,
        progressStatus: query.progressStatus,
        startDate: query.startDate,
        endDate: query.endDate,
        pageSize: query.pageSize,
        skip: query.skip,
      });
      return { status: 200, body: r.value, headers: served(r.servedBy) };
    },
    // ---- handlers H: audiences (issue 6; keep this marker) ----
    createAudienceV2: async ({ app, body, headers }) => {
      const r = await port.invoke('createAudience', { app: app as AppRef, request: body ?? {}, callId: randomUUID(), idempotencyKey: idempotencyKeyOf(headers) });
      return { status: 201, body: r.value, headers: served(r.servedBy) };
    },
    updateAudienceV2: async ({ app, params, body, headers }) => {
      const r = await port.invoke('updateAudience', { app: app as AppRef, audienceId: params.audienceId, request: body ?? {}, callId: randomUUID(), idempotencyKey: idempotencyKeyOf(headers) });
      return { status: 200, body: r.value, headers: served(r.servedBy) };
    },
    deleteAudienceV2: async ({ app, params, headers }) => {
      const r = await port.invoke('deleteAudience', { app: app as AppRef, audienceId: params.audienceId, request: {}, callId: randomUUID(), idempotencyKey: idempotencyKeyOf(headers) });
      return { status: 204, headers: served(r.servedBy) };
    },
    deleteAudienceMembershipsV2: async ({ app, params, headers }) => {
      const r = await port.invoke('deleteAudienceMemberships', { app: app as AppRef, audienceId: params.audienceId, request: {}, callId: randomUUID(), idempotencyKey: idempotencyKeyOf(headers) });
      return { status: 204, headers: served(r.servedBy) };
    },
    updateAudienceCustomersV2: async ({ app, body, headers }) => {
      const r = await port.invoke('updateAudienceMembers', { app: app as AppRef, request: body ?? {}, callId: randomUUID(), idempotencyKey: idempotencyKeyOf(headers) });
      return { status: 204, headers: served(r.servedBy) };
    },
    updateAudienceCustomersAttributesV2: async ({ app, params, body, headers }) => {
      const r = await port.invoke('updateAudienceMembersAttributes', { app: app as AppRef, audienceId: params.audienceId, request: body ?? {}, callId: randomUUID(), idempotencyKey: idempotencyKeyOf(headers) });
      return { status: 204, headers: served(r.servedBy) };
    },
    updateCustomerSessionV2: async ({ app, params, query, body, headers, requestUuid }) => {
      const r = await port.invoke('updateSession', {
        app: app as AppRef,
        customerSessionId: params.customerSessionId,
        request: body ?? {},
        dry: query.dry === true,
        now: query.now,
        idempotencyKey: idempotencyKeyOf(headers),
        requestUuid,
      });
      return { status: 200, body: r.value, headers: served(r.servedBy) };
    },
    returnCartItems: async ({ app, params, query, body, headers }) => {
      const r = await port.invoke('returnSession', {
        app: app as AppRef,
        customerSessionId: params.customerSessionId,
        request: body ?? {},
        dry: query.dry === true,
        runRuleEngine: query.runRuleEngine === true,
        idempotencyKey: idempotencyKeyOf(headers),
      });
      return { status: 200, body: r.value, headers: served(r.servedBy) };
    },
    reopenCustomerSession: async ({ app, params, headers }) => {
      const r = await port.invoke('reopenSession', {
        app: app as AppRef,
        customerSessionId: params.customerSessionId,
        idempotencyKey: idempotencyKeyOf(headers),
      });
      return { status: 200, body: r.value, headers: served(r.servedBy) };
    },
    createReferral: async ({ app, body }) => {
      const r = await port.invoke('createReferral', { app: app as AppRef, request: body, advocateProfileIntegrationId: body.advocateProfileIntegrationId });
      return { status: 201, body: r.value, headers: served(r.servedBy) };
    },
    createReferralsForMultipleAdvocates: async ({ app, body, query }) => {
      const { advocateProfileIntegrationIds, ...common } = body as { advocateProfileIntegrationIds: string[] } & Record<string, unknown>;
      const unique = [...new Set(advocateProfileIntegrationIds)];
      // Each advocate's referral is made in that advocate's actor.
      const made = await mapLimited(unique, 16, async (advocate) =>
        (await port.invoke('createReferral', { app: app as AppRef, request: { ...common, advocateProfileIntegrationId: advocate }, advocateProfileIntegrationId: advocate })).value,
      );
      if (query.silent !== 'no') return { status: 204 };
      return { status: 201, body: { totalResultSize: made.length, data: made } };
    },
    getCustomerSession: async ({ app, params }) => {
      const r = await port.invoke('getSession', { app: app as AppRef, customerSessionId: params.customerSessionId });
      return { status: 200, body: r.value, headers: served(r.servedBy) };
    },
  };
}
