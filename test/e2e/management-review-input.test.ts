// Review of the Management API's input handling: hostile and edge input must be a 4xx with the
// spec's error body and a pointer at the offending value, never a 500 or a wrong answer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManagementClient } from '../../sdk/index.js';
import { pointers, type ErrorLike } from '../helpers/management-users.js';
import { setupShop, startTestNode, unwrap, type ShopSetup, type TestNode } from '../helpers/node.js';
import { postgresUp } from '../helpers/services.js';

describe.skipIf(!postgresUp)('Management API review: input robustness', () => {
  let t: TestNode;
  let shop: ShopSetup;
  let admin: ManagementClient;

  beforeAll(async () => {
    t = await startTestNode('postgres');
    admin = t.admin;
    shop = await setupShop(t.url, t.admin);
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  describe('paging', () => {
    it('a skip past what the database can take is a 400 on /query/skip, on every list', async () => {
      const where = { applicationId: shop.applicationId, campaignId: shop.campaignId };
      for (const skip of ['1e400', '99999999999999999999']) {
        const query = { skip: skip as never };
        const answers = [
          await admin.GET('/v1/applications', { params: { query } }),
          await admin.GET('/v1/applications/{applicationId}/campaigns', { params: { path: where, query } }),
          await admin.GET('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons', { params: { path: where, query } }),
          await admin.GET('/v1/attributes', { params: { query } }),
          await admin.GET('/v1/users', { params: { query } }),
          await admin.GET('/v1/webhook_logs', { params: { query } }),
        ];
        for (const r of answers) {
          expect(r.response.status, `skip=${skip} ${r.response.url}`).toBe(400);
          const e = r.error as ErrorLike;
          expect(e?.StatusCode).toBe(400);
          expect(pointers(e)).toEqual(['/query/skip']);
        }
      }
    });

    it('the largest skip that is a safe integer is an empty page with the real total', async () => {
      const r = unwrap(await admin.GET('/v1/applications', { params: { query: { skip: Number.MAX_SAFE_INTEGER } } }));
      expect(r.data).toEqual([]);
      expect(r.totalResultSize).toBe(1);
    });
  });
});
