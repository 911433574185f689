import { describe, expect, it } from 'vitest';
import { loadOperations } from '../../services/edge/openapi.js';
import { AppError } from '../../services/shared/index.js';

const ops = new Map(loadOperations().map((o) => [o.operationId, o]));
const op = (id: string) => {
  const o = ops.get(id);
  if (!o) throw new Error(`no operation ${id}`);
  return o;
};
const pointersOf = (fn: () => void): string[] => {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(AppError);
    return (e as AppError).errors.map((x) => x.source?.pointer ?? '');
  }
  throw new Error('expected a validation error');
};

describe('OpenAPI operations', () => {
  it('loads every operation with its express path and security scheme', () => {
    expect(op('updateCustomerSessionV2')).toMatchObject({
      method: 'put',
      expressPath: '/v2/customer_sessions/:customerSessionId',
      security: 'api_key_v1',
      hasBody: true,
    });
    expect(op('createSession').security).toBe('none');
    expect(op('getApplications').security).toBe('management_key');
  });

  it('points at the missing or mistyped body value', () => {
    const v = op('updateCustomerSessionV2');
    expect(pointersOf(() => v.validateBody({ customerSession: { cartItems: [{ sku: 'A', quantity: 1 }] } }))).toEqual([
      '/customerSession/cartItems/0/price',
    ]);
    expect(pointersOf(() => v.validateBody({ customerSession: { couponCodes: 'X' } }))).toEqual(['/customerSession/couponCodes']);
    expect(pointersOf(() => v.validateBody([]))).toEqual(['']);
    expect(() => v.validateBody({ customerSession: { cartItems: [{ sku: 'A', quantity: 2, price: 0 }] } })).not.toThrow();
  });

  it('takes a profile ID of up to 1000 characters and 2000 bytes of UTF-8 (x-maxUtf8Bytes), and a session ID of any length', () => {
    const v = op('updateCustomerSessionV2');
    const fits = ['a'.repeat(1000), 'é'.repeat(1000), '😀'.repeat(500)];
    for (const profileId of fits) expect(() => v.validateBody({ customerSession: { profileId } })).not.toThrow();
    expect(pointersOf(() => v.validateBody({ customerSession: { profileId: '😀'.repeat(501) } }))).toEqual(['/customerSession/profileId']);
    expect(pointersOf(() => v.validateBody({ customerSession: { profileId: 'a'.repeat(1001) } }))).toEqual(['/customerSession/profileId']);
    try {
      v.validateBody({ customerSession: { profileId: '€'.repeat(667) } });
      throw new Error('expected a validation error');
    } catch (e) {
      expect((e as AppError).errors[0]!.details).toBe('/customerSession/profileId must not have more than 2000 bytes of UTF-8');
    }
    expect(pointersOf(() => op('getCustomerInventory').validateParams({ integrationId: '€'.repeat(667) }, {}))).toEqual(['/path/integrationId']);
    expect(() => v.validateParams({ customerSessionId: '😀'.repeat(100_000) }, {})).not.toThrow();
  });

  it('refuses more than 5 identifiers and more than 100 coupon codes', () => {
    const v = op('updateCustomerSessionV2');
    expect(pointersOf(() => v.validateBody({ customerSession: { identifiers: ['1', '2', '3', '4', '5', '6'] } }))).toEqual(['/customerSession/identifiers']);
    expect(pointersOf(() => v.validateBody({ customerSession: { couponCodes: Array.from({ length: 101 }, (_, i) => `C${i}`) } }))).toEqual([
      '/customerSession/couponCodes',
    ]);
  });

  it('coerces query and path parameters and points at bad ones', () => {
    const v = op('updateCustomerSessionV2');
    const query: Record<string, unknown> = { dry: 'true' };
    v.validateParams({ customerSessionId: 'x' }, query);
    expect(query.dry).toBe(true);
    expect(pointersOf(() => v.validateParams({ customerSessionId: 'x' }, { dry: 'maybe' }))).toEqual(['/query/dry']);
    const list = op('getCampaigns');
    const q: Record<string, unknown> = {};
    list.validateParams({ applicationId: '3' }, q);
    expect(q).toEqual({ pageSize: 1000, skip: 0 });
    expect(pointersOf(() => list.validateParams({ applicationId: 'x' }, {}))).toEqual(['/path/applicationId']);
    expect(pointersOf(() => list.validateParams({ applicationId: '3' }, { pageSize: '1001' }))).toEqual(['/query/pageSize']);
  });
});
