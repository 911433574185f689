import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unwrap } from '../../sdk/index.js';
import { cart } from '../helpers/fixtures.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';
import { addCampaign, rule } from '../helpers/promotions.js';
import { Receiver } from '../helpers/receiver.js';
import { eventually } from '../helpers/users.js';

interface WebhookLog {
  id: number;
  webhookId: number;
  applicationId: number;
  integrationRequestUuid: string;
  request: { url: string; method: string; headers: Record<string, string>; body: string };
  response: string;
  status?: number | null;
  url: string;
}

/**
 * Rule-triggered webhooks against a real local receiver: rendered from their templates when the
 * effect becomes final, sent by the node's outbox dispatcher with retries, every attempt logged.
 */
describe('rule-triggered webhooks', () => {
  let t: TestNode;
  let shop: ShopSetup;
  let rx: Receiver;

  beforeAll(async () => {
    rx = await Receiver.start();
    t = await startTestNode('pglite', { outbox: { pollMs: 50, backoffMs: 20, maxBackoffMs: 100, timeoutMs: 300, leaseMarginMs: 200 } });
    shop = await setupShop(t.url, t.admin);
  });
  afterAll(async () => {
    await t?.stop();
    await rx?.stop();
  });

  /** A webhook of the shop's Application, and a campaign whose rule triggers it with the given params. */
  const webhookCampaign = async (hook: Record<string, unknown>, params: Record<string, unknown>, campaign: Record<string, unknown> = {}) => {
    const w = unwrap(
      await t.admin.POST('/v1/webhooks', {
        body: { applicationIds: [shop.applicationId], title: 'CRM', verb: 'POST', url: `${rx.url}/hook`, ...hook } as never,
      }),
    );
    await addCampaign(t.admin, shop.applicationId, [rule(['.', 'Session', 'Attributes', 'notify'], [['triggerWebhook', w.id, params]], 'notify CRM')], campaign);
    return w.id;
  };
  const put = (id: string, customerSession: Record<string, unknown>, query = '') =>
    fetch(`${t.url}/v2/customer_sessions/${encodeURIComponent(id)}${query}`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json', Authorization: `ApiKey-v1 ${shop.apiKey}` },
      body: JSON.stringify({ customerSession }),
    });
  const logsOf = async (webhookId: number): Promise<WebhookLog[]> => {
    const page = unwrap(await t.admin.GET('/v1/webhook_logs', { params: { query: { webhookId } as never } })) as unknown as { data: WebhookLog[] };
    return page.data.sort((a, b) => a.id - b.id);
  };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('calls the webhook once when the session closes, with its templates filled in, and logs the attempt', async () => {
    const id = await webhookCampaign(
      {
        url: `${rx.url}/orders/\${$orderId}?tier=\${$Profile.Attributes.tier}`,
        verb: 'PUT',
        headers: ['X-Api-Key: crm-secret-key'],
        params: [
          { title: 'orderId', type: 'string' },
          { title: 'total', type: 'number' },
        ],
        payload: '{"order": "${$orderId}", "total": ${$total}, "tier": "${$Profile.Attributes.tier}", "region": "${$Campaign.Attributes.region}"}',
      },
      { orderId: ['.', 'Session', 'IntegrationId'], total: ['.', 'Session', 'Total'] },
      { attributes: { region: 'north "east"' } },
    );
    unwrap(await shop.integration.PUT('/v2/customer_profiles/{integrationId}', { params: { path: { integrationId: 'wh-ada' } }, body: { attributes: { tier: 'gold & "vip"' } } as never }));
    const sessionId = 'order 1/a';
    const open = await put(sessionId, { ...cart([30, 20], { profileId: 'wh-ada' }), attributes: { notify: true } });
    expect(open.status).toBe(200);
    expect(((await open.json()) as { effects: Array<{ effectType: string }> }).effects.map((e) => e.effectType)).toContain('triggerWebhook');
    // Open: the effect is shown, nothing is sent. A dry close sends nothing either.
    expect((await put(sessionId, { state: 'closed' }, '?dry=true')).status).toBe(200);
    await sleep(300);
    expect(rx.to('/orders')).toEqual([]);

    const close = await put(sessionId, { state: 'closed' });
    expect(close.status).toBe(200);
    const [call] = await eventually(() => (rx.to('/orders').length > 0 ? rx.to('/orders') : undefined));
    expect(call!.method).toBe('PUT');
    expect(call!.url).toBe(`/orders/${encodeURIComponent(sessionId)}?tier=${encodeURIComponent('gold & "vip"')}`);
    expect(JSON.parse(call!.body)).toEqual({ order: sessionId, total: 50, tier: 'gold & "vip"', region: 'north "east"' });
    expect(call!.headers['x-api-key']).toBe('crm-secret-key');
    expect(call!.headers['content-type']).toBe('application/json');
    expect(call!.headers['x-notification-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(call!.headers['x-signature']).toBeUndefined();

    const logs = await eventually(async () => ((await logsOf(id)).length > 0 ? logsOf(id) : undefined));
    expect(logs).toHaveLength(1);
    expect(logs[0]).toMatchObject({ webhookId: id, applicationId: shop.applicationId, status: 200 });
    expect(logs[0]!.url).toBe(`${rx.url}${call!.url}`);
    // The configured header's value (a credential of the receiver) is not in the log.
    expect(logs[0]!.request.headers['X-Api-Key']).toBe('[redacted]');
    expect(logs[0]!.request.body).toBe(call!.body);
    // The log names the Integration API request that made the effect final: its access log entry.
    const range = { rangeStart: new Date(Date.now() - 60_000).toISOString(), rangeEnd: new Date(Date.now() + 60_000).toISOString() };
    const entry = await eventually(async () => {
      const page = unwrap(
        await t.admin.GET('/v1/applications/{applicationId}/access_logs', { params: { path: { applicationId: shop.applicationId }, query: range as never } }),
      ) as unknown as { data: Array<{ uuid: string; requestPayload: string; requestUri: string }> };
      return page.data.find((a) => a.uuid === logs[0]!.integrationRequestUuid);
    });
    expect(entry.requestUri).toBe(`/v2/customer_sessions/${encodeURIComponent(sessionId)}`);
    expect(JSON.parse(entry.requestPayload)).toEqual({ customerSession: { state: 'closed' } });
  });

  it('signs the body with the webhook secret and sends nothing for a disabled webhook', async () => {
    await webhookCampaign({ url: `${rx.url}/signed`, secret: 'shh', payload: '{"n": 1}' }, {});
    const disabled = await webhookCampaign({ url: `${rx.url}/disabled`, enabled: false, payload: '{}' }, {});
    expect((await put('sig-1', { ...cart([10]), attributes: { notify: true }, state: 'closed' })).status).toBe(200);
    const [signed] = await eventually(() => (rx.to('/signed').length > 0 ? rx.to('/signed') : undefined));
    expect(signed!.headers['x-signature']).toBe(`sha256=${createHmac('sha256', 'shh').update(signed!.body).digest('hex')}`);
    await sleep(300);
    expect(rx.to('/disabled')).toEqual([]);
    expect(await logsOf(disabled)).toEqual([]);
  });

  it('retries a failing receiver: 3 failures then success are 4 attempts logged and one delivery', async () => {
    rx.answer('/flaky', [500, 503, 429, 200]);
    const id = await webhookCampaign({ url: `${rx.url}/flaky`, payload: '{"x": 1}' }, {});
    expect((await put('flaky-1', { ...cart([10]), attributes: { notify: true }, state: 'closed' })).status).toBe(200);
    await eventually(() => (rx.delivered('/flaky').size === 1 ? true : undefined));
    const logs = await eventually(async () => {
      const l = await logsOf(id);
      return l.length === 4 ? l : undefined;
    });
    expect(logs.map((l) => l.status)).toEqual([500, 503, 429, 200]);
    // Every attempt carried the same notification id.
    expect(new Set(rx.to('/flaky').map((r) => r.headers['x-notification-id'])).size).toBe(1);
    await sleep(300);
    expect(rx.to('/flaky')).toHaveLength(4);
  });

  it('gives up after exactly 10 attempts on a receiver that always fails, and logs each', async () => {
    rx.answer('/down', 500);
    const id = await webhookCampaign({ url: `${rx.url}/down`, payload: '{}' }, {});
    expect((await put('down-1', { ...cart([10]), attributes: { notify: true }, state: 'closed' })).status).toBe(200);
    await eventually(async () => ((await logsOf(id)).length === 10 ? true : undefined), 15_000);
    await sleep(500);
    expect(rx.to('/down')).toHaveLength(10);
    expect((await logsOf(id)).map((l) => l.status)).toEqual(Array(10).fill(500));
    const [row] = await t.node.db.query<{ state: string; attempts: number }>(`SELECT state, attempts FROM outbox WHERE kind = 'webhook' AND endpoint_id = $1`, [id]);
    expect(row).toMatchObject({ state: 'failed', attempts: 10 });
  });

  it('does not retry a 400, and retries a receiver that does not answer in time', async () => {
    rx.answer('/bad', 400);
    const bad = await webhookCampaign({ url: `${rx.url}/bad`, payload: '{}' }, {});
    rx.answer('/slow', 'hold');
    const slow = await webhookCampaign({ url: `${rx.url}/slow`, payload: '{}' }, {});
    expect((await put('bad-1', { ...cart([10]), attributes: { notify: true }, state: 'closed' })).status).toBe(200);
    await eventually(async () => ((await logsOf(slow)).length >= 2 ? true : undefined), 10_000);
    expect(rx.to('/bad')).toHaveLength(1);
    expect((await logsOf(bad)).map((l) => l.status)).toEqual([400]);
    // A timed-out attempt has no status; the next one is tried.
    expect((await logsOf(slow))[0]!.status ?? null).toBeNull();
    rx.answer('/slow', 200);
    await eventually(() => (rx.delivered('/slow').size === 1 ? true : undefined), 10_000);
  });

  it('answers the Integration API while the receiver has not answered', async () => {
    rx.answer('/held', 'hold');
    await webhookCampaign({ url: `${rx.url}/held`, payload: '{}' }, {});
    const res = await put('held-1', { ...cart([10]), attributes: { notify: true }, state: 'closed' });
    expect(res.status).toBe(200);
    // The session's answer came back; the webhook call is still waiting for its receiver.
    await eventually(() => (rx.to('/held').length > 0 ? true : undefined));
    expect(rx.to('/held').every((r) => r.status === undefined)).toBe(true);
    const next = await put('held-2', { ...cart([10]) });
    expect(next.status).toBe(200);
    rx.answer('/held', 200);
    rx.release();
  });

  it('sends a webhook triggered by a custom event at once, and nothing for a dry event', async () => {
    unwrap(
      await t.admin.POST('/v1/attributes', {
        body: { entity: 'Event', eventType: 'review', name: 'stars', title: 'Stars', type: 'number' } as never,
      }),
    );
    const w = unwrap(await t.admin.POST('/v1/webhooks', { body: { applicationIds: [shop.applicationId], title: 'Reviews', verb: 'POST', url: `${rx.url}/reviews`, payload: '{"stars": ${$stars}}', params: [{ title: 'stars', type: 'number' }] } as never }));
    await addCampaign(t.admin, shop.applicationId, [rule(['=', ['.', 'Event', 'Type'], 'review'], [['triggerWebhook', w.id, { stars: ['.', 'Event', 'Attributes', 'stars'] }]], 'review hook')]);
    const track = (dry: boolean) =>
      fetch(`${t.url}/v2/events${dry ? '?dry=true' : ''}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `ApiKey-v1 ${shop.apiKey}` },
        body: JSON.stringify({ profileId: 'wh-reviewer', type: 'review', attributes: { stars: 5 } }),
      });
    expect((await track(true)).status).toBe(200);
    expect((await track(false)).status).toBe(200);
    const got = await eventually(() => (rx.to('/reviews').length > 0 ? rx.to('/reviews') : undefined));
    await sleep(300);
    expect(rx.to('/reviews')).toHaveLength(1);
    expect(JSON.parse(got[0]!.body)).toEqual({ stars: 5 });
  });

  it('keeps webhook secrets write-only, and refuses a bad one on its pointer', async () => {
    const w = unwrap(await t.admin.POST('/v1/webhooks', { body: { applicationIds: [shop.applicationId], title: 'S', verb: 'POST', url: `${rx.url}/s`, secret: 'k' } as never })) as Record<string, unknown>;
    expect(w).not.toHaveProperty('secret');
    const got = unwrap(await t.admin.GET('/v1/webhooks/{webhookId}', { params: { path: { webhookId: w.id as number } } })) as Record<string, unknown>;
    expect(got).not.toHaveProperty('secret');
    const bad = await t.admin.POST('/v1/webhooks', { body: { applicationIds: [shop.applicationId], title: 'S', verb: 'POST', url: `${rx.url}/s`, secret: 'x'.repeat(1001) } as never });
    expect(bad.response.status).toBe(400);
    expect((bad.error as { errors: Array<{ source: { pointer: string } }> }).errors[0]!.source.pointer).toBe('/secret');
  });
});
