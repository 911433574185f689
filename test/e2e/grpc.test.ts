import { credentials, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  IntegrationServiceClient,
  type GetCustomerSessionResponse,
  type IntegrationStateResponse,
} from '../../proto/gen/perkline/v1/integration.js';
import { ERROR_METADATA_KEY } from '../../services/grpc/index.js';
import { cart } from '../helpers/fixtures.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';

describe('gRPC IntegrationService', () => {
  let t: TestNode;
  let shop: ShopSetup;
  let client: IntegrationServiceClient;

  beforeAll(async () => {
    t = await startTestNode('pglite');
    shop = await setupShop(t.url, t.admin);
    client = new IntegrationServiceClient(t.node.grpcAddress, credentials.createInsecure());
  });
  afterAll(async () => {
    client?.close();
    await t?.stop();
  });

  const auth = (key: string) => {
    const md = new Metadata();
    md.set('authorization', `ApiKey-v1 ${key}`);
    return md;
  };
  const update = (id: string, request: Record<string, unknown>, key = shop.apiKey, dry = false) =>
    new Promise<IntegrationStateResponse>((resolve, reject) =>
      client.updateCustomerSession({ customerSessionId: id, request, dry, now: '' }, auth(key), (err, res) => (err ? reject(err) : resolve(res!))),
    );
  const get = (id: string, key = shop.apiKey) =>
    new Promise<GetCustomerSessionResponse>((resolve, reject) =>
      client.getCustomerSession({ customerSessionId: id }, auth(key), (err, res) => (err ? reject(err) : resolve(res!))),
    );

  it('gives 10% off a cart of 120 as setDiscount 12', async () => {
    const res = await update('grpc-1', { customerSession: cart([60, 60]), responseContent: ['customerSession'] });
    expect(res.state?.effects).toEqual([
      { campaignId: shop.campaignId, rulesetId: shop.rulesetId, ruleIndex: 0, ruleName: '10% off', effectType: 'setDiscount', props: { name: '10% off', value: 12 } },
    ]);
    expect(res.state?.customerSession).toMatchObject({ integrationId: 'grpc-1', total: 120, updateCount: 1 });
    const read = await get('grpc-1');
    expect(read.response?.customerSession).toMatchObject({ integrationId: 'grpc-1', total: 120 });
  });

  it('sees the same sessions as the REST API', async () => {
    await update('grpc-shared', { customerSession: cart([150]) });
    const rest = await shop.integration.GET('/v2/customer_sessions/{customerSessionId}', { params: { path: { customerSessionId: 'grpc-shared' } } });
    expect(rest.data?.customerSession.total).toBe(150);
  });

  it('refuses an unknown key with UNAUTHENTICATED', async () => {
    const err = (await update('grpc-2', {}, 'wrong').catch((e) => e)) as ServiceError;
    expect(err.code).toBe(status.UNAUTHENTICATED);
  });

  it('refuses an invalid request with INVALID_ARGUMENT and the error body with its pointer', async () => {
    const err = (await update('grpc-3', { customerSession: { cartItems: [{ sku: 'A', quantity: 1, price: 'x' }] } }).catch((e) => e)) as ServiceError;
    expect(err.code).toBe(status.INVALID_ARGUMENT);
    const body = JSON.parse(String(err.metadata.get(ERROR_METADATA_KEY)[0])) as { body: { errors: Array<{ source: { pointer: string } }> } };
    expect(body.body.errors.map((e) => e.source.pointer)).toContain('/customerSession/cartItems/0/price');
  });

  it("answers NOT_FOUND for another Application's session", async () => {
    const other = await setupShop(t.url, t.admin);
    await update('grpc-private', { customerSession: cart([10]) });
    const err = (await get('grpc-private', other.apiKey).catch((e) => e)) as ServiceError;
    expect(err.code).toBe(status.NOT_FOUND);
  });
});
