import { setFlagsFromString } from 'node:v8';
import { afterAll, describe, expect, it } from 'vitest';
import { createEvaluator, type EvaluationInput } from '../../services/engine/index.js';
import { applyPayload, emptySession, type SessionPayload } from '../../services/integration/session-model.js';

// Objects the request path makes for every session update must share their hidden classes (V8
// maps) from one request to the next. Node 20's V8 gives the object of a spread followed by a
// property the spread did not bring (`{ ...item, position }`) a map of its own every time: each one
// allocated in the old generation with its descriptors, for the next full collection to clear, and
// every access to such objects misses its inline cache (see withPosition in
// services/integration/session-model.ts). %HaveSameMap is V8's own test of it.
setFlagsFromString('--allow-natives-syntax');
const sameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)') as (a: object, b: object) => boolean;

/** A request body as the edge parses it: new objects every time, as for every request. */
const payload = (quantity: number): SessionPayload =>
  (
    JSON.parse(
      JSON.stringify({
        customerSession: {
          profileId: 'p1',
          cartItems: [
            { name: 'Shoe', sku: 'S1', quantity, price: 40, category: 'shoes' },
            { name: 'Hat', sku: 'H1', quantity: 1, price: 12.5, category: 'hats', position: 7 },
          ],
        },
      }),
    ) as { customerSession: SessionPayload }
  ).customerSession;

describe('hidden classes of the session update path', () => {
  it('the probe tells objects of one shape from objects of another', () => {
    expect(sameMap({ a: 1, b: 2 }, { a: 3, b: 4 })).toBe(true);
    expect(sameMap({ a: 1, b: 2 }, { a: 1, c: 2 })).toBe(false);
  });

  // The first calls of a site run before V8 has its feedback, and share maps either way; what counts
  // is how the site behaves once warm, as under load (a few hundred calls are enough).
  const WARM = 2000;

  it('cart items with their positions share one map across updates', () => {
    const base = emptySession(1, 's1', '2026-01-01T00:00:00.000Z');
    let first = applyPayload(base, payload(1));
    for (let n = 0; n < WARM; n++) first = applyPayload(base, payload(1));
    const second = applyPayload(first, payload(2));
    expect(first.cartItems.map((i) => i.position)).toEqual([0, 1]);
    expect(second.cartItems.map((i) => i.position)).toEqual([0, 1]);
    expect(second.cartItems[0]).toMatchObject({ name: 'Shoe', sku: 'S1', quantity: 2, price: 40, category: 'shoes', position: 0 });
    expect(sameMap(first.cartItems[0]!, second.cartItems[0]!)).toBe(true);
    // An item that came with a position of its own gets the computed one, in the same map as well.
    expect(second.cartItems[1]!.position).toBe(1);
    expect(sameMap(first.cartItems[1]!, second.cartItems[1]!)).toBe(true);
  });

  describe('evaluation results', () => {
    const inline = createEvaluator({ mode: 'inline' });
    afterAll(() => inline.close());
    const input = (total: number): EvaluationInput => ({
      version: 1,
      application: { id: 1, currency: 'EUR', timezone: 'UTC', attributes: {}, campaignPriority: 'universal', exclusiveCampaignsStrategy: 'listOrder' },
      campaigns: [{ id: 1, name: 'C1', tags: [], attributes: {}, rulesetId: 1, ruleset: { rules: [{ title: 'off', condition: ['>', ['.', 'Session', 'Total'], 1], effects: [['setDiscount', 'off', 1]] }], bindings: [] } }],
      session: { Total: total, Attributes: {}, CartItems: [] },
      profile: { Attributes: {} },
      event: { Type: 'service_session_updated', Attributes: {} },
      now: '2026-03-01T10:00:00Z',
    });

    it('share one map across evaluations', async () => {
      let a = await inline.evaluate(input(10));
      for (let n = 0; n < WARM; n++) a = await inline.evaluate(input(10));
      const b = await inline.evaluate(input(20));
      expect(a.ranIn).toBe('inline');
      expect(a.effects).toHaveLength(1);
      expect(sameMap(a, b)).toBe(true);
    });
  });
});
