// Customer profiles: the v2 update (attributes merged, optionally evaluated with the built-in
// `<prefix>profile_created` / `<prefix>profile_updated` event and its effects committed at once,
// rules.md 7), the legacy v1 update, and the deletion of a customer's personal data. Every call
// runs in the profile's actor (`p:<accountId>:<integrationId>`); the attribute merge still happens
// in SQL so that writers outside that actor (session closes counting purchases) lose nothing.
import type { DeleteCustomerDataCall, JsonObject, UpdateProfileCall } from '../actors/port.js';
import type { EvaluationResult } from '../engine/index.js';
import { badRequest, notFound } from '../shared/index.js';
import type { Queryable } from '../store/index.js';
import { commitEffects, CommitRaceError } from './commit-effects.js';
import {
  insertEvent,
  integrationState,
  MAX_COMMIT_ATTEMPTS,
  previewCreated,
  unsavedEvent,
  upsertProfile,
  withLedgerEntries,
} from './customer-records.js';
import { IntegrationService, type IntegrationServiceOptions } from './evaluation.js';
import { remember, type IdempotencyScope } from './idempotency.js';
import { toV1State, V1_RESPONSE_CONTENT } from './legacy-v1.js';
import { applyAudiencesChanges } from './audiences.js';
import { loadProfile, type ProfileRecord } from './repository.js';
import { emptySession } from './session-model.js';

export interface ProfileServiceOptions extends IntegrationServiceOptions {
  /**
   * Told which sessions a customer data deletion changed, so that the node can drop the session
   * actors' cached copies (the commit's update-count check already keeps a stale copy from being
   * written back; this keeps it from being read).
   */
  onSessionsChanged?: (sessions: ReadonlyArray<{ applicationId: number; integrationId: string }>) => void;
}

/** The body of `PUT /v2/customer_profiles/{integrationId}` (validated against the OpenAPI schema). */
export interface ProfileRequest {
  attributes?: Record<string, unknown>;
  evaluableCampaignIds?: number[];
  responseContent?: string[];
  audiencesChanges?: { adds?: number[]; deletes?: number[] };
}

const EMPTY_RESULT: EvaluationResult = { effects: [], ruleFailureReasons: [], triggeredCampaignIds: [] };

export class ProfileService extends IntegrationService {
  private readonly onSessionsChanged: ProfileServiceOptions['onSessionsChanged'];

  constructor(options: ProfileServiceOptions) {
    super(options);
    this.onSessionsChanged = options.onSessionsChanged;
  }

  /**
   * Updates (or creates) a profile. Without runRuleEngine the attributes are stored and nothing is
   * evaluated; with it the built-in profile event is evaluated and its effects committed at once;
   * with dry as well nothing is stored. v1 calls always run the rule engine and get `{session,
   * profile, event}`.
   */
  async update(call: UpdateProfileCall): Promise<JsonObject> {
    const request = call.request as ProfileRequest;
    const v1 = call.version === 'v1';
    const responseContent = new Set<string>(v1 ? V1_RESPONSE_CONTENT : (request.responseContent ?? []));
    if (call.dry && !call.runRuleEngine) throw badRequest('`dry` is only meaningful with runRuleEngine=true', '/query/dry');
    checkAudiencesChanges(request.audiencesChanges);
    const attributes = request.attributes ?? {};
    const evaluable = request.evaluableCampaignIds?.length ? request.evaluableCampaignIds : undefined;
    const shape = (state: JsonObject) => (v1 ? toV1State(state) : state);
    if (call.dry) return shape(await this.dryRun(call, attributes, evaluable, responseContent));
    const scope = this.scopeOf(call.app, call.idempotencyKey, `updateProfile:${call.integrationId}`, { request: call.request, runRuleEngine: call.runRuleEngine });
    const state = await this.idempotent(
      scope,
      () => (call.runRuleEngine ? this.evaluateAndCommit(call, attributes, evaluable, responseContent, scope) : this.storeOnly(call, attributes, responseContent, scope)),
      (stored) => stored,
    );
    return shape(state);
  }

  /** DELETE /v1/customer_data/{integrationId}: every attribute of the profile, its sessions and their events. */
  async deleteCustomerData(call: DeleteCustomerDataCall): Promise<void> {
    const now = this.clock.now().toISOString();
    const changed = await this.db.transaction(async (tx) => {
      // Sessions before the profile: the order a session commit takes them in (no deadlock).
      // The profile belongs to the account, so the erasure covers its sessions and events in every
      // Application of the account. The update count moves so that a session actor's cached copy
      // (with the old attributes) can never be committed over this.
      const sessions = await tx.query<{ application_id: number; integration_id: string }>(
        `UPDATE customer_sessions s SET attributes = '{}'::jsonb, updated = $3, update_count = s.update_count + 1,
           cart_items = COALESCE((
             SELECT jsonb_agg(CASE WHEN jsonb_typeof(i) = 'object' AND i -> 'attributes' IS NOT NULL
                                   THEN jsonb_set(i, '{attributes}', '{}'::jsonb) ELSE i END ORDER BY n)
               FROM jsonb_array_elements(s.cart_items::jsonb) WITH ORDINALITY AS x(i, n)), '[]'::jsonb)
          FROM applications a
         WHERE a.id = s.application_id AND a.account_id = $1 AND s.profile_id = $2
         RETURNING s.application_id, s.integration_id`,
        [call.app.accountId, call.integrationId, now],
      );
      const profiles = await tx.query(
        `UPDATE customer_profiles SET attributes = '{}'::jsonb WHERE account_id = $1 AND integration_id = $2 RETURNING id`,
        [call.app.accountId, call.integrationId],
      );
      if (profiles.length === 0) throw notFound('Customer profile', '/path/integrationId');
      await tx.query(
        `UPDATE events e SET attributes = '{}'::jsonb FROM applications a
          WHERE a.id = e.application_id AND a.account_id = $1 AND e.profile_id = $2 AND e.attributes <> '{}'::jsonb`,
        [call.app.accountId, call.integrationId],
      );
      // Stored Idempotency-Key responses that show this customer would replay the erased data.
      await tx.query(
        `DELETE FROM idempotency_keys k USING applications a
          WHERE a.id = k.application_id AND a.account_id = $1
            AND (k.response -> 'customerProfile' ->> 'integrationId' = $2 OR k.response -> 'customerSession' ->> 'profileId' = $2
              OR k.response -> 'event' ->> 'profileId' = $2 OR k.response -> 'profile' ->> 'integrationId' = $2
              OR k.response -> 'session' ->> 'profileId' = $2)`,
        [call.app.accountId, call.integrationId],
      );
      return sessions.map((s) => ({ applicationId: s.application_id, integrationId: s.integration_id }));
    });
    if (changed.length > 0) this.onSessionsChanged?.(changed);
  }

  private async storeOnly(
    call: UpdateProfileCall,
    attributes: Record<string, unknown>,
    responseContent: Set<string>,
    scope: IdempotencyScope | undefined,
  ): Promise<JsonObject> {
    const now = this.clock.now().toISOString();
    return this.db.transaction(async (tx) => {
      const { profile } = await this.upsertWithAudiences(tx, call, attributes, now);
      const snapshot = responseContent.has('triggeredCampaigns') ? await this.snapshots.get(call.app.applicationId) : undefined;
      const state = integrationState(responseContent, {
        snapshot,
        result: EMPTY_RESULT,
        profile,
        event: undefined,
        createdCoupons: [],
        createdReferrals: [],
      });
      if (scope) await remember(tx, scope, state, this.clock);
      return state;
    });
  }

  private async evaluateAndCommit(
    call: UpdateProfileCall,
    attributes: Record<string, unknown>,
    evaluable: number[] | undefined,
    responseContent: Set<string>,
    scope: IdempotencyScope | undefined,
  ): Promise<JsonObject> {
    const { integrationId } = call;
    for (let attempt = 1; ; attempt++) {
      const { now, nowIso, outcome, newEvent } = await this.evaluateProfileEvent(call, attributes, { onlyCampaignIds: evaluable });
      try {
        // Counters before the profile row, as a session close locks them: no deadlock between the two.
        let outbound = 0;
        const committed = await this.db.transaction(async (tx: Queryable) => {
          const made = await commitEffects(tx, {
            app: outcome.snapshot.application,
            campaigns: outcome.snapshot.campaigns,
            webhooks: outcome.snapshot.webhooks,
            notificationTypes: outcome.snapshot.notificationTypes,
            sessionId: '',
            profileId: integrationId,
            effects: outcome.effects,
            loaded: outcome.loaded,
            now,
            requestUuid: call.requestUuid,
          });
          outbound = made.outbound;
          const { profile } = await this.upsertWithAudiences(tx, call, attributes, nowIso);
          const [event] = await withLedgerEntries(tx, [await insertEvent(tx, newEvent)], newEvent.type, made.ledgerEntries);
          const state = integrationState(responseContent, {
            snapshot: outcome.snapshot,
            result: outcome,
            profile,
            event,
            createdCoupons: made.createdCoupons,
            createdReferrals: made.createdReferrals,
          });
          if (scope) await remember(tx, scope, state, this.clock);
          return state;
        });
        if (outbound > 0) this.outboundWritten();
        return committed;
      } catch (e) {
        if (!(e instanceof CommitRaceError) || attempt >= MAX_COMMIT_ATTEMPTS) throw e;
        this.logger.debug('profile commit raced, evaluating again', { profile: integrationId, attempt, reason: e.message });
        await new Promise((r) => setTimeout(r, Math.random() * 5 * attempt));
      }
    }
  }

  /** The attribute merge, then the audiencesChanges of the request (the profile is returned with its memberships). */
  private async upsertWithAudiences(tx: Queryable, call: UpdateProfileCall, attributes: Record<string, unknown>, now: string): Promise<{ profile: ProfileRecord }> {
    const upserted = await upsertProfile(tx, call.app.accountId, call.integrationId, attributes, now);
    const changes = (call.request as ProfileRequest).audiencesChanges;
    if ((changes?.adds?.length ?? 0) + (changes?.deletes?.length ?? 0) === 0) return upserted;
    await applyAudiencesChanges(tx, call.app.accountId, call.integrationId, changes);
    return { profile: (await loadProfile(tx, call.app.accountId, call.integrationId)) ?? upserted.profile };
  }

  /** Evaluates the profile's built-in event on the profile as it will be after the merge (what the rules see). */
  private async evaluateProfileEvent(
    call: UpdateProfileCall,
    attributes: Record<string, unknown>,
    which: { onlyCampaignIds?: number[] | undefined; evaluableCampaignIds?: number[] | undefined },
  ) {
    const { app, integrationId } = call;
    const now = this.clock.now();
    const nowIso = now.toISOString();
    const stored = await loadProfile(this.db, app.accountId, integrationId);
    const merged = mergedProfile(stored, app.accountId, integrationId, attributes, nowIso);
    // The rules see the memberships as the request's audiencesChanges leave them.
    const changes = (call.request as ProfileRequest).audiencesChanges;
    if (changes) {
      const gone = new Set(changes.deletes ?? []);
      const kept = (merged.audiences ?? []).filter((a) => !gone.has(a.id));
      const added = [...new Set(changes.adds ?? [])].filter((id) => !kept.some((a) => a.id === id)).map((id) => ({ id, name: '' }));
      merged.audiences = [...kept, ...added];
    }
    const type = `${this.prefix}${stored ? 'profile_updated' : 'profile_created'}`;
    const outcome = await this.evaluation.run({
      applicationId: app.applicationId,
      session: profileSession(app.applicationId, integrationId, nowIso),
      profile: merged,
      event: { type, attributes: {} },
      now,
      ...which,
    });
    // The profile's event row, as it is stored (or shown, for a dry run).
    const newEvent = { applicationId: app.applicationId, profileId: integrationId, sessionId: '', storeIntegrationId: '', type, attributes: {}, effects: outcome.effects, now: nowIso };
    return { now, nowIso, type, outcome, merged, newEvent };
  }

  private async dryRun(
    call: UpdateProfileCall,
    attributes: Record<string, unknown>,
    evaluable: number[] | undefined,
    responseContent: Set<string>,
  ): Promise<JsonObject> {
    // rules.md 6.1: a dry run evaluates exactly the listed campaigns, even disabled ones.
    const { outcome, merged, newEvent } = await this.evaluateProfileEvent(call, attributes, { evaluableCampaignIds: evaluable });
    const event = unsavedEvent(newEvent);
    return integrationState(responseContent, {
      snapshot: outcome.snapshot,
      result: outcome,
      profile: merged,
      event,
      ...previewCreated(outcome.effects),
    });
  }
}

/** The stored profile with the update applied (a new one when there is none yet; id 0 until stored). */
function mergedProfile(
  stored: ProfileRecord | undefined,
  accountId: number,
  integrationId: string,
  attributes: Record<string, unknown>,
  now: string,
): ProfileRecord {
  const base: ProfileRecord = stored ?? {
    id: 0,
    accountId,
    integrationId,
    created: now,
    lastActivity: now,
    attributes: {},
    closedSessions: 0,
    totalSales: 0,
    sandbox: false,
  };
  return { ...base, attributes: { ...base.attributes, ...attributes }, lastActivity: now };
}

/** A profile update has no session: rules see an empty one of that profile. */
function profileSession(applicationId: number, profileId: string, now: string) {
  const session = emptySession(applicationId, '', now);
  session.profileId = profileId;
  return session;
}

/** audiencesChanges is checked (one audience cannot be added and removed at once) and applied with the update. */
function checkAudiencesChanges(changes: ProfileRequest['audiencesChanges']): void {
  if (!changes) return;
  const adds = new Set(changes.adds ?? []);
  (changes.deletes ?? []).forEach((id, i) => {
    if (adds.has(id)) throw badRequest(`Audience ${id} is both added and deleted`, `/audiencesChanges/deletes/${i}`);
  });
}
