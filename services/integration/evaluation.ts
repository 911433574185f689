// One evaluation of an Application's campaigns for a session, a profile update or an event:
// snapshot and facts in, the engine's result out (with the facts, which the commit needs).
import type { EvaluationFacts, EvaluationInput, EvaluationResult } from '../engine/index.js';
import { silentLogger, systemClock, uuid, type Clock, type Logger } from '../shared/index.js';
import type { Db, Queryable } from '../store/index.js';
import type { AppRef, JsonObject } from '../actors/port.js';
import type { CounterEntry } from './commit-effects.js';
import { withIdempotency, type IdempotencyScope } from './idempotency.js';
import { loadFacts, type LoadedFacts } from './facts.js';
import { profileRoot, type ProfileRecord } from './repository.js';
import { sessionRoot, type SessionRecord } from './session-model.js';
import { candidateCampaigns, type AppSnapshot, type ApplicationSettings, type CampaignSnapshot, type SnapshotCache } from './snapshot.js';

/** What every Integration use case (sessions, profiles, events) is built with. */
export interface IntegrationServiceOptions {
  db: Db;
  snapshots: SnapshotCache;
  evaluator: Evaluator;
  clock?: Clock;
  /** Prefix of built-in event names (default `service_`). */
  eventPrefix?: string;
  logger?: Logger;
  /** Called after a commit wrote outbound requests (webhook calls), so that they leave at once. */
  outboundWritten?: () => void;
}

/** The parts every Integration use case works with, made once from its options. */
export abstract class IntegrationService {
  protected readonly db: Db;
  protected readonly snapshots: SnapshotCache;
  protected readonly evaluation: CampaignEvaluation;
  protected readonly clock: Clock;
  /** Prefix of built-in event names. */
  readonly prefix: string;
  protected readonly logger: Logger;
  /** Tells the node's dispatcher that a commit wrote outbound requests. */
  protected readonly outboundWritten: () => void;

  constructor(options: IntegrationServiceOptions) {
    this.db = options.db;
    this.snapshots = options.snapshots;
    this.evaluation = new CampaignEvaluation(options.db, options.snapshots, options.evaluator);
    this.clock = options.clock ?? systemClock;
    this.prefix = options.eventPrefix ?? 'service_';
    this.logger = options.logger ?? silentLogger;
    this.outboundWritten = options.outboundWritten ?? (() => {});
  }

  /** The Idempotency-Key scope of a write, when the caller sent a key. */
  protected scopeOf(app: AppRef, key: string | undefined, operation: string, request: unknown): IdempotencyScope | undefined {
    return key === undefined ? undefined : { applicationId: app.applicationId, key, operation, request };
  }

  /** Runs a write under its Idempotency-Key (see withIdempotency). */
  protected idempotent<T>(scope: IdempotencyScope | undefined, run: () => Promise<T>, fromStored: (state: JsonObject) => T): Promise<T> {
    return withIdempotency(this.db, this.clock, scope, run, fromStored);
  }
}

/** What evaluates campaigns: inline or in the worker pool (services/engine createEvaluator). */
export interface Evaluator {
  evaluate(input: EvaluationInput): Promise<EvaluationResult & { ranIn: 'inline' | 'pool' }>;
}

export interface EvaluationRequest {
  applicationId: number;
  session: SessionRecord;
  profile: ProfileRecord | undefined;
  event: { type: string; attributes: Record<string, unknown> };
  now: Date;
  /** Dry runs: evaluate exactly these (rules.md 6.1). */
  evaluableCampaignIds?: readonly number[] | undefined;
  /** Evaluate only these among the candidates (re-evaluation on returns). */
  onlyCampaignIds?: readonly number[] | undefined;
  /**
   * What this session already committed (re-evaluation on returns): its own redemptions and
   * amounts do not count against it.
   */
  own?: readonly CounterEntry[] | undefined;
}

export interface EvaluationOutcome extends EvaluationResult {
  snapshot: AppSnapshot;
  loaded: LoadedFacts;
}

const EMPTY: EvaluationResult = { effects: [], ruleFailureReasons: [], triggeredCampaignIds: [] };

export class CampaignEvaluation {
  constructor(
    private readonly db: Queryable,
    private readonly snapshots: SnapshotCache,
    private readonly evaluator: Evaluator,
  ) {}

  snapshot(applicationId: number): Promise<AppSnapshot> {
    return this.snapshots.get(applicationId);
  }

  async run(req: EvaluationRequest): Promise<EvaluationOutcome> {
    const snapshot = await this.snapshots.get(req.applicationId);
    let campaigns = candidateCampaigns(snapshot.campaigns, req.now, req.evaluableCampaignIds);
    if (req.onlyCampaignIds) {
      const only = new Set(req.onlyCampaignIds);
      campaigns = campaigns.filter((c) => only.has(c.id));
    }
    const s = req.session;
    // Codes and ids the engine makes are drawn from the seed.
    const loaded = await loadFacts(this.db, snapshot.application, campaigns, s, req.now, uuid());
    if (req.own) discountOwn(loaded, req.own);
    // The webhooks a triggerWebhook effect may name (by id, with the name it shows).
    if (snapshot.webhookFacts) loaded.facts.webhooks = snapshot.webhookFacts;
    if (campaigns.length === 0 && s.couponCodes.length === 0 && !s.referralCode) return { ...EMPTY, snapshot, loaded };
    const result = await this.evaluator.evaluate(
      engineInput(snapshot.application, campaigns, {
        session: sessionRoot(s),
        profile: { ...profileRoot(req.profile, s.profileId), ...(loaded.profileLoyalty ? { Loyalty: loaded.profileLoyalty } : {}) },
        event: req.event,
        now: req.now,
        facts: loaded.facts,
      }),
    );
    return { effects: result.effects, ruleFailureReasons: result.ruleFailureReasons, triggeredCampaignIds: result.triggeredCampaignIds, snapshot, loaded };
  }
}

/**
 * The engine's view of an Application and of a campaign, made once per snapshot object: the engine
 * keys what it derives from them (its Application and Campaign roots) by object, so handing it the
 * same objects on every evaluation spares it making them again.
 */
const applicationInputs = new WeakMap<ApplicationSettings, EvaluationInput['application']>();
const campaignInputs = new WeakMap<CampaignSnapshot, EvaluationInput['campaigns'][number]>();

function applicationInput(a: ApplicationSettings): EvaluationInput['application'] {
  let input = applicationInputs.get(a);
  if (!input) {
    input = {
      id: a.id,
      currency: a.currency,
      timezone: a.timezone,
      attributes: a.attributes,
      campaignPriority: a.campaignPriority,
      exclusiveCampaignsStrategy: a.exclusiveCampaignsStrategy,
    };
    applicationInputs.set(a, input);
  }
  return input;
}

function campaignInput(c: CampaignSnapshot): EvaluationInput['campaigns'][number] {
  let input = campaignInputs.get(c);
  if (!input) {
    input = {
      id: c.id,
      name: c.name,
      tags: c.tags,
      attributes: c.attributes,
      rulesetId: c.rulesetId,
      ruleset: c.ruleset,
      ...(c.couponSettings ? { couponSettings: c.couponSettings } : {}),
      ...(c.referralSettings ? { referralSettings: c.referralSettings } : {}),
    };
    campaignInputs.set(c, input);
  }
  return input;
}

/** The engine's input for the Application's candidate campaigns and the given roots and facts. */
export function engineInput(
  a: ApplicationSettings,
  campaigns: readonly CampaignSnapshot[],
  roots: { session: Record<string, unknown>; profile: Record<string, unknown>; event: { type: string; attributes: Record<string, unknown> }; now: Date; facts: EvaluationFacts },
): EvaluationInput {
  return {
    version: 1,
    application: applicationInput(a),
    campaigns: campaigns.map(campaignInput),
    session: roots.session,
    profile: roots.profile,
    event: { Type: roots.event.type, Attributes: roots.event.attributes },
    now: roots.now.toISOString(),
    facts: roots.facts,
  };
}

/** Gives the session back, in its facts, what it committed itself. */
function discountOwn(loaded: LoadedFacts, own: readonly CounterEntry[]): void {
  const { facts } = loaded;
  for (const k of own) {
    if (k.t === 'coupon') {
      const c = facts.coupons?.find((f) => f.id === k.id);
      if (c) {
        c.usageCounter = Math.max(0, c.usageCounter - 1);
        if (c.discountCounter !== undefined) c.discountCounter = Math.max(0, c.discountCounter - k.discount);
      }
    } else if (k.t === 'referral' && facts.referral?.id === k.id) {
      facts.referral.usageCounter = Math.max(0, facts.referral.usageCounter - 1);
      delete facts.referral.alreadyReferred;
    } else if (k.t === 'loyalty' && k.kind === 'deduct') {
      // Its own deduction counts as still available to the session that made it.
      const entry = facts.loyalty?.[String(k.programId)];
      if (entry) {
        if (k.subledgerId === '') entry.balance += k.amount;
        else if (entry.subledgers) entry.subledgers[k.subledgerId] = (entry.subledgers[k.subledgerId] ?? 0) + k.amount;
      }
    } else if (k.t === 'limit') {
      loaded.limitKeys.forEach((key, i) => {
        const fact = facts.limits?.[i];
        if (fact && key.campaignId === k.campaignId && key.couponId === k.couponId && key.action === k.action && key.period === k.period && key.entity === k.entity) {
          fact.remaining += k.amount;
        }
      });
    }
  }
}
