import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unwrap } from '../../sdk/index.js';
import { setupShop, startTestNode, type ShopSetup, type TestNode } from '../helpers/node.js';

// The same flow on a node that evaluates inline and on one that always uses the Piscina pool.
const ruleset = {
  rules: [
    { title: '10% off', condition: ['>', ['.', 'Session', 'Total'], 100], effects: [['setDiscount', '10% off', ['*', ['.', 'Session', 'Total'], 0.1]]] },
    {
      title: 'shoes',
      condition: ['exists', ['.', 'Session', 'CartItems'], [['Item'], ['=', ['.', 'Item', 'Category'], 'shoes']]],
      effects: [['setDiscount', 'shoe bonus', 5]],
    },
    { title: 'broken on purpose', condition: ['>', ['.', 'Session', 'Attributes', 'missing'], 1], effects: [['setDiscount', 'never', 1]] },
  ],
  bindings: [],
  activate: true,
};

const carts = Array.from({ length: 30 }, (_, i) => ({
  profileId: `p${i % 4}`,
  cartItems: Array.from({ length: 1 + (i % 5) }, (_, k) => ({
    sku: `S${k}`,
    quantity: 1 + ((i + k) % 3),
    price: 7.5 * ((i * 7 + k) % 11),
    category: (i + k) % 3 === 0 ? 'shoes' : 'hats',
  })),
}));

describe('evaluation inline and in the worker pool', () => {
  const nodes: Array<{ t: TestNode; shop: ShopSetup }> = [];
  beforeAll(async () => {
    for (const mode of ['inline', 'pool'] as const) {
      const t = await startTestNode('pglite', { evaluator: { mode } });
      nodes.push({ t, shop: await setupShop(t.url, t.admin, { ruleset }) });
    }
  });
  afterAll(async () => {
    for (const n of nodes) await n.t.stop();
  });

  it('gives identical effects and failure reasons', async () => {
    for (const [i, customerSession] of carts.entries()) {
      const [inline, pooled] = await Promise.all(
        nodes.map(async ({ shop }) =>
          unwrap(
            await shop.integration.PUT('/v2/customer_sessions/{customerSessionId}', {
              params: { path: { customerSessionId: `m-${i}` } },
              body: { customerSession, responseContent: ['ruleFailureReasons'] },
            }),
          ),
        ),
      );
      const strip = (s: typeof inline) => ({
        effects: s!.effects.map(({ campaignId: _c, rulesetId: _r, ...e }) => e),
        reasons: (s!.ruleFailureReasons as Array<Record<string, unknown>>).map(({ campaignId: _c, rulesetId: _r, ...e }) => e),
      });
      expect(strip(pooled)).toEqual(strip(inline));
      expect(inline!.ruleFailureReasons).toHaveLength(1);
    }
  });
});
