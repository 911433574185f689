// Custom events (service-spec "Custom events"; v2 `POST /v2/events`, legacy `POST /v1/events`).
// An event type exists once a custom attribute of entity `Event` defines it; an event carries at
// least one attribute, each defined for its type. Every event is bound to a session: the one it
// names (which must belong to the event's profile, and is created empty and open when missing) or,
// without `sessionId`, the profile's implicit event session `event-session:<profileId>`. The
// implicit session is virtual: the event rows carry its id, but no customer_sessions row is made
// for it (it would turn the profile's first real cart into a non-first session). The event is
// evaluated with Event {Type, Attributes} and the session as the Session root; its effects are
// committed at once (rules.md 7) and the event row keeps them.
import type { JsonObject, TrackEventCall } from '../actors/port.js';
import { badRequest } from '../shared/index.js';
import type { Queryable } from '../store/index.js';
import { commitEffects, CommitRaceError } from './commit-effects.js';
import {
  insertEvent,
  integrationState,
  MAX_COMMIT_ATTEMPTS,
  previewCreated,
  profileOf,
  unsavedEvent,
  withLedgerEntries,
} from './customer-records.js';
import { IntegrationService, type IntegrationServiceOptions } from './evaluation.js';
import { remember, type IdempotencyScope } from './idempotency.js';
import { toV1State, V1_RESPONSE_CONTENT } from './legacy-v1.js';
import { AUDIENCES_OF_P, isFirstSession, loadProfile, loadSession, SESSION_KEY, type ProfileRecord } from './repository.js';
import { emptySession, sessionView, type SessionRecord } from './session-model.js';

export type EventServiceOptions = IntegrationServiceOptions;

/** The body of `POST /v2/events` (and of `/v1/events`, which has a subset of its fields). */
export interface EventRequest {
  profileId?: string;
  storeIntegrationId?: string;
  sessionId?: string;
  evaluableCampaignIds?: number[];
  type: string;
  attributes: Record<string, unknown>;
  loyaltyCards?: string[];
  responseContent?: string[];
}

/** The session an event without `sessionId` is bound to. */
export const implicitEventSessionId = (profileId: string): string => `event-session:${profileId}`;

interface AttributeDefinition {
  name: string;
  type: string;
}

const escapePointer = (s: string): string => s.replace(/~/g, '~0').replace(/\//g, '~1');

export class EventService extends IntegrationService {

  /** Tracks one event in the actor of its profile (or of its session, for an anonymous event). */
  async track(call: TrackEventCall): Promise<JsonObject> {
    const request = call.request as unknown as EventRequest;
    const v1 = call.version === 'v1';
    const profileId = request.profileId ?? '';
    const responseContent = new Set<string>(v1 ? V1_RESPONSE_CONTENT : (request.responseContent ?? []));
    await this.validate(call, request);
    if (request.sessionId === undefined && profileId === '') {
      throw badRequest('An anonymous event needs a sessionId', '/sessionId');
    }
    const sessionId = request.sessionId ?? implicitEventSessionId(profileId);
    const implicit = request.sessionId === undefined;
    const evaluable = request.evaluableCampaignIds?.length ? request.evaluableCampaignIds : undefined;
    const shape = (state: JsonObject) => (v1 ? toV1State(state) : state);

    if (call.dry) {
      const now = this.clock.now();
      const stored = await this.boundSession(this.db, call, sessionId, profileId);
      const session = stored ?? (await this.newSession(call, sessionId, profileId, request, now.toISOString()));
      const profile = profileId ? await loadProfile(this.db, call.app.accountId, profileId) : undefined;
      const outcome = await this.evaluate(call, request, session, profile, now, { evaluableCampaignIds: evaluable });
      const event = unsavedEvent(this.newEvent(call, request, session, profileId, outcome.effects, now.toISOString()));
      return shape(
        integrationState(responseContent, {
          snapshot: outcome.snapshot,
          result: outcome,
          profile,
          event,
          ...previewCreated(outcome.effects),
          extra: responseContent.has('customerSession') ? { customerSession: sessionView(session) } : {},
        }),
      );
    }

    const scope = this.scopeOf(call.app, call.idempotencyKey, `trackEvent:${profileId}`, call.request);
    return this.idempotent(scope, () => this.commitEvent(call, request, responseContent, shape, scope, { profileId, sessionId, implicit, evaluable }), (stored) => stored);
  }

  /** Evaluates and commits one event, again with fresh facts when a counter ran out under it. */
  private async commitEvent(
    call: TrackEventCall,
    request: EventRequest,
    responseContent: Set<string>,
    shape: (state: JsonObject) => JsonObject,
    scope: IdempotencyScope | undefined,
    { profileId, sessionId, implicit, evaluable }: { profileId: string; sessionId: string; implicit: boolean; evaluable: number[] | undefined },
  ): Promise<JsonObject> {
    for (let attempt = 1; ; attempt++) {
      const now = this.clock.now();
      const nowIso = now.toISOString();
      const stored = await this.boundSession(this.db, call, sessionId, profileId);
      const session = stored ?? (await this.newSession(call, sessionId, profileId, request, nowIso));
      const profile = profileId ? await loadProfile(this.db, call.app.accountId, profileId) : undefined;
      const outcome = await this.evaluate(call, request, session, profile, now, { onlyCampaignIds: evaluable });
      try {
        // Rows are locked in the order of a session close (counters, then profile, then session),
        // so that an event and a close of the same customer cannot deadlock.
        let outbound = 0;
        const state = await this.db.transaction(async (tx) => {
          const made = await commitEffects(tx, {
            app: outcome.snapshot.application,
            campaigns: outcome.snapshot.campaigns,
            webhooks: outcome.snapshot.webhooks,
            notificationTypes: outcome.snapshot.notificationTypes,
            sessionId,
            profileId,
            effects: outcome.effects,
            loaded: outcome.loaded,
            now,
            requestUuid: call.requestUuid,
          });
          outbound = made.outbound;
          let profileAfter: ProfileRecord | undefined;
          if (profileId !== '') {
            // A missing profile is created; an existing one is active now.
            const [row] = await tx.query(
              `INSERT INTO customer_profiles AS p (account_id, integration_id, created, last_activity) VALUES ($1, $2, $3, $3)
               ON CONFLICT (account_id, integration_id) DO UPDATE SET last_activity = EXCLUDED.last_activity RETURNING *, ${AUDIENCES_OF_P} AS audiences`,
              [call.app.accountId, profileId, nowIso],
            );
            profileAfter = profileOf(row!);
          }
          let bound = session;
          if (!stored && !implicit) bound = await this.createSession(tx, call, session, profileId);
          const inserted = await insertEvent(tx, this.newEvent(call, request, bound, profileId, outcome.effects, nowIso));
          const [event] = await withLedgerEntries(tx, [inserted], inserted.type, made.ledgerEntries);
          const out = integrationState(responseContent, {
            snapshot: outcome.snapshot,
            result: outcome,
            profile: profileAfter,
            event,
            createdCoupons: made.createdCoupons,
            createdReferrals: made.createdReferrals,
            extra: responseContent.has('customerSession') ? { customerSession: sessionView(bound) } : {},
          });
          if (scope) await remember(tx, scope, out, this.clock);
          return out;
        });
        if (outbound > 0) this.outboundWritten();
        return shape(state);
      } catch (e) {
        if (!(e instanceof CommitRaceError) || attempt >= MAX_COMMIT_ATTEMPTS) throw e;
        this.logger.debug('event commit raced, evaluating again', { profile: profileId, attempt, reason: e.message });
        await new Promise((r) => setTimeout(r, Math.random() * 5 * attempt));
      }
    }
  }

  /**
   * The event type must not be reserved, must be defined by at least one custom attribute of
   * entity Event, and every attribute sent must be defined for it (with a value of its type).
   */
  private async validate(call: TrackEventCall, request: EventRequest): Promise<void> {
    if (request.type.startsWith(this.prefix)) {
      throw badRequest(`Event type ${JSON.stringify(request.type)} is reserved: built-in events start with ${JSON.stringify(this.prefix)}`, '/type', 'ReservedEventType');
    }
    const names = Object.keys(request.attributes ?? {});
    if (names.length === 0) throw badRequest('An event must carry at least one attribute', '/attributes');
    const rows = await this.db.query<{ name: string; type: string; subscribed_applications_ids: number[] | null }>(
      `SELECT name, type, subscribed_applications_ids FROM attributes WHERE account_id = $1 AND entity = 'Event' AND event_type = $2`,
      [call.app.accountId, request.type],
    );
    const defined = new Map<string, AttributeDefinition>();
    for (const r of rows) {
      if (r.subscribed_applications_ids && !r.subscribed_applications_ids.includes(call.app.applicationId)) continue;
      defined.set(r.name, { name: r.name, type: r.type });
    }
    if (defined.size === 0) {
      throw badRequest(
        `Event type ${JSON.stringify(request.type)} is not defined: create a custom attribute with entity Event and eventType ${JSON.stringify(request.type)} first`,
        '/type',
        'UndefinedEventType',
      );
    }
    for (const name of names) {
      const pointer = `/attributes/${escapePointer(name)}`;
      const def = defined.get(name);
      if (!def) throw badRequest(`Attribute ${JSON.stringify(name)} is not defined for event type ${JSON.stringify(request.type)}`, pointer, 'UndefinedAttribute');
      if (!valueFits(def.type, request.attributes[name])) {
        throw badRequest(`Attribute ${JSON.stringify(name)} must be of type ${def.type}`, pointer, 'InvalidAttributeValue');
      }
    }
  }

  /** The stored session the event names, checked to be the event's profile's. */
  private async boundSession(db: Queryable, call: TrackEventCall, sessionId: string, profileId: string): Promise<SessionRecord | undefined> {
    const stored = await loadSession(db, call.app.applicationId, sessionId);
    if (stored && stored.profileId !== profileId) {
      throw badRequest(
        `Session ${JSON.stringify(sessionId)} belongs to ${stored.profileId === '' ? 'no profile (anonymous)' : 'another profile'}`,
        '/sessionId',
        'SessionProfileMismatch',
      );
    }
    return stored;
  }

  private async newSession(call: TrackEventCall, sessionId: string, profileId: string, request: EventRequest, now: string): Promise<SessionRecord> {
    const session = emptySession(call.app.applicationId, sessionId, now);
    session.profileId = profileId;
    session.storeIntegrationId = request.storeIntegrationId ?? '';
    session.firstSession = await isFirstSession(this.db, call.app.applicationId, profileId);
    return session;
  }

  /**
   * Stores the empty open session the event named. Another call may have created it meanwhile (a
   * session update runs in the session's actor, not this one): then that one is bound, if it is
   * this profile's.
   */
  private async createSession(tx: Queryable, call: TrackEventCall, session: SessionRecord, profileId: string): Promise<SessionRecord> {
    await tx.query(
      `INSERT INTO customer_sessions (application_id, integration_id, profile_id, store_integration_id, state, first_session, created, updated, update_count)
       VALUES ($1, $2, $3, $4, 'open', $5, $6, $6, 1)
       ON CONFLICT ${SESSION_KEY} DO NOTHING`,
      [session.applicationId, session.integrationId, profileId, session.storeIntegrationId, session.firstSession, session.created],
    );
    const bound = await this.boundSession(tx, call, session.integrationId, profileId);
    return bound!;
  }

  private evaluate(
    call: TrackEventCall,
    request: EventRequest,
    session: SessionRecord,
    profile: ProfileRecord | undefined,
    now: Date,
    campaigns: { evaluableCampaignIds?: number[] | undefined; onlyCampaignIds?: number[] | undefined },
  ) {
    // The session's coupon and referral codes are the session's: they are validated by its updates
    // and redeemed when it closes, never by an event (which commits at once).
    const evaluated: SessionRecord = {
      ...session,
      couponCodes: [],
      referralCode: '',
      loyaltyCards: request.loyaltyCards ?? session.loyaltyCards,
    };
    return this.evaluation.run({
      applicationId: call.app.applicationId,
      session: evaluated,
      profile,
      event: { type: request.type, attributes: request.attributes },
      now,
      ...campaigns,
    });
  }

  private newEvent(call: TrackEventCall, request: EventRequest, session: SessionRecord, profileId: string, effects: readonly unknown[], now: string) {
    return {
      applicationId: call.app.applicationId,
      profileId,
      sessionId: session.integrationId,
      storeIntegrationId: request.storeIntegrationId ?? session.storeIntegrationId,
      type: request.type,
      attributes: request.attributes,
      effects,
      now,
    };
  }
}

/** Whether a value fits a custom attribute type (types as the Management API names them). */
function valueFits(type: string, value: unknown): boolean {
  const isTime = (v: unknown) => typeof v === 'string' && !Number.isNaN(Date.parse(v));
  switch (type) {
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'time':
      return isTime(value);
    case '(list string)':
      return Array.isArray(value) && value.every((v) => typeof v === 'string');
    case '(list number)':
      return Array.isArray(value) && value.every((v) => typeof v === 'number' && Number.isFinite(v));
    case '(list time)':
      return Array.isArray(value) && value.every(isTime);
    default:
      return true;
  }
}
