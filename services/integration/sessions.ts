import type { AppRef, GetSessionCall, JsonObject, UpdateSessionCall } from '../actors/port.js';
import type { EvaluationInput, EvaluationResult } from '../engine/index.js';
import { badRequest, notFound, systemClock, uuid, type Clock, type Logger, silentLogger } from '../shared/index.js';
import type { Db } from '../store/index.js';
import {
  commitSession,
  eventView,
  isFirstSession,
  loadProfile,
  loadSession,
  profileRoot,
  profileView,
  StaleSessionError,
  type EventRecord,
} from './repository.js';
import {
  applyPayload,
  checkTransition,
  emptySession,
  sessionRoot,
  sessionView,
  type SessionPayload,
  type SessionRecord,
} from './session-model.js';
import { candidateCampaigns, type SnapshotCache } from './snapshot.js';

/** What evaluates campaigns: inline or in the worker pool (services/engine createEvaluator). */
export interface Evaluator {
  evaluate(input: EvaluationInput): Promise<EvaluationResult & { ranIn: 'inline' | 'pool' }>;
}

export interface SessionServiceOptions {
  db: Db;
  snapshots: SnapshotCache;
  evaluator: Evaluator;
  clock?: Clock;
  /** Prefix of built-in event names (default `service_`). */
  eventPrefix?: string;
  logger?: Logger;
}

export interface SessionUpdateOutcome {
  state: JsonObject;
  /** The session as committed; absent for dry runs (nothing changed). */
  committed?: SessionRecord;
}

const MAX_STALE_RETRIES = 5;

/** Session use cases: update (evaluate and commit) and read. Called by the session's actor. */
export class SessionService {
  private readonly db: Db;
  private readonly snapshots: SnapshotCache;
  private readonly evaluator: Evaluator;
  private readonly clock: Clock;
  private readonly prefix: string;
  private readonly logger: Logger;

  constructor(options: SessionServiceOptions) {
    this.db = options.db;
    this.snapshots = options.snapshots;
    this.evaluator = options.evaluator;
    this.clock = options.clock ?? systemClock;
    this.prefix = options.eventPrefix ?? 'service_';
    this.logger = options.logger ?? silentLogger;
  }

  /**
   * Updates (or creates) a session. `cached` is the session as this actor last committed it; it is
   * trusted first and re-read from Postgres when the commit finds it stale.
   */
  async update(call: UpdateSessionCall, cached: SessionRecord | undefined): Promise<SessionUpdateOutcome> {
    const request = call.request as { customerSession?: SessionPayload; responseContent?: string[] };
    const payload = request.customerSession ?? {};
    const responseContent = new Set(request.responseContent ?? []);
    const now = this.evaluationTime(call);

    if (call.dry) {
      const stored = cached ?? (await loadSession(this.db, call.app.applicationId, call.customerSessionId));
      const base = emptySession(call.app.applicationId, call.customerSessionId, now.toISOString());
      const session = applyPayload({ ...base, id: stored?.id ?? 0, created: stored?.created ?? base.created }, payload);
      session.updateCount = stored?.updateCount ?? 0;
      const profile = session.profileId ? await loadProfile(this.db, call.app.accountId, session.profileId) : undefined;
      session.firstSession = stored?.firstSession ?? (await isFirstSession(this.db, call.app.applicationId, session.profileId));
      const mainEvent = this.mainEventType(stored, session);
      const result = await this.evaluate(call.app, session, profile, mainEvent, now, payload.evaluableCampaignIds);
      session.effects = result.effects;
      const event: EventRecord = {
        id: 0,
        created: now.toISOString(),
        applicationId: call.app.applicationId,
        profileId: session.profileId,
        storeIntegrationId: session.storeIntegrationId,
        type: mainEvent,
        attributes: {},
        sessionId: session.integrationId,
        effects: result.effects,
      };
      return { state: await this.stateOf(call.app, session, profile && profileView(profile), event, result, responseContent) };
    }

    let current = cached;
    for (let attempt = 0; ; attempt++) {
      if (current === undefined || attempt > 0) {
        current = await loadSession(this.db, call.app.applicationId, call.customerSessionId);
      }
      try {
        return await this.updateOnce(call, current, payload, responseContent, now);
      } catch (e) {
        if (!(e instanceof StaleSessionError) || attempt >= MAX_STALE_RETRIES) throw e;
        this.logger.debug('stale session, retrying', { session: call.customerSessionId, attempt });
      }
    }
  }

  private async updateOnce(
    call: UpdateSessionCall,
    stored: SessionRecord | undefined,
    payload: SessionPayload,
    responseContent: Set<string>,
    now: Date,
  ): Promise<SessionUpdateOutcome> {
    const nowIso = now.toISOString();
    const base = stored ?? emptySession(call.app.applicationId, call.customerSessionId, nowIso);
    const from = base.state;
    const to = payload.state ?? from;
    checkTransition(from, to);
    const session = applyPayload(base, payload);
    if (!stored) session.firstSession = await isFirstSession(this.db, call.app.applicationId, session.profileId);
    const closing = from === 'open' && to === 'closed';

    const profile = session.profileId ? await loadProfile(this.db, call.app.accountId, session.profileId) : undefined;
    const mainEvent = this.mainEventType(stored, session);
    const evaluates = to === 'open' || closing;
    const result: EvaluationResult = evaluates
      ? await this.evaluate(call.app, session, profile, mainEvent, now, undefined)
      : { effects: [], ruleFailureReasons: [], triggeredCampaignIds: [] };
    session.effects = result.effects;

    const eventTypes = [
      ...(stored ? [] : [`${this.prefix}session_created`]),
      `${this.prefix}session_updated`,
      ...(closing ? [`${this.prefix}session_closed`] : []),
      ...(from !== 'cancelled' && to === 'cancelled' ? [`${this.prefix}session_cancelled`] : []),
    ];
    const committed = await this.db.transaction((tx) =>
      commitSession(tx, {
        accountId: call.app.accountId,
        session,
        expectedUpdateCount: stored?.updateCount ?? 0,
        closing,
        now: nowIso,
        events: eventTypes.map((type) => ({ type, attributes: {}, effects: type === mainEvent ? result.effects : [] })),
      }),
    );
    const event = committed.events.find((e) => e.type === mainEvent) ?? committed.events[committed.events.length - 1]!;
    const profileOut = committed.profile ? profileView(committed.profile) : undefined;
    return {
      state: await this.stateOf(call.app, committed.session, profileOut, event, result, responseContent),
      committed: committed.session,
    };
  }

  async get(call: GetSessionCall, cached: SessionRecord | undefined): Promise<{ value: JsonObject; record: SessionRecord }> {
    const session = cached ?? (await loadSession(this.db, call.app.applicationId, call.customerSessionId));
    if (!session) throw notFound('Customer session', '/customerSessionId');
    return { value: { customerSession: sessionView(session), effects: session.effects }, record: session };
  }

  /** The built-in event an update is evaluated for: the most specific one it emits. */
  private mainEventType(stored: SessionRecord | undefined, next: SessionRecord): string {
    const from = stored?.state ?? 'open';
    if (from === 'open' && next.state === 'closed') return `${this.prefix}session_closed`;
    if (from !== 'cancelled' && next.state === 'cancelled') return `${this.prefix}session_cancelled`;
    if (!stored) return `${this.prefix}session_created`;
    return `${this.prefix}session_updated`;
  }

  private evaluationTime(call: UpdateSessionCall): Date {
    const now = this.clock.now();
    if (call.now === undefined) return now;
    if (!call.dry) throw badRequest('`now` may only be used with dry=true', '/query/now');
    const t = new Date(call.now);
    if (Number.isNaN(t.getTime())) throw badRequest('`now` must be an RFC 3339 date-time', '/query/now');
    if (t.getTime() < now.getTime()) throw badRequest('`now` must not be in the past', '/query/now');
    return t;
  }

  private async evaluate(
    app: AppRef,
    session: SessionRecord,
    profile: Awaited<ReturnType<typeof loadProfile>>,
    eventType: string,
    now: Date,
    evaluableCampaignIds: number[] | undefined,
  ): Promise<EvaluationResult> {
    const snapshot = await this.snapshots.get(app.applicationId);
    const campaigns = candidateCampaigns(snapshot.campaigns, now, evaluableCampaignIds);
    if (campaigns.length === 0) return { effects: [], ruleFailureReasons: [], triggeredCampaignIds: [] };
    const a = snapshot.application;
    return this.evaluator.evaluate({
      version: 1,
      application: {
        id: a.id,
        currency: a.currency,
        timezone: a.timezone,
        attributes: a.attributes,
        campaignPriority: a.campaignPriority,
        exclusiveCampaignsStrategy: a.exclusiveCampaignsStrategy,
      },
      campaigns: campaigns.map((c) => ({
        id: c.id,
        name: c.name,
        tags: c.tags,
        attributes: c.attributes,
        rulesetId: c.rulesetId,
        ruleset: c.ruleset,
      })),
      session: sessionRoot(session),
      profile: profileRoot(profile, session.profileId),
      event: { Type: eventType, Attributes: {} },
      now: now.toISOString(),
      // Codes and ids the engine makes are drawn from this; coupons, referrals, limits and the
      // other facts arrive with the issues that store them.
      facts: { seed: uuid() },
    });
  }

  private async stateOf(
    app: AppRef,
    session: SessionRecord,
    profile: JsonObject | undefined,
    event: EventRecord,
    result: EvaluationResult,
    responseContent: Set<string>,
  ): Promise<JsonObject> {
    const state: JsonObject = { effects: result.effects, createdCoupons: [], createdReferrals: [] };
    if (responseContent.has('customerSession')) state.customerSession = sessionView(session);
    if (responseContent.has('customerProfile')) state.customerProfile = profile ?? null;
    if (responseContent.has('event')) state.event = eventView(event);
    if (responseContent.has('ruleFailureReasons')) state.ruleFailureReasons = result.ruleFailureReasons;
    if (responseContent.has('triggeredCampaigns')) {
      const snapshot = await this.snapshots.get(app.applicationId);
      const ids = new Set(result.triggeredCampaignIds);
      state.triggeredCampaigns = snapshot.campaigns
        .filter((c) => ids.has(c.id))
        .map((c) => ({
          id: c.id,
          applicationId: c.applicationId,
          name: c.name,
          description: c.description,
          tags: c.tags,
          attributes: c.attributes,
          state: c.state,
          activeRulesetId: c.rulesetId,
          features: c.features,
        }));
    }
    return state;
  }
}
