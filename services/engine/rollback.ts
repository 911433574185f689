// Rollback effects (rules.md section 4): what undoes an effect that was committed when a session
// closed, for cancellation, returns and re-evaluation. The integration layer picks the committed
// effects to undo; this maps each to its rollback effect.
import type { Effect } from './types.js';

const ROLLBACK: Record<string, { type: string; props: readonly string[] }> = {
  setDiscount: { type: 'rollbackDiscount', props: ['name', 'value'] },
  setDiscountPerItem: { type: 'rollbackDiscount', props: ['name', 'value', 'position'] },
  setDiscountPerAdditionalCost: { type: 'rollbackDiscount', props: ['name', 'value', 'additionalCost'] },
  acceptCoupon: { type: 'rollbackCoupon', props: ['value'] },
  acceptReferral: { type: 'rollbackReferral', props: ['value'] },
  addLoyaltyPoints: { type: 'rollbackAddedLoyaltyPoints', props: ['programId', 'subLedgerId', 'value', 'recipientIntegrationId', 'transactionUUID'] },
  deductLoyaltyPoints: { type: 'rollbackDeductedLoyaltyPoints', props: ['programId', 'subLedgerId', 'value', 'transactionUUID'] },
};

/**
 * The rollback effects of committed effects, in order; effects that nothing undoes (notifications,
 * rejections, ...) have none. `share` (0..1, default 1) rolls amounts back pro rata, for returns.
 */
export function rollbackEffects(committed: readonly Effect[], share = 1, round: (amount: number) => number = (x) => x): Effect[] {
  const out: Effect[] = [];
  for (const e of committed) {
    const r = ROLLBACK[e.effectType];
    if (!r) continue;
    const props: Record<string, unknown> = {};
    for (const k of r.props) if (e.props[k] !== undefined) props[k] = e.props[k];
    if (share !== 1 && typeof props.value === 'number' && e.effectType !== 'acceptCoupon' && e.effectType !== 'acceptReferral') {
      props.value = round((props.value as number) * share);
    }
    out.push({ campaignId: e.campaignId, rulesetId: e.rulesetId, ruleIndex: e.ruleIndex, ruleName: e.ruleName, effectType: r.type, props });
  }
  return out;
}
