import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueNotifications, enqueueOutbound } from '../../services/store/index.js';
import { createTestDb, type AdapterName, type TestDb } from '../helpers/db.js';
import { postgresUp } from '../helpers/services.js';

const adapters: AdapterName[] = postgresUp ? ['pglite', 'postgres'] : ['pglite'];

describe.each(adapters)('outbox (%s adapter)', (adapter) => {
  let t: TestDb;
  let accountId: number;
  let applicationId: number;
  const now = new Date('2026-05-01T10:00:00Z');

  beforeAll(async () => {
    t = await createTestDb(adapter);
    const [acc] = await t.db.query<{ id: number }>(`INSERT INTO accounts (company_name) VALUES ('o') RETURNING id`);
    accountId = acc!.id;
    const [app] = await t.db.query<{ id: number }>(
      `INSERT INTO applications (account_id, name, timezone, currency, signing_secret) VALUES ($1, 'a', 'UTC', 'EUR', 's') RETURNING id`,
      [accountId],
    );
    applicationId = app!.id;
  });
  afterAll(async () => {
    await t?.cleanup();
  });

  it('writes requests only when the transaction commits, each with its own notification id', async () => {
    const request = { accountId, applicationId, kind: 'webhook' as const, endpointId: 1, method: 'POST', url: 'http://x/a', headers: ['A: b'], body: '{"a":1}' };
    await expect(
      t.db.transaction(async (tx) => {
        await enqueueOutbound(tx, [request], now);
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(await t.db.query(`SELECT 1 FROM outbox`)).toEqual([]);
    const ids = await t.db.transaction((tx) => enqueueOutbound(tx, [request, { ...request, body: '{"a":2}' }], now));
    const rows = await t.db.query<{ notification_id: string; body: string; headers: string[]; state: string; attempts: number }>(
      `SELECT notification_id::text, body, headers, state, attempts FROM outbox ORDER BY id`,
    );
    expect(rows.map((r) => r.notification_id)).toEqual(ids);
    expect(new Set(ids).size).toBe(2);
    expect(rows.map((r) => [r.body, r.headers, r.state, r.attempts])).toEqual([
      ['{"a":1}', ['A: b'], 'pending', 0],
      ['{"a":2}', ['A: b'], 'pending', 0],
    ]);
  });

  it('writes one request per body for each enabled notification webhook subscribed to the type', async () => {
    await t.db.query(`DELETE FROM outbox`);
    const endpoint = (url: string, types: string[], enabled = true) =>
      t.db.query(
        `INSERT INTO notification_webhooks (application_id, created, modified, url, notification_types, enabled) VALUES ($1, $2, $2, $3, $4::jsonb, $5)`,
        [applicationId, now.toISOString(), url, JSON.stringify(types), enabled],
      );
    await endpoint('http://x/coupons', ['CouponCreated', 'CouponDeleted']);
    await endpoint('http://x/all', ['CouponCreated', 'CampaignNotification']);
    await endpoint('http://x/off', ['CouponCreated'], false);
    await endpoint('http://x/campaigns', ['CampaignNotification']);
    const n = await t.db.transaction((tx) =>
      enqueueNotifications(tx, { accountId, applicationId, notificationType: 'CouponCreated', bodies: [{ page: 1 }, { page: 2 }] }, now),
    );
    expect(n).toBe(4);
    const rows = await t.db.query<{ url: string; body: string; notification_type: string; kind: string }>(
      `SELECT url, body, notification_type, kind FROM outbox ORDER BY url, body`,
    );
    expect(rows.map((r) => [r.url, JSON.parse(r.body), r.notification_type, r.kind])).toEqual([
      ['http://x/all', { page: 1 }, 'CouponCreated', 'notification'],
      ['http://x/all', { page: 2 }, 'CouponCreated', 'notification'],
      ['http://x/coupons', { page: 1 }, 'CouponCreated', 'notification'],
      ['http://x/coupons', { page: 2 }, 'CouponCreated', 'notification'],
    ]);
    expect(await t.db.transaction((tx) => enqueueNotifications(tx, { accountId, applicationId, notificationType: 'StrikethroughPrice', bodies: [{}] }, now))).toBe(0);
  });
});
