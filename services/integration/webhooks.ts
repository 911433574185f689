// Rule-triggered webhooks (service-spec "Rule-triggered webhooks"): a `triggerWebhook` effect that
// becomes final (a session close, an event, a profile update) becomes an HTTP request in the
// outbox, written in the commit's transaction. Its URL and payload are the webhook's templates
// filled in as of the commit: the effect's parameters, the campaign's attributes and the
// profile's attributes. services/notify sends it.
import type { Effect } from '../engine/index.js';
import { jsonValue, parseTemplate, renderTemplate, urlValue, type TemplatePart, type TemplateValues } from '../shared/index.js';
import type { OutboundRequest, Queryable } from '../store/index.js';
import type { ApplicationSettings, CampaignSnapshot, WebhookDefinition } from './snapshot.js';

export interface WebhookCalls {
  app: ApplicationSettings;
  campaigns: readonly CampaignSnapshot[];
  webhooks: ReadonlyMap<number, WebhookDefinition>;
  profileId: string;
  /** The Integration API request that made the effects final. */
  requestUuid?: string | undefined;
}

/** The effects that call a webhook. */
export const webhookEffects = (effects: readonly Effect[]): Effect[] => effects.filter((e) => e.effectType === 'triggerWebhook');

/**
 * The requests of the webhooks that `effects` trigger, rendered in the caller's transaction. A
 * webhook that is disabled, or no longer attached to the Application, sends nothing. Profile
 * attributes are read only when a template uses them.
 */
export async function webhookRequests(tx: Queryable, c: WebhookCalls, effects: readonly Effect[]): Promise<OutboundRequest[]> {
  const calls = effects
    .map((e) => ({ effect: e, webhook: c.webhooks.get(Number(e.props.webhookId)) }))
    .filter((x): x is { effect: Effect; webhook: WebhookDefinition } => x.webhook !== undefined && x.webhook.enabled);
  if (calls.length === 0) return [];
  const templates = calls.map(({ webhook }) => ({ url: parseTemplate(webhook.url), payload: parseTemplate(webhook.payload) }));
  const readsProfile = templates.some((t) => [...t.url, ...t.payload].some((p) => 'root' in p && p.root === 'Profile'));
  let profileAttributes: Record<string, unknown> = {};
  if (readsProfile && c.profileId !== '') {
    const [row] = await tx.query<{ attributes: Record<string, unknown> }>(
      `SELECT attributes FROM customer_profiles WHERE account_id = $1 AND integration_id = $2`,
      [c.app.accountId, c.profileId],
    );
    profileAttributes = row?.attributes ?? {};
  }
  return calls.map(({ effect, webhook }, i) => {
    const params = (effect.props.params ?? {}) as Record<string, unknown>;
    const campaign = c.campaigns.find((x) => x.id === effect.campaignId);
    const values: TemplateValues = (p) =>
      'param' in p ? params[p.param] : p.root === 'Profile' ? profileAttributes[p.name] : campaign?.attributes?.[p.name];
    const t = templates[i]!;
    return {
      accountId: c.app.accountId,
      applicationId: c.app.id,
      kind: 'webhook',
      endpointId: webhook.id,
      campaignId: effect.campaignId > 0 ? effect.campaignId : undefined,
      integrationRequestUuid: c.requestUuid,
      method: webhook.verb,
      url: renderTemplate(t.url, values, urlValue),
      headers: webhook.headers,
      body: renderTemplate(t.payload as TemplatePart[], values, jsonValue),
    } satisfies OutboundRequest;
  });
}
