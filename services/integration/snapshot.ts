import { readsFirstSession, readsProfile, type CampaignInput, type RulesetSpec } from '../engine/index.js';
import type { ConfigEvents } from '../shared/index.js';
import { isConfigurationChange, notFound } from '../shared/index.js';
import type { Db } from '../store/index.js';

export interface ApplicationSettings {
  id: number;
  accountId: number;
  name: string;
  currency: string;
  timezone: string;
  caseSensitivity: string;
  attributes: Record<string, unknown>;
  campaignPriority: 'universal' | 'stackable' | 'exclusive';
  exclusiveCampaignsStrategy: 'listOrder' | 'lowestDiscount' | 'highestDiscount';
}

/** A campaign or coupon limit (rules.md 6.4). */
export interface LimitSpec {
  action: string;
  limit: number;
  /** `daily`, `weekly`, `monthly`, `yearly`; anything else counts over the whole life. */
  period?: string;
  /** `Campaign` (default), `Coupon`, `Profile`, `Identifier`. */
  entities?: string[];
}

export interface CampaignSnapshot extends CampaignInput {
  applicationId: number;
  limits: LimitSpec[];
  reevaluateOnReturn: boolean;
  state: 'enabled' | 'disabled' | 'archived';
  startTime: Date | null;
  endTime: Date | null;
  description: string;
  features: string[];
  /** The ruleset reads the Profile root (see engine readsProfile). */
  readsProfile: boolean;
  /** The ruleset reads Session.FirstSession (see engine readsFirstSession). */
  readsFirstSession: boolean;
}

/** A rule-triggered webhook attached to the Application, as its rules may call it. */
export interface WebhookDefinition {
  id: number;
  title: string;
  verb: string;
  url: string;
  headers: string[];
  payload: string;
  params: Array<{ title: string; type: string }>;
  enabled: boolean;
}

export interface AppSnapshot {
  application: ApplicationSettings;
  /** The webhooks attached to the Application, by id. */
  webhooks: Map<number, WebhookDefinition>;
  /** The same webhooks as the engine's facts show them (id to name), when there are any. */
  webhookFacts: Record<string, { name: string }> | undefined;
  /** Every campaign that has an active ruleset and is not archived, in list order. */
  campaigns: CampaignSnapshot[];
  /** Whether a catalog is subscribed by the Application (sessions look up cart SKUs only then). */
  hasCatalogs: boolean;
  /**
   * The notification types that the Application's enabled notification webhooks subscribe to: a
   * commit builds a notification only for these (none, the usual case, costs nothing).
   */
  notificationTypes: ReadonlySet<string>;
  loadedAt: number;
}

export interface SnapshotCacheOptions {
  db: Db;
  events: ConfigEvents;
  /** A backstop for a missed change announcement. Default 30 s. */
  ttlMs?: number;
}

/**
 * Application settings and campaigns with their active rulesets, loaded in one round trip and
 * cached per Application until a change to them is announced.
 */
export class SnapshotCache {
  private readonly cache = new Map<number, Promise<AppSnapshot>>();
  private readonly db: Db;
  private readonly ttlMs: number;
  private readonly unsubscribe: () => void;

  constructor(options: SnapshotCacheOptions) {
    this.db = options.db;
    this.ttlMs = options.ttlMs ?? 30_000;
    this.unsubscribe = options.events.subscribe((change) => {
      if (isConfigurationChange(change)) this.cache.delete(change.applicationId);
    });
  }

  async get(applicationId: number): Promise<AppSnapshot> {
    const cached = this.cache.get(applicationId);
    if (cached) {
      const snap = await cached.catch(() => undefined);
      if (snap && Date.now() - snap.loadedAt < this.ttlMs) return snap;
      if (this.cache.get(applicationId) === cached) this.cache.delete(applicationId);
    }
    const loading = this.load(applicationId);
    this.cache.set(applicationId, loading);
    loading.catch(() => {
      if (this.cache.get(applicationId) === loading) this.cache.delete(applicationId);
    });
    return loading;
  }

  /**
   * The snapshot as stored now, read past the cache (which it leaves alone): for background work
   * on another node than the change's, which may not have heard of the change yet.
   */
  fresh(applicationId: number): Promise<AppSnapshot> {
    return this.load(applicationId);
  }

  invalidate(applicationId: number): void {
    this.cache.delete(applicationId);
  }

  close(): void {
    this.unsubscribe();
    this.cache.clear();
  }

  private async load(applicationId: number): Promise<AppSnapshot> {
    const rows = await this.db.query<Record<string, unknown>>(
      `SELECT a.id AS app_id, a.account_id, a.name AS app_name, a.currency, a.timezone, a.case_sensitivity,
              a.attributes AS app_attributes, a.campaign_priority, a.exclusive_campaigns_strategy,
              EXISTS (SELECT 1 FROM catalog_applications ca WHERE ca.application_id = a.id) AS has_catalogs,
              (SELECT coalesce(json_agg(json_build_object('id', w.id, 'title', w.title, 'verb', w.verb, 'url', w.url, 'headers', w.headers,
                                                          'payload', w.payload, 'params', w.params, 'enabled', w.enabled)), '[]'::json)
                 FROM webhooks w JOIN webhook_applications wa ON wa.webhook_id = w.id WHERE wa.application_id = a.id) AS webhooks,
              (SELECT coalesce(json_agg(DISTINCT t.type), '[]'::json)
                 FROM notification_webhooks nw CROSS JOIN LATERAL jsonb_array_elements_text(nw.notification_types) AS t(type)
                WHERE nw.application_id = a.id AND nw.enabled) AS notification_types,
              c.id, c.name, c.description, c.tags, c.attributes, c.state, c.start_time, c.end_time, c.features,
              c.limits, c.coupon_settings, c.referral_settings, c.reevaluate_on_return,
              r.id AS ruleset_id, r.rules, r.bindings
         FROM applications a
         LEFT JOIN campaigns c ON c.application_id = a.id AND c.state <> 'archived' AND c.active_ruleset_id IS NOT NULL
         LEFT JOIN rulesets r ON r.id = c.active_ruleset_id
        WHERE a.id = $1
        ORDER BY c.id`,
      [applicationId],
    );
    const first = rows[0];
    if (!first) throw notFound('Application');
    const application: ApplicationSettings = {
      id: first.app_id as number,
      accountId: first.account_id as number,
      name: first.app_name as string,
      currency: first.currency as string,
      timezone: first.timezone as string,
      caseSensitivity: first.case_sensitivity as string,
      attributes: first.app_attributes as Record<string, unknown>,
      campaignPriority: first.campaign_priority as ApplicationSettings['campaignPriority'],
      exclusiveCampaignsStrategy: first.exclusive_campaigns_strategy as ApplicationSettings['exclusiveCampaignsStrategy'],
    };
    const campaigns: CampaignSnapshot[] = [];
    for (const r of rows) {
      if (r.id == null || r.ruleset_id == null) continue;
      campaigns.push({
        id: r.id as number,
        applicationId,
        name: r.name as string,
        description: r.description as string,
        tags: r.tags as string[],
        attributes: r.attributes as Record<string, unknown>,
        state: r.state as CampaignSnapshot['state'],
        startTime: (r.start_time as Date | null) ?? null,
        endTime: (r.end_time as Date | null) ?? null,
        features: r.features as string[],
        reevaluateOnReturn: r.reevaluate_on_return === true,
        limits: ((r.limits as LimitSpec[] | null) ?? []).filter((l) => l && typeof l.action === 'string' && typeof l.limit === 'number'),
        ...(r.coupon_settings ? { couponSettings: r.coupon_settings as CampaignInput['couponSettings'] } : {}),
        ...(r.referral_settings ? { referralSettings: r.referral_settings as CampaignInput['referralSettings'] } : {}),
        rulesetId: r.ruleset_id as number,
        ruleset: { rules: r.rules, bindings: r.bindings } as RulesetSpec,
        readsProfile: readsProfile({ rules: r.rules, bindings: r.bindings } as RulesetSpec),
        readsFirstSession: readsFirstSession({ rules: r.rules, bindings: r.bindings } as RulesetSpec),
      });
    }
    const webhooks = new Map((first.webhooks as WebhookDefinition[]).map((w) => [Number(w.id), { ...w, id: Number(w.id) }]));
    return {
      application,
      webhooks,
      webhookFacts: webhooks.size > 0 ? Object.fromEntries([...webhooks].map(([id, w]) => [String(id), { name: w.title }])) : undefined,
      campaigns,
      hasCatalogs: first.has_catalogs === true,
      notificationTypes: new Set(first.notification_types as string[]),
      loadedAt: Date.now(),
    };
  }
}

/**
 * The campaigns to evaluate (rules.md 6.1): enabled and inside their window; in a dry run with
 * evaluableCampaignIds, exactly the listed ones that are not archived, even when disabled.
 */
export function candidateCampaigns(
  campaigns: readonly CampaignSnapshot[],
  now: Date,
  evaluableCampaignIds?: readonly number[],
): CampaignSnapshot[] {
  const t = now.getTime();
  const inWindow = (c: CampaignSnapshot) =>
    (c.startTime === null || c.startTime.getTime() <= t) && (c.endTime === null || c.endTime.getTime() > t);
  if (evaluableCampaignIds && evaluableCampaignIds.length > 0) {
    const wanted = new Set(evaluableCampaignIds);
    return campaigns.filter((c) => wanted.has(c.id) && c.state !== 'archived' && inWindow(c));
  }
  return campaigns.filter((c) => c.state === 'enabled' && inWindow(c));
}
