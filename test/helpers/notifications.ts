// Notification tests: notification webhooks pointed at the real local receiver, the notifications
// it got (each once, as a deduplicating receiver processes them), and their bodies checked against
// the contract of openapi/notifications.yaml.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { parse as parseYaml } from 'yaml';
import { unwrap, type ManagementClient } from '../../sdk/index.js';
import type { Receiver } from './receiver.js';
import { eventually } from './users.js';

export const ALL_TYPES = [
  'CampaignNotification',
  'CampaignEvaluationTreeChanged',
  'CouponCreated',
  'CouponUpdated',
  'CouponDeleted',
  'AsyncCouponsCreated',
  'CouponsUpdated',
  'CouponsDeleted',
] as const;

const contract = parseYaml(readFileSync(fileURLToPath(new URL('../../openapi/notifications.yaml', import.meta.url)), 'utf8')) as {
  webhooks: Record<string, { post: { requestBody: { content: { 'application/json': { schema: { $ref: string } } } } } }>;
};
const ajv = new Ajv2020({ strict: false, allErrors: true });
// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (a: Ajv2020) => void;
addFormats(ajv);
ajv.addSchema(contract, 'notifications');

/** The contract's errors for a body of the type (empty when it conforms). */
export function contractErrors(type: string, body: unknown): string[] {
  const hook = contract.webhooks[type];
  if (!hook) return [`no notification type ${type} in notifications.yaml`];
  const validate = ajv.getSchema(`notifications${hook.post.requestBody.content['application/json'].schema.$ref}`)!;
  return validate(body) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
}

export interface Notification {
  type: string;
  id: string;
  body: Record<string, any>;
  raw: string;
  headers: Record<string, string | string[] | undefined>;
}

/** Notifications delivered to paths starting with `prefix`, in the order they arrived, each once. */
export function notificationsAt(rx: Receiver, prefix: string, type?: string): Notification[] {
  return [...rx.delivered(prefix).values()]
    .map((r) => ({
      type: String(r.headers['x-notification-type'] ?? ''),
      id: String(r.headers['x-notification-id'] ?? ''),
      body: JSON.parse(r.body) as Record<string, any>,
      raw: r.body,
      headers: r.headers,
    }))
    .filter((n) => type === undefined || n.type === type);
}

/** Waits for `count` notifications (of the type) at the prefix, and returns them. */
export function waitForNotifications(rx: Receiver, prefix: string, count: number, type?: string, timeoutMs = 10_000): Promise<Notification[]> {
  return eventually(() => {
    const got = notificationsAt(rx, prefix, type);
    return got.length >= count ? got : undefined;
  }, timeoutMs);
}

/** A notification webhook of the Application at `${rx.url}${path}`. */
export async function subscribe(
  admin: ManagementClient,
  rx: Receiver,
  applicationId: number,
  path: string,
  notificationTypes: readonly string[] = ALL_TYPES,
  extra: Record<string, unknown> = {},
): Promise<Record<string, any>> {
  return unwrap(
    await admin.POST('/v1/applications/{applicationId}/notification_webhooks', {
      params: { path: { applicationId } },
      body: { url: `${rx.url}${path}`, headers: [], notificationTypes, ...extra } as never,
    }),
  ) as Record<string, any>;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
