import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cart } from '../helpers/fixtures.js';
import { setupShop, startTestNode, unwrap, type ShopSetup, type TestNode } from '../helpers/node.js';

describe('Content-Signature on Integration API calls', () => {
  let t: TestNode;
  let shop: ShopSetup;
  let other: ShopSetup;
  let secret: string;
  let otherSecret: string;
  const body = JSON.stringify({ customerSession: cart([120]) });
  const sign = (raw: string, key: string) => createHmac('sha256', key).update(raw).digest('hex');
  const put = (headers: Record<string, string>, raw = body) =>
    fetch(`${t.url}/v2/customer_sessions/sig-1`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json', Authorization: `ApiKey-v1 ${shop.apiKey}`, ...headers },
      body: raw,
    });
  const expect401 = async (res: Response) => {
    expect(res.status).toBe(401);
    const b = (await res.json()) as { message: string; StatusCode: number; errors: Array<{ source?: { pointer?: string } }> };
    expect(b.StatusCode).toBe(401);
    expect(b.errors[0]?.source?.pointer).toBe('/headers/content-signature');
    return b;
  };

  beforeAll(async () => {
    t = await startTestNode('pglite');
    shop = await setupShop(t.url, t.admin);
    other = await setupShop(t.url, t.admin);
    // The Management API shows an Application's signing secret to those who may change it.
    const secretOf = async (applicationId: number) =>
      unwrap(await t.admin.GET('/v1/applications/{applicationId}', { params: { path: { applicationId } } })).signingSecret!;
    secret = await secretOf(shop.applicationId);
    otherSecret = await secretOf(other.applicationId);
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('passes a request signed with the Application secret', async () => {
    const res = await put({ 'Content-Signature': `signer=${shop.applicationId}; signature=${sign(body, secret)}` });
    expect(res.status).toBe(200);
    // Upper-case hex and no space after the semicolon are fine too.
    const again = await put({ 'Content-Signature': `signer=${shop.applicationId};signature=${sign(body, secret).toUpperCase()}` });
    expect(again.status).toBe(200);
  });

  it('passes a request without the header', async () => {
    expect((await put({})).status).toBe(200);
  });

  it('refuses a wrong signature with 401', async () => {
    await expect401(await put({ 'Content-Signature': `signer=${shop.applicationId}; signature=${sign(body, otherSecret)}` }));
    // Signed for another body.
    await expect401(await put({ 'Content-Signature': `signer=${shop.applicationId}; signature=${sign(body + ' ', secret)}` }));
  });

  it('refuses another Application as signer with 401, even with that Application secret', async () => {
    const b = await expect401(await put({ 'Content-Signature': `signer=${other.applicationId}; signature=${sign(body, otherSecret)}` }));
    expect(b.message).toMatch(/signer/);
  });

  it('refuses a malformed header with 401', async () => {
    for (const h of ['', 'garbage', `signer=${shop.applicationId}`, `signature=${sign(body, secret)}`, `signer=${shop.applicationId}; signature=abc`, `signer=x; signature=${sign(body, secret)}`]) {
      await expect401(await put({ 'Content-Signature': h }));
    }
  });

  it('verifies legacy v1 calls', async () => {
    const v1Body = JSON.stringify({ profileId: 'customer-1', total: 120, cartItems: [{ sku: 'A', quantity: 1, price: 120 }] });
    const v1 = (h: string) =>
      fetch(`${t.url}/v1/customer_sessions/sig-v1`, {
        method: 'PUT',
        headers: { 'Content-Type': 'application/json', Authorization: `ApiKey-v1 ${shop.apiKey}`, 'Content-Signature': h },
        body: v1Body,
      });
    expect((await v1(`signer=${shop.applicationId}; signature=${sign(v1Body, secret)}`)).status).toBe(200);
    await expect401(await v1(`signer=${shop.applicationId}; signature=${sign(v1Body, otherSecret)}`));
  });

  it('checks the signature of a GET (empty body) too', async () => {
    const get = (h: string) =>
      fetch(`${t.url}/v2/customer_sessions/sig-1`, { headers: { Authorization: `ApiKey-v1 ${shop.apiKey}`, 'Content-Signature': h } });
    expect((await get(`signer=${shop.applicationId}; signature=${sign('', secret)}`)).status).toBe(200);
    await expect401(await get(`signer=${shop.applicationId}; signature=${sign('x', secret)}`));
  });
});
