// Integration API handlers for customer profiles, custom events, customer data and the legacy v1
// operations: thin calls into the IntegrationPort, each running in its profile's (or session's)
// actor. v1 bodies are mapped to the v2 ones here; the actor side answers v1 calls in v1 shapes.
import type { AppRef, IntegrationPort, JsonObject } from '../actors/port.js';
import { AppError, badRequest, mapLimited } from '../shared/index.js';
import type { RouteHandler } from './app.js';
import { idempotencyKeyOf, served } from './integration-routes.js';


/** Profiles updated at once by one bulk request (each in its own actor). */
const BULK_CONCURRENCY = 16;

/** The legacy v1 session body as the v2 `customerSession` (see updateCustomerSessionV1 in the yaml). */
export function v1SessionToV2(body: Record<string, unknown>): JsonObject {
  const s: JsonObject = {};
  if (body.profileId !== undefined) s.profileId = body.profileId;
  // v1 carries one coupon and one referral; empty or absent means none.
  s.couponCodes = typeof body.coupon === 'string' && body.coupon !== '' ? [body.coupon] : [];
  s.referralCode = typeof body.referral === 'string' ? body.referral : '';
  if (body.state !== undefined) s.state = body.state;
  if (body.attributes !== undefined) s.attributes = body.attributes;
  if (Array.isArray(body.cartItems)) {
    // `adjustment` (v1 loyalty payment) and `position` (computed) are not taken from the client.
    s.cartItems = body.cartItems.map((item: Record<string, unknown>) => {
      const { adjustment: _a, position: _p, ...rest } = item;
      return rest;
    });
  }
  return s;
}

export function customerHandlers(port: IntegrationPort): Record<string, RouteHandler> {
  return {
    updateCustomerProfileV2: async ({ app, params, query, body, headers, requestUuid }) => {
      const r = await port.invoke('updateProfile', {
        app: app as AppRef,
        integrationId: params.integrationId,
        request: body ?? {},
        runRuleEngine: query.runRuleEngine === true,
        dry: query.dry === true,
        idempotencyKey: idempotencyKeyOf(headers),
        version: 'v2',
        requestUuid,
      });
      return { status: 200, body: r.value, headers: served(r.servedBy) };
    },
    updateCustomerProfilesV2: async ({ app, body }) => {
      const items = (body as { customerProfiles: Array<{ integrationId: string; attributes?: Record<string, unknown> }> }).customerProfiles;
      // One call per profile: a profile listed twice gets its attribute sets merged in order, so
      // that the bulk never queues on (or is refused by) its own profile's actor.
      const merged = new Map<string, Record<string, unknown>>();
      for (const item of items) merged.set(item.integrationId, { ...merged.get(item.integrationId), ...item.attributes });
      const profiles = await mapLimited([...merged], BULK_CONCURRENCY, async ([integrationId, attributes]) => {
        const r = await withConflictRetries(() =>
          port.invoke('updateProfile', {
            app: app as AppRef,
            integrationId,
            request: { attributes, responseContent: ['customerProfile'] },
            runRuleEngine: false,
            dry: false,
            version: 'v2',
          }),
        );
        return r.value.customerProfile;
      });
      return { status: 200, body: { customerProfiles: profiles } };
    },
    trackEventV2: async ({ app, query, body, headers, requestUuid }) => {
      const profileId = typeof body.profileId === 'string' ? body.profileId : '';
      if (profileId === '' && body.sessionId === undefined) throw badRequest('An anonymous event needs a sessionId', '/sessionId');
      const r = await port.invoke('trackEvent', {
        app: app as AppRef,
        profileId,
        request: body,
        dry: query.dry === true,
        idempotencyKey: idempotencyKeyOf(headers),
        version: 'v2',
        requestUuid,
      });
      return { status: 200, body: r.value, headers: served(r.servedBy) };
    },
    updateCustomerProfileV1: async ({ app, params, body, requestUuid }) => {
      const r = await port.invoke('updateProfile', {
        app: app as AppRef,
        integrationId: params.integrationId,
        request: { attributes: body?.attributes ?? {} },
        // v1 profile updates always ran the rule engine.
        runRuleEngine: true,
        dry: false,
        version: 'v1',
        requestUuid,
      });
      return { status: 200, body: r.value, headers: served(r.servedBy) };
    },
    updateCustomerSessionV1: async ({ app, params, query, body, requestUuid }) => {
      const r = await port.invoke('updateSession', {
        app: app as AppRef,
        customerSessionId: params.customerSessionId,
        request: { customerSession: v1SessionToV2(body ?? {}), responseContent: ['customerSession', 'customerProfile', 'event'] },
        dry: query.dry === true,
        version: 'v1',
        requestUuid,
      });
      return { status: 200, body: r.value, headers: served(r.servedBy) };
    },
    trackEventV1: async ({ app, body, requestUuid }) => {
      const r = await port.invoke('trackEvent', {
        app: app as AppRef,
        profileId: typeof body.profileId === 'string' ? body.profileId : '',
        request: { sessionId: body.sessionId, profileId: body.profileId ?? '', type: body.type, attributes: body.attributes },
        dry: false,
        version: 'v1',
        requestUuid,
      });
      return { status: 201, body: r.value, headers: served(r.servedBy) };
    },
    deleteCustomerData: async ({ app, params }) => {
      await port.invoke('deleteCustomerData', { app: app as AppRef, integrationId: params.integrationId });
      return { status: 204 };
    },
  };
}


/** A profile busy with other clients' calls (409) is tried again a few times before giving up. */
async function withConflictRetries<T>(fn: () => Promise<T>, attempts = 5): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await fn();
    } catch (e) {
      if (!(e instanceof AppError) || e.kind !== 'conflict' || n >= attempts) throw e;
      await new Promise((r) => setTimeout(r, 10 * 2 ** n * (0.5 + Math.random())));
    }
  }
}
