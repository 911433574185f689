// Review of the Management API's input handling: hostile and edge input must be a 4xx with the
// spec's error body and a pointer at the offending value, never a 500 or a wrong answer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManagementClient } from '../../sdk/index.js';
import { newApplication, newCampaign, tenPercentOver100 } from '../helpers/fixtures.js';
import { pointers, policyUser, type ErrorLike } from '../helpers/management-users.js';
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
  describe('deeply nested bodies', () => {
    const nested = (depth: number): string => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
    const send = (method: string, path: string, body: string) =>
      fetch(t.url + path, { method, headers: { authorization: `Bearer ${t.adminToken}`, 'content-type': 'application/json' }, body });

    it('attributes nested thousands of levels deep are a 400 pointing into them, not a 500', async () => {
      const app = JSON.stringify(newApplication()).slice(0, -1);
      const cases: Array<[string, string, string, string]> = [
        ['POST', '/v1/applications', `${app},"attributes":${nested(20_000)}}`, '/attributes'],
        ['PUT', `/v1/applications/${shop.applicationId}`, `${app},"attributes":${nested(20_000)}}`, '/attributes'],
        ['POST', `/v1/applications/${shop.applicationId}/campaigns_search`, `{"attributes":${nested(20_000)}}`, '/attributes'],
        [
          'PUT',
          `/v1/applications/${shop.applicationId}/campaigns/${shop.campaignId}/coupons`,
          `{"batchID":"b","attributes":${nested(20_000)}}`,
          '/attributes',
        ],
      ];
      for (const [method, path, body, under] of cases) {
        const r = await send(method, path, body);
        expect(r.status, `${method} ${path}`).toBe(400);
        const e = (await r.json()) as NonNullable<ErrorLike>;
        expect(e.StatusCode).toBe(400);
        expect(e.errors).toHaveLength(1);
        const pointer = e.errors[0]!.source!.pointer!;
        expect(pointer.startsWith(`${under}/a/a/`)).toBe(true);
        // The first object past 128 levels (the body itself is the first level).
        expect(pointer.split('/')).toHaveLength(129);
      }
      // Nothing was stored: the Application keeps its attributes.
      const kept = unwrap(await admin.GET('/v1/applications/{applicationId}', { params: { path: { applicationId: shop.applicationId } } }));
      expect(kept.attributes).toEqual({});
    });

    it('a body nested up to the limit is accepted and stored as sent', async () => {
      const deepest = JSON.parse(nested(127));
      const r = await admin.POST('/v1/applications', { body: newApplication({ attributes: deepest }) as never });
      expect(r.response.status).toBe(201);
      expect(r.data!.attributes).toEqual(deepest);
    });
  });
  describe('coupon list filter campaignState', () => {
    it('says the same single state as the campaign list: a campaign without ruleset is a draft whatever its window', async () => {
      const applicationId = shop.applicationId;
      const hours = (h: number) => new Date(Date.now() + h * 3600_000).toISOString();
      const windows = { future: { startTime: hours(24), endTime: hours(48) }, past: { startTime: hours(-48), endTime: hours(-24) } };
      for (const [label, window] of Object.entries(windows)) {
        const campaign = unwrap(
          await admin.POST('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId } }, body: newCampaign({ name: label, ...window }) as never }),
        );
        const where = { applicationId, campaignId: campaign.id };
        const made = unwrap(
          await admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons', {
            params: { path: where },
            body: { usageLimit: 1, validCharacters: ['A', 'B', 'C'], couponPattern: `${label.toUpperCase()}-###`, numberOfCoupons: 1 },
          }),
        );
        const code = made.data[0]!.value;
        const listed = async (campaignState: string) =>
          unwrap(await admin.GET('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons/no_total', { params: { path: where, query: { campaignState } as never } })).data.map(
            (c) => c.value,
          );
        const campaignsIn = async (campaignState: string) =>
          unwrap(await admin.GET('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId }, query: { campaignState } as never } })).data.map((c) => c.id);
        for (const state of ['draft', 'scheduled', 'running', 'expired', 'disabled', 'archived']) {
          const inList = (await campaignsIn(state)).includes(campaign.id);
          expect(inList, `${label} campaign in the campaign list under ${state}`).toBe(state === 'draft');
          expect(await listed(state), `${label} campaign's coupons under ${state}`).toEqual(state === 'draft' ? [code] : []);
        }
      }
    });
  });
  describe("the Application's mandatory attributes", () => {
    it('of campaigns are required on create and on an update that replaces the attributes, with the pointer of the missing one', async () => {
      const applicationId = unwrap(
        await admin.POST('/v1/applications', { body: newApplication({ attributesSettings: { mandatory: { campaigns: ['region', 'constructor'], coupons: [] } } }) as never }),
      ).id;
      const create = (attributes?: Record<string, unknown>) =>
        admin.POST('/v1/applications/{applicationId}/campaigns', {
          params: { path: { applicationId } },
          body: newCampaign(attributes === undefined ? {} : { attributes }) as never,
        });
      for (const [attributes, missing] of [
        [undefined, '/attributes/region'],
        [{ constructor: 'x' }, '/attributes/region'],
        // A name that every JS object answers to is not therefore present.
        [{ region: 'EU' }, '/attributes/constructor'],
      ] as const) {
        const r = await create(attributes as Record<string, unknown> | undefined);
        expect(r.response.status, JSON.stringify(attributes)).toBe(400);
        expect(pointers(r.error as ErrorLike)).toEqual([missing]);
      }
      const made = await create({ region: 'EU', constructor: 'x' });
      expect(made.response.status).toBe(201);
      const campaignId = made.data!.id;
      const update = (attributes?: Record<string, unknown>) =>
        admin.PUT('/v1/applications/{applicationId}/campaigns/{campaignId}', {
          params: { path: { applicationId, campaignId } },
          body: { name: 'renamed', ...(attributes === undefined ? {} : { attributes }) } as never,
        });
      const dropped = await update({ constructor: 'x' });
      expect(dropped.response.status).toBe(400);
      expect(pointers(dropped.error as ErrorLike)).toEqual(['/attributes/region']);
      // Without attributes the stored ones are kept, and they hold the mandatory ones.
      const renamed = await update();
      expect(renamed.response.status).toBe(200);
      expect(renamed.data!.attributes).toEqual({ region: 'EU', constructor: 'x' });
      expect(renamed.data!.name).toBe('renamed');
      const listed = unwrap(await admin.GET('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId } } }));
      expect(listed.data.map((c) => c.id)).toEqual([campaignId]);
    });
    it('of coupons count only attributes the body carries, not names every JS object answers to', async () => {
      const applicationId = unwrap(
        await admin.POST('/v1/applications', { body: newApplication({ attributesSettings: { mandatory: { campaigns: [], coupons: ['constructor'] } } }) as never }),
      ).id;
      const campaignId = unwrap(await admin.POST('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId } }, body: newCampaign() as never })).id;
      const where = { applicationId, campaignId };
      const batch = (attributes?: Record<string, unknown>) =>
        admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons', {
          params: { path: where },
          body: { usageLimit: 1, validCharacters: ['A', 'B'], couponPattern: 'MAND-####', numberOfCoupons: 1, ...(attributes ? { attributes } : {}) },
        });
      for (const attributes of [undefined, { other: 1 }]) {
        const r = await batch(attributes);
        expect(r.response.status, JSON.stringify(attributes)).toBe(400);
        expect(pointers(r.error as ErrorLike)).toEqual(['/attributes/constructor']);
      }
      const listed = unwrap(await admin.GET('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons', { params: { path: where } }));
      expect(listed.totalResultSize).toBe(0);
      const ok = await batch({ constructor: 'mail' });
      expect(ok.response.status).toBe(200);
      expect(ok.data!.data[0]!.attributes).toEqual({ constructor: 'mail' });
    });
    it('of campaigns hold for a copy into the Application too; a refused copy copies nothing', async () => {
      const source = shop.applicationId;
      const strict = unwrap(
        await admin.POST('/v1/applications', { body: newApplication({ attributesSettings: { mandatory: { campaigns: ['region'], coupons: [] } } }) as never }),
      ).id;
      const plain = unwrap(await admin.POST('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId: source } }, body: newCampaign({ name: 'plain' }) as never }));
      const count = async (applicationId: number) =>
        unwrap(await admin.GET('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId } } })).totalResultSize;
      const before = [await count(source), await count(strict)];
      const refused = await admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/campaign_duplicate', {
        params: { path: { applicationId: source, campaignId: plain.id } },
        body: { applicationIds: [source, strict] },
      });
      expect(refused.response.status).toBe(400);
      expect(pointers(refused.error as ErrorLike)).toEqual(['/applicationIds/1']);
      expect([await count(source), await count(strict)]).toEqual(before);
      const regional = unwrap(
        await admin.POST('/v1/applications/{applicationId}/campaigns', {
          params: { path: { applicationId: source } },
          body: newCampaign({ name: 'regional', attributes: { region: 'EU' } }) as never,
        }),
      );
      const copied = await admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/campaign_duplicate', {
        params: { path: { applicationId: source, campaignId: regional.id } },
        body: { applicationIds: [strict] },
      });
      expect(copied.response.status).toBe(201);
      expect(copied.data!.data.map((c) => [c.applicationId, c.name, c.attributes])).toEqual([[strict, 'regional', { region: 'EU' }]]);
    });
  });
  describe('writes racing with a delete', () => {
    it('under an Application or campaign being deleted are a 404 with a pointer, never a 500', async () => {
      const send = async (method: string, path: string, body?: unknown) => {
        const r = await fetch(t.url + path, {
          method,
          headers: { authorization: `Bearer ${t.adminToken}`, 'content-type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        const text = await r.text();
        return { what: `${method} ${path}`, status: r.status, body: text ? (JSON.parse(text) as NonNullable<ErrorLike>) : undefined };
      };
      const expires = new Date(Date.now() + 86400_000).toISOString();
      const answers: Array<Awaited<ReturnType<typeof send>>> = [];
      for (let round = 0; round < 6; round++) {
        const s = await setupShop(t.url, t.admin);
        const a = s.applicationId;
        const c = s.campaignId;
        const other = unwrap(await admin.POST('/v1/applications', { body: newApplication() as never })).id;
        const webhook = (await send('POST', '/v1/webhooks', { applicationIds: [a], title: 'h', verb: 'POST', url: 'http://example.com' })).body as unknown as { id: number };
        const writes: Array<Promise<Awaited<ReturnType<typeof send>>>> = [
          new Promise((r) => setTimeout(r, round)).then(() => send('DELETE', `/v1/applications/${a}`)),
        ];
        for (let i = 0; i < 3; i++) {
          writes.push(
            send('POST', `/v1/applications/${a}/campaigns`, newCampaign()),
            send('PUT', `/v1/applications/${a}/campaigns/${c}`, newCampaign()),
            send('PUT', `/v1/applications/${a}`, newApplication()),
            send('POST', `/v1/applications/${a}/api_keys`, { title: 'k', expires }),
            send('POST', `/v1/applications/${a}/campaigns/${c}/rulesets`, tenPercentOver100()),
            send('PUT', `/v1/applications/${a}/campaigns/${c}/rulesets/${s.rulesetId}`, tenPercentOver100()),
            send('DELETE', `/v1/applications/${a}/campaigns/${c}/rulesets/${s.rulesetId}`),
            send('DELETE', `/v1/applications/${a}/campaigns/${c}`),
            send('POST', `/v1/applications/${a}/campaigns/${c}/coupons`, {
              usageLimit: 1,
              validCharacters: ['A', 'B', 'C'],
              couponPattern: `R${round}${i}-####`,
              numberOfCoupons: 50,
            }),
            send('POST', '/v1/webhooks', { applicationIds: [a, other], title: 'h', verb: 'POST', url: 'http://example.com' }),
            send('PUT', `/v1/webhooks/${webhook.id}`, { applicationIds: [a], title: 'h', verb: 'POST', url: 'http://example.com' }),
            send('POST', '/v1/loyalty_programs', { name: `race-${round}-${i}`, title: 'x', subscribedApplications: [a] }),
          );
        }
        answers.push(...(await Promise.all(writes)));
      }
      const refused = answers.filter((r) => r.status >= 300);
      expect(answers.filter((r) => r.status >= 500).map((r) => `${r.what}: ${r.status} ${r.body?.message}`)).toEqual([]);
      for (const r of refused) {
        if (r.what === 'POST /v1/loyalty_programs' && r.status === 400) {
          // Its way of refusing an Application that is not there (any more).
          expect(pointers(r.body)).toEqual(['/subscribedApplications/0']);
          continue;
        }
        expect(r.status, r.what).toBe(404);
        expect(r.body!.StatusCode).toBe(404);
        expect(pointers(r.body).length, r.what).toBe(1);
        expect(pointers(r.body)[0], r.what).toMatch(/^\/(applicationId|campaignId|rulesetId|webhookId|applicationIds\/\d+)$/);
      }
    });
  });
  describe('the NUL character', () => {
    it('in a body value, a property name, a query or a path parameter is a 400 pointing at it', async () => {
      const where = { applicationId: shop.applicationId, campaignId: shop.campaignId };
      const cases: Array<[string, { response: Response; error?: unknown }]> = [
        ['/name', await admin.POST('/v1/applications', { body: newApplication({ name: 'a\u0000b' }) as never })],
        ['/attributes/channel/0', await admin.POST('/v1/applications', { body: newApplication({ attributes: { channel: ['\u0000'] } }) as never })],
        ['/attributes/a\u0000b', await admin.POST('/v1/applications', { body: newApplication({ attributes: { 'a\u0000b': 1 } }) as never })],
        ['/tags/0', await admin.POST('/v1/applications/{applicationId}/campaigns', { params: { path: where }, body: newCampaign({ tags: ['x\u0000'] }) as never })],
        [
          '/query/name',
          await admin.GET('/v1/applications/{applicationId}/campaigns', { params: { path: where, query: { name: 'a\u0000' } } }),
        ],
        [
          '/query/value',
          await admin.GET('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons', { params: { path: where, query: { value: '\u0000' } } }),
        ],
        [
          '/path/integrationID',
          await admin.GET('/v1/loyalty_programs/{programID}/profile/{integrationID}', { params: { path: { programID: 1, integrationID: 'p\u0000' } } }),
        ],
      ];
      for (const [pointer, r] of cases) {
        expect(r.response.status, pointer).toBe(400);
        expect((r.error as ErrorLike)?.StatusCode).toBe(400);
        expect(pointers(r.error as ErrorLike), r.response.url).toEqual([pointer]);
      }
      const names = unwrap(await admin.GET('/v1/applications', {})).data.map((a) => a.name);
      expect(names.some((n) => n?.includes('\u0000'))).toBe(false);
    });

    it('and a lone UTF-16 surrogate are refused the same way; a surrogate pair (an emoji) is kept', async () => {
      const where = { applicationId: shop.applicationId, campaignId: shop.campaignId };
      const send = (path: string, body: string) =>
        fetch(t.url + path, { method: 'POST', headers: { authorization: `Bearer ${t.adminToken}`, 'content-type': 'application/json' }, body });
      const cases: Array<[string, string, string]> = [
        ['/v1/applications', '{"name":"a\\ud800","timezone":"UTC","currency":"EUR"}', '/name'],
        ['/v1/applications', '{"name":"a","timezone":"UTC","currency":"EUR","attributes":{"k":["ok","\\udc00x"]}}', '/attributes/k/1'],
        [`/v1/applications/${where.applicationId}/campaigns_search`, '{"attributes":{"a":"\\ud800"}}', '/attributes/a'],
        [
          `/v1/applications/${where.applicationId}/campaigns/${where.campaignId}/rulesets`,
          '{"rules":[{"title":"\\ud800","condition":true,"effects":[]}],"bindings":[]}',
          '/rules/0/title',
        ],
      ];
      for (const [path, body, pointer] of cases) {
        const r = await send(path, body);
        expect(r.status, `${path} ${body}`).toBe(400);
        const e = (await r.json()) as NonNullable<ErrorLike>;
        expect(pointers(e)).toEqual([pointer]);
      }
      const ok = await admin.POST('/v1/applications', { body: newApplication({ name: 'Shop 😀' }) as never });
      expect(ok.response.status).toBe(201);
      expect(ok.data!.name).toBe('Shop 😀');
    });
  });
  describe('IDs out of the range the database holds', () => {
    it('are a 400 on the parameter or body item that holds them, not on the whole request', async () => {
      const big = 2_147_483_648;
      const a = shop.applicationId;
      const c = shop.campaignId;
      const cases: Array<[string, { response: Response; error?: unknown }]> = [
        ['/path/applicationId', await admin.GET('/v1/applications/{applicationId}', { params: { path: { applicationId: big } } })],
        ['/path/campaignId', await admin.GET('/v1/applications/{applicationId}/campaigns/{campaignId}', { params: { path: { applicationId: a, campaignId: big } } })],
        [
          '/path/rulesetId',
          await admin.GET('/v1/applications/{applicationId}/campaigns/{campaignId}/rulesets/{rulesetId}', {
            params: { path: { applicationId: a, campaignId: c, rulesetId: big } },
          }),
        ],
        ['/path/keyId', await admin.DELETE('/v1/applications/{applicationId}/api_keys/{keyId}', { params: { path: { applicationId: a, keyId: big } } })],
        ['/path/programID', await admin.GET('/v1/loyalty_programs/{programID}', { params: { path: { programID: big } } })],
        ['/path/attributeId', await admin.GET('/v1/attributes/{attributeId}', { params: { path: { attributeId: big } } })],
        ['/path/webhookId', await admin.GET('/v1/webhooks/{webhookId}', { params: { path: { webhookId: big } } })],
        ['/path/userId', await admin.GET('/v1/users/{userId}', { params: { path: { userId: big } } })],
        ['/query/applicationId', await admin.GET('/v1/webhook_logs', { params: { query: { applicationId: big } } })],
        ['/query/campaignGroupId', await admin.GET('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId: a }, query: { campaignGroupId: big } } })],
        [
          '/applicationIds/1',
          await admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/campaign_duplicate', {
            params: { path: { applicationId: a, campaignId: c } },
            body: { applicationIds: [a, big] },
          }),
        ],
        ['/applicationIds/0', await admin.POST('/v1/webhooks', { body: { applicationIds: [big], title: 'h', verb: 'POST', url: 'http://example.com' } })],
        [
          '/subscribedApplicationsIds/0',
          await admin.POST('/v1/attributes', { body: { entity: 'CustomerProfile', name: 'bigIds', type: 'string', subscribedApplicationsIds: [big] } }),
        ],
        ['/subscribedApplications/0', await admin.POST('/v1/loyalty_programs', { body: { name: 'big-ids', title: 'x', subscribedApplications: [big] } })],
        ['/campaignGroups/0', await admin.POST('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId: a } }, body: newCampaign({ campaignGroups: [big] }) as never })],
      ];
      for (const [pointer, r] of cases) {
        expect(r.response.status, pointer).toBe(400);
        expect((r.error as ErrorLike)?.StatusCode).toBe(400);
        expect(pointers(r.error as ErrorLike), pointer).toEqual([pointer]);
      }
      // Below -2^31 too.
      const low = -2_147_483_649;
      const lowPath = await admin.GET('/v1/applications/{applicationId}', { params: { path: { applicationId: low } } });
      expect(lowPath.response.status).toBe(400);
      expect(pointers(lowPath.error as ErrorLike)).toEqual(['/path/applicationId']);
      const lowBody = await admin.PUT('/v1/applications/{applicationId}/campaigns/{campaignId}', {
        params: { path: { applicationId: a, campaignId: c } },
        body: newCampaign({ activeRulesetId: low }) as never,
      });
      expect(lowBody.response.status).toBe(400);
      expect(pointers(lowBody.error as ErrorLike)).toEqual(['/activeRulesetId']);
      // Bigint IDs (sessions, referrals) past what a JSON number holds exactly.
      const huge = 2 ** 63;
      const session = await admin.GET('/v1/applications/{applicationId}/sessions/{sessionId}', { params: { path: { applicationId: a, sessionId: huge } } });
      expect(session.response.status).toBe(400);
      expect(pointers(session.error as ErrorLike)).toEqual(['/path/sessionId']);
      const byReferral = await admin.GET('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons', {
        params: { path: { applicationId: a, campaignId: c }, query: { referralId: huge } },
      });
      expect(byReferral.response.status).toBe(400);
      expect(pointers(byReferral.error as ErrorLike)).toEqual(['/query/referralId']);
      // The largest ID the database holds is simply not found.
      const largest = await admin.GET('/v1/applications/{applicationId}', { params: { path: { applicationId: big - 1 } } });
      expect(largest.response.status).toBe(404);
      expect(pointers(largest.error as ErrorLike)).toEqual(['/applicationId']);
    });
  });
  describe('refusals for lack of permission', () => {
    it('are 403s with the spec body and a pointer at what the caller may not use', async () => {
      const a = shop.applicationId;
      const other = unwrap(await admin.POST('/v1/applications', { body: newApplication() as never })).id;
      const program = unwrap(await admin.POST('/v1/loyalty_programs', { body: { name: 'perm-check', title: 'x', subscribedApplications: [a] } })).id;
      const webhook = unwrap(await admin.POST('/v1/webhooks', { body: { applicationIds: [a, other], title: 'h', verb: 'POST', url: 'http://example.com' } })).id;
      const reader = await policyUser(t, { applications: { [String(a)]: 'read', [String(other)]: 'write' } });
      const cases: Array<[string, { response: Response; error?: unknown }]> = [
        ['/headers/authorization', await reader.POST('/v1/applications', { body: newApplication() as never })],
        ['/headers/authorization', await reader.POST('/v1/attributes', { body: { entity: 'CustomerProfile', name: 'permCheck', type: 'string' } })],
        ['/applicationId', await reader.PUT('/v1/applications/{applicationId}', { params: { path: { applicationId: a } }, body: newApplication() as never })],
        ['/applicationId', await reader.POST('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId: a } }, body: newCampaign() as never })],
        [
          '/programID',
          await reader.PUT('/v1/loyalty_programs/{programID}/profile/{integrationID}/add_points', {
            params: { path: { programID: program, integrationID: 'someone' } },
            body: { points: 1 },
          }),
        ],
        [
          '/webhookId',
          await reader.PUT('/v1/webhooks/{webhookId}', {
            params: { path: { webhookId: webhook } },
            body: { applicationIds: [other], title: 'h', verb: 'POST', url: 'http://example.com' },
          }),
        ],
      ];
      for (const [pointer, r] of cases) {
        expect(r.response.status, r.response.url).toBe(403);
        const e = r.error as ErrorLike;
        expect(e?.StatusCode).toBe(403);
        expect(e?.message).toEqual(expect.any(String));
        expect(pointers(e), r.response.url).toEqual([pointer]);
      }
    });
  });
  describe('date-time values', () => {
    it('that JS cannot read or the database cannot hold are a 400 on their pointer; the range of years 1 to 9999 works', async () => {
      const a = shop.applicationId;
      const where = { applicationId: a, campaignId: shop.campaignId };
      const hourOffset = '2026-01-01T00:00:00+01';
      const range = { rangeStart: '2020-01-01T00:00:00Z', rangeEnd: '2030-01-01T00:00:00Z' };
      const cases: Array<[string, { response: Response; error?: unknown }]> = [
        ['/query/rangeStart', await admin.GET('/v1/access_logs', { params: { query: { ...range, rangeStart: hourOffset } } })],
        ['/query/rangeEnd', await admin.GET('/v1/applications/{applicationId}/access_logs', { params: { path: { applicationId: a }, query: { ...range, rangeEnd: hourOffset } } })],
        ['/query/createdBefore', await admin.GET('/v1/webhook_logs', { params: { query: { createdBefore: hourOffset } } })],
        ['/query/createdBefore', await admin.GET('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId: a }, query: { createdBefore: '0000-01-01T00:00:00Z' } } })],
        [
          '/query/expiresBefore',
          await admin.GET('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons', { params: { path: where, query: { expiresBefore: '9999-12-31T23:59:59-01:00' } } }),
        ],
        [
          '/startTime',
          await admin.POST('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId: a } }, body: newCampaign({ startTime: '9999-12-31T23:59:59-01:00' }) as never }),
        ],
        [
          '/startDate',
          await admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons', {
            params: { path: where },
            body: { usageLimit: 1, validCharacters: ['A', 'B'], couponPattern: 'DATE-######', numberOfCoupons: 1, startDate: '0001-01-01T00:00:00+01:00' },
          }),
        ],
      ];
      for (const [pointer, r] of cases) {
        expect(r.response.status, r.response.url).toBe(400);
        expect((r.error as ErrorLike)?.StatusCode).toBe(400);
        expect(pointers(r.error as ErrorLike), r.response.url).toEqual([pointer]);
      }
      // The bounds themselves, and an offset without colon, are taken.
      const logs = await admin.GET('/v1/access_logs', { params: { query: { rangeStart: '0001-01-01T00:00:00Z', rangeEnd: '9999-12-31T23:59:59Z' } } });
      expect(logs.response.status).toBe(200);
      expect(logs.data!.totalResultSize).toBeGreaterThan(0);
      const made = await admin.POST('/v1/applications/{applicationId}/campaigns', {
        params: { path: { applicationId: a } },
        body: newCampaign({ startTime: '2026-01-01T00:00:00+0100', endTime: '9999-12-31T23:59:59Z' }) as never,
      });
      expect(made.response.status).toBe(201);
      expect([made.data!.startTime, made.data!.endTime]).toEqual(['2025-12-31T23:00:00.000Z', '9999-12-31T23:59:59.000Z']);
    });
  });
  describe('deleting coupons', () => {
    it('refuses exactMatch without value, or a value without letters or digits, instead of deleting every coupon of the campaign', async () => {
      const applicationId = shop.applicationId;
      const campaignId = unwrap(await admin.POST('/v1/applications/{applicationId}/campaigns', { params: { path: { applicationId } }, body: newCampaign() as never })).id;
      const where = { applicationId, campaignId };
      const made = unwrap(
        await admin.POST('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons', {
          params: { path: where },
          body: { usageLimit: 1, validCharacters: ['A', 'B', 'C'], couponPattern: 'KEEP-####', numberOfCoupons: 3 },
        }),
      );
      const r = await admin.DELETE('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons', { params: { path: where, query: { exactMatch: true } } });
      expect(r.response.status).toBe(400);
      expect(pointers(r.error as ErrorLike)).toEqual(['/query/exactMatch']);
      // A value of which nothing counts (only non-alphanumerics, or letters beyond A-Z) would match every code.
      for (const value of ['-', 'Ü', '']) {
        const v = await admin.DELETE('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons', { params: { path: where, query: { value } } });
        expect(v.response.status, JSON.stringify(value)).toBe(400);
        expect(pointers(v.error as ErrorLike)).toEqual(['/query/value']);
      }
      const left = unwrap(await admin.GET('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons', { params: { path: where } }));
      expect(left.data.map((c) => c.value).sort()).toEqual(made.data.map((c) => c.value).sort());
      // With value it deletes exactly that code.
      const one = made.data[0]!.value;
      const d = await admin.DELETE('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons', {
        params: { path: where, query: { value: one.toLowerCase(), exactMatch: true } },
      });
      expect(d.response.status).toBe(204);
      const rest = unwrap(await admin.GET('/v1/applications/{applicationId}/campaigns/{campaignId}/coupons', { params: { path: where } }));
      expect(rest.data.map((c) => c.value).sort()).toEqual(made.data.slice(1).map((c) => c.value).sort());
    });
  });
});
