import { credentials, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IntegrationServiceClient } from '../../proto/gen/perkline/v1/integration.js';
import { ERROR_METADATA_KEY } from '../../services/grpc/index.js';
import { RateLimiter } from '../../services/edge/index.js';
import { cart } from '../helpers/fixtures.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';

describe('RateLimiter', () => {
  it('passes a burst, then refills continuously', () => {
    const l = new RateLimiter({ ratePerSecond: 10, burst: 3 });
    expect([l.take('k', 0), l.take('k', 0), l.take('k', 0)]).toEqual([0, 0, 0]);
    expect(l.take('k', 0)).toBe(1);
    expect(l.take('k', 99)).toBe(1);
    expect(l.take('k', 150)).toBe(0);
    expect(l.take('k', 150)).toBe(1);
    expect(l.take('other', 150)).toBe(0);
  });

  it('answers Retry-After in whole seconds of at least one', () => {
    const l = new RateLimiter({ ratePerSecond: 0.25, burst: 1 });
    expect(l.take('k', 0)).toBe(0);
    expect(l.take('k', 0)).toBe(4);
    expect(l.take('k', 3500)).toBe(1);
  });

  it('is off with ratePerSecond 0', () => {
    const l = new RateLimiter({ ratePerSecond: 0, burst: 0 });
    for (let i = 0; i < 10_000; i++) expect(l.take('k', 0)).toBe(0);
    expect(l.size).toBe(0);
  });

  it('drops idle buckets so memory stays bounded', () => {
    const l = new RateLimiter({ ratePerSecond: 100, burst: 10, maxBuckets: 1000 });
    for (let i = 0; i < 5000; i++) l.take(i, i);
    expect(l.size).toBeLessThanOrEqual(1000);
    // Keys idle for burst/rate (100 ms) are full again and gone after the next sweep.
    l.take('late', 10_000);
    expect(l.size).toBe(1);
  });
});

describe('RateLimiter under more active keys than it holds', () => {
  it('forgets the least recently used keys, not the busy one that was inserted first', () => {
    const l = new RateLimiter({ ratePerSecond: 1, burst: 2, maxBuckets: 100 });
    expect(l.take('hot', 0)).toBe(0);
    expect(l.take('hot', 0)).toBe(0);
    // The hot key is empty now; many other keys arrive while it keeps being used (and refused).
    for (let i = 0; i < 300; i++) {
      l.take(`cold-${i}`, 1 + i * 0.001);
      expect(l.take('hot', 1 + i * 0.001)).toBeGreaterThan(0);
    }
    expect(l.size).toBeLessThanOrEqual(100);
  });
});

describe('Integration API rate limit', () => {
  let t: TestNode;
  let shop: ShopSetup;
  let other: ShopSetup;
  let n = 0;
  // Raw fetch: the SDK retries 429 (see sdk/index.ts); these requests must see it.
  const put = (key: string) =>
    fetch(`${t.url}/v2/customer_sessions/rl-${++n}`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json', Authorization: `ApiKey-v1 ${key}` },
      body: JSON.stringify({ customerSession: cart([120]) }),
    });

  beforeAll(async () => {
    // One token per 2 s: the burst and the sixth request fit in that window even on a busy machine.
    t = await startTestNode('pglite', { rateLimit: { ratePerSecond: 0.5, burst: 5 } });
    shop = await setupShop(t.url, t.admin, { retries: 0 });
    other = await setupShop(t.url, t.admin, { retries: 0 });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('refuses the request after the burst with 429, Retry-After and the error body', async () => {
    const first = await Promise.all(Array.from({ length: 5 }, () => put(shop.apiKey)));
    expect(first.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    const sixth = await put(shop.apiKey);
    expect(sixth.status).toBe(429);
    const retryAfter = Number(sixth.headers.get('retry-after'));
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(2);
    const body = (await sixth.json()) as { message: string; StatusCode: number; errors: Array<{ title: string; source?: { pointer?: string } }> };
    expect(body.StatusCode).toBe(429);
    expect(body.message).toMatch(/rate limit/i);
    expect(body.errors[0]?.title).toBe('Too Many Requests');
    expect(body.errors[0]?.source?.pointer).toBe('/headers/authorization');

    // Another Application's key has its own bucket.
    expect((await put(other.apiKey)).status).toBe(200);

    // The SDK without retries hands the 429 back.
    const { data, response } = await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
      params: { path: { customerSessionId: 'rl-sdk' } },
      body: { customerSession: cart([120]) as never },
    });
    expect(response.status).toBe(429);
    expect(data).toBeUndefined();

    await new Promise((r) => setTimeout(r, retryAfter * 1000 + 50));
    expect((await put(shop.apiKey)).status).toBe(200);
  });

  it('shares one bucket between REST and gRPC calls of a key', async () => {
    const third = await setupShop(t.url, t.admin, { retries: 0 });
    const client = new IntegrationServiceClient(t.node.grpcAddress, credentials.createInsecure());
    try {
      const md = new Metadata();
      md.set('authorization', `ApiKey-v1 ${third.apiKey}`);
      const grpcUpdate = (id: string) =>
        new Promise<void>((resolve, reject) =>
          client.updateCustomerSession({ customerSessionId: id, request: { customerSession: cart([120]) }, dry: false, now: '' }, md, (err) =>
            err ? reject(err) : resolve(),
          ),
        );
      const rest = await Promise.all(Array.from({ length: 3 }, () => put(third.apiKey)));
      expect(rest.map((r) => r.status)).toEqual([200, 200, 200]);
      await grpcUpdate('rl-grpc-1');
      await grpcUpdate('rl-grpc-2');
      const err = (await grpcUpdate('rl-grpc-3').catch((e) => e)) as ServiceError;
      expect(err.code).toBe(status.RESOURCE_EXHAUSTED);
      const detail = JSON.parse(String(err.metadata.get(ERROR_METADATA_KEY)[0])) as { kind: string; retryAfter: number; body: { StatusCode: number } };
      expect(detail).toMatchObject({ kind: 'too_many_requests', body: { StatusCode: 429 } });
      expect(detail.retryAfter).toBeGreaterThanOrEqual(1);
      expect((await put(third.apiKey)).status).toBe(429);
    } finally {
      client.close();
    }
  });

  it('counts the requests of a key, and nothing else against it', async () => {
    const fourth = await setupShop(t.url, t.admin, { retries: 0 });
    // Unknown keys are refused before any bucket: the same client's requests cost the key nothing.
    const unknown = await Promise.all(Array.from({ length: 10 }, () => put('not-a-key')));
    expect(unknown.map((r) => r.status)).toEqual(unknown.map(() => 401));
    const burst = await Promise.all(Array.from({ length: 5 }, () => put(fourth.apiKey)));
    expect(burst.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    // A request of the key with a signature that does not verify is still the key's request: it
    // takes a token (the limit is checked before the HMAC is computed) and is refused.
    const signed = await fetch(`${t.url}/v2/customer_sessions/rl-sig-${++n}`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json', Authorization: `ApiKey-v1 ${fourth.apiKey}`, 'Content-Signature': `signer=${fourth.applicationId}; signature=00` },
      body: JSON.stringify({ customerSession: cart([120]) }),
    });
    expect(signed.status).toBe(429);
  });

});
