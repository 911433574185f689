// SQL and shapes shared by profile updates, custom events and customer data deletion: the profile
// upsert that merges attributes in SQL (never read-modify-write, so parallel writers lose nothing),
// the event row, and the IntegrationStateV2 of a profile update or an event.
import type { Effect, EvaluationResult } from '../engine/index.js';
import type { JsonObject } from '../actors/port.js';
import type { Queryable } from '../store/index.js';
import type { LedgerWrite } from './commit-effects.js';
import { AUDIENCES_OF_P, eventView, profileView, toEvent as eventOf, toProfile as profileOf, type EventRecord, type ProfileRecord } from './repository.js';

export { profileOf };
import type { AppSnapshot } from './snapshot.js';

/**
 * Creates the profile or merges `attributes` into the stored ones, key by key, in one statement
 * (`attributes || $x`): a concurrent writer of other keys or of the purchase counters loses nothing.
 */
export async function upsertProfile(
  tx: Queryable,
  accountId: number,
  integrationId: string,
  attributes: Record<string, unknown>,
  now: string,
): Promise<{ profile: ProfileRecord; created: boolean }> {
  const [row] = await tx.query(
    `INSERT INTO customer_profiles AS p (account_id, integration_id, created, last_activity, attributes)
     VALUES ($1, $2, $3, $3, $4::jsonb)
     ON CONFLICT (account_id, integration_id)
     DO UPDATE SET attributes = p.attributes || EXCLUDED.attributes, last_activity = EXCLUDED.last_activity
     RETURNING *, (xmax = 0) AS inserted, ${AUDIENCES_OF_P} AS audiences`,
    [accountId, integrationId, now, JSON.stringify(attributes)],
  );
  return { profile: profileOf(row!), created: row!.inserted === true };
}

export interface NewEvent {
  applicationId: number;
  profileId: string;
  sessionId: string;
  storeIntegrationId: string;
  type: string;
  attributes: Record<string, unknown>;
  effects: readonly unknown[];
  now: string;
}

export async function insertEvent(tx: Queryable, e: NewEvent): Promise<EventRecord> {
  const [row] = await tx.query(
    `INSERT INTO events (application_id, created, profile_id, session_id, store_integration_id, type, attributes, effects)
     VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8::jsonb) RETURNING *`,
    [e.applicationId, e.now, e.profileId, e.sessionId, e.storeIntegrationId, e.type, JSON.stringify(e.attributes), JSON.stringify(e.effects)],
  );
  return eventOf(row!);
}

/**
 * Gives the loyalty transactions a commit wrote the id of the event that caused them, and that
 * event its ledger entries (Event `ledgerEntries`): the event of `type` among `events` (the one
 * that carries the effects), or the last one.
 */
export async function withLedgerEntries(tx: Queryable, events: readonly EventRecord[], type: string, writes: readonly LedgerWrite[]): Promise<EventRecord[]> {
  if (writes.length === 0 || events.length === 0) return [...events];
  const found = events.findIndex((e) => e.type === type);
  const index = found >= 0 ? found : events.length - 1;
  const event = events[index]!;
  const written = writes.filter((w) => w.written).map((w) => w.entry.id);
  if (written.length > 0) await tx.query(`UPDATE loyalty_transactions SET event_id = $1 WHERE id = ANY($2::bigint[])`, [event.id, written]);
  const out = [...events];
  out[index] = { ...event, ledgerEntries: writes.map((w) => ({ ...w.entry, eventId: event.id })) };
  return out;
}

/** The event a dry run would have written (id 0: nothing was stored). */
export function unsavedEvent(e: NewEvent): EventRecord {
  return {
    id: 0,
    created: e.now,
    applicationId: e.applicationId,
    profileId: e.profileId,
    storeIntegrationId: e.storeIntegrationId,
    type: e.type,
    attributes: e.attributes,
    sessionId: e.sessionId,
    effects: [...e.effects],
  };
}

export interface StateParts {
  snapshot: AppSnapshot | undefined;
  result: EvaluationResult;
  profile: ProfileRecord | undefined;
  event: EventRecord | undefined;
  createdCoupons: Array<Record<string, unknown>>;
  createdReferrals: Array<Record<string, unknown>>;
  extra?: JsonObject;
}

/**
 * IntegrationStateV2 of a profile update or an event (addendum, Shapes): `effects`,
 * `createdCoupons` and `createdReferrals` always; the rest only when responseContent asks.
 */
export function integrationState(responseContent: ReadonlySet<string>, p: StateParts): JsonObject {
  const state: JsonObject = { effects: p.result.effects, createdCoupons: p.createdCoupons, createdReferrals: p.createdReferrals };
  if (responseContent.has('customerProfile')) state.customerProfile = p.profile ? profileView(p.profile) : null;
  if (responseContent.has('event') && p.event) state.event = eventView(p.event);
  if (responseContent.has('ruleFailureReasons')) state.ruleFailureReasons = p.result.ruleFailureReasons;
  // Loyalty programs and giveaways arrive with their own issues; until then there is nothing to show.
  if (responseContent.has('loyalty')) state.loyalty = { cards: [], programs: {} };
  if (responseContent.has('awardedGiveaways')) state.awardedGiveaways = [];
  if (responseContent.has('triggeredCampaigns')) {
    const ids = new Set(p.result.triggeredCampaignIds);
    state.triggeredCampaigns = (p.snapshot?.campaigns ?? [])
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
  return { ...state, ...p.extra };
}

/** What a dry run would create, shown but not stored. */
export function previewCreated(effects: readonly Effect[]): { createdCoupons: Array<Record<string, unknown>>; createdReferrals: Array<Record<string, unknown>> } {
  return {
    createdCoupons: effects.filter((e) => e.effectType === 'couponCreated').map((e) => ({ campaignId: e.campaignId, ...e.props })),
    createdReferrals: effects.filter((e) => e.effectType === 'referralCreated').map((e) => ({ campaignId: e.campaignId, code: e.props.value, ...e.props })),
  };
}

/** Tries an attempt again (a few times) when a counter ran out between evaluation and commit. */
export const MAX_COMMIT_ATTEMPTS = 8;
