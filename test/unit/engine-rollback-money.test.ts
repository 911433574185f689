import { describe, expect, it } from 'vitest';
import { rollbackEffects, splitLargestRemainder, type Effect } from '../../services/engine/index.js';

const effect = (effectType: string, props: Record<string, unknown>): Effect => ({ campaignId: 1, rulesetId: 2, ruleIndex: 0, ruleName: 'r', effectType, props });

describe('rollbackEffects', () => {
  it('maps committed effects to their rollback effects and skips the rest', () => {
    const committed = [
      effect('acceptCoupon', { value: 'SAVE10' }),
      effect('setDiscount', { name: '10% off', value: 12 }),
      effect('setDiscountPerItem', { name: 'half', value: 5, position: 1 }),
      effect('addLoyaltyPoints', { programId: 3, subLedgerId: '', value: 25, recipientIntegrationId: 'alice', transactionUUID: 't1', name: 'x', startDate: 'a', expiryDate: 'b' }),
      effect('deductLoyaltyPoints', { programId: 3, subLedgerId: '', value: 5, transactionUUID: 't2', name: 'y' }),
      effect('acceptReferral', { value: 'FRIEND' }),
      effect('showNotification', { notificationType: 'info', title: 't', body: 'b' }),
    ];
    expect(rollbackEffects(committed).map((e) => [e.effectType, e.props])).toEqual([
      ['rollbackCoupon', { value: 'SAVE10' }],
      ['rollbackDiscount', { name: '10% off', value: 12 }],
      ['rollbackDiscount', { name: 'half', value: 5, position: 1 }],
      ['rollbackAddedLoyaltyPoints', { programId: 3, subLedgerId: '', value: 25, recipientIntegrationId: 'alice', transactionUUID: 't1' }],
      ['rollbackDeductedLoyaltyPoints', { programId: 3, subLedgerId: '', value: 5, transactionUUID: 't2' }],
      ['rollbackReferral', { value: 'FRIEND' }],
    ]);
  });

  it('rolls amounts back pro rata for a partial return', () => {
    const r = rollbackEffects([effect('setDiscount', { name: 'd', value: 10 }), effect('acceptCoupon', { value: 'C' })], 1 / 3, (x) => Math.round(x * 100) / 100);
    expect(r.map((e) => e.props)).toEqual([{ name: 'd', value: 3.33 }, { value: 'C' }]);
  });
});

describe('splitLargestRemainder', () => {
  it('splits a discount over items so that the parts sum exactly to it', () => {
    // 10% of 3 × 3.33 = 0.999 → 100 cents spread over three equal lines.
    expect(splitLargestRemainder(100, [333, 333, 333])).toEqual([34, 33, 33]);
    expect(splitLargestRemainder(1000, [1, 1, 1, 1, 1, 1, 1])).toEqual([143, 143, 143, 143, 143, 143, 142]);
    expect(splitLargestRemainder(7, [0, 0])).toEqual([0, 0]);
    const parts = splitLargestRemainder(12345, [17, 29, 3, 51]);
    expect(parts.reduce((a, b) => a + b, 0)).toBe(12345);
  });
});
