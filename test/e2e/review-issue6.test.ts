// Review of the issue 6 endpoints (access and input): regressions for defects found in review r3.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unwrap } from '../../sdk/index.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';

type ErrorBody = { message: string; StatusCode: number; errors: Array<{ title: string; source?: { pointer?: string } }> };

describe('review of issue 6 endpoints (r3)', () => {
  let t: TestNode;
  let shop: ShopSetup;

  beforeAll(async () => {
    t = await startTestNode('pglite');
    shop = await setupShop(t.url, t.admin);
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  const raw = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(t.url + path, {
      method,
      headers: { Authorization: `ApiKey-v1 ${shop.apiKey}`, 'Content-Type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: r.status, body: (await r.json()) as ErrorBody };
  };

  it('refuses a path parameter that is not valid percent-encoded UTF-8 with 400, not 500', async () => {
    unwrap(await shop.integration.POST('/v2/customer_audiences', { body: { data: [{ profileIntegrationId: 'pe', audienceId: unwrap(await shop.integration.POST('/v2/audiences', { body: { name: 'pe' } })).id, action: 'add' }] } }));
    for (const path of ['/v1/customer_profiles/%ED%A0%80/inventory', '/v1/customer_profiles/%ED%A0%80/achievements', '/v1/coupon_reservations/customerprofiles/%E0%A4%A', '/v1/customer_profiles/%FF/achievements/1']) {
      const r = await raw('GET', path);
      expect(r.status, path).toBe(400);
      expect(r.body.StatusCode).toBe(400);
      expect(r.body.errors[0]!.source?.pointer).toBe('/path');
    }
    // The same route with a well-formed parameter still answers.
    expect((await raw('GET', '/v1/customer_profiles/pe/inventory?profile=true')).status).toBe(200);
  });
});
