import { afterAll, describe, expect, it } from 'vitest';
import { createEvaluator, evaluate, type EvaluationInput, type RuleSpec } from '../../services/engine/index.js';
import runInWorker from '../../services/engine/worker.js';

/** A small deterministic PRNG (mulberry32), so a failing corpus can be replayed. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ruleTemplates: RuleSpec[] = [
  { title: '10% off', condition: ['>', ['.', 'Session', 'Total'], 100], effects: [['setDiscount', '10% off', ['*', ['.', 'Session', 'Total'], 0.1]]] },
  {
    title: 'shoes',
    condition: ['exists', ['.', 'Session', 'CartItems'], [['Item'], ['=', ['.', 'Item', 'Category'], 'shoes']]],
    effects: [['forEach', ['cartItemsMatching', [['Item'], ['=', ['.', 'Item', 'Category'], 'shoes']]], [['Item'], ['setDiscountPerItem', 'shoe', ['round', ['*', ['.', 'Item', 'Price'], 0.15], 2]]]]],
  },
  { title: 'big basket', condition: ['>=', ['sum', ['.', 'Session', 'CartItems'], [['Item'], ['.', 'Item', 'Quantity']]], 5], effects: [['setDiscount', 'bulk', 7.5]] },
  { title: 'broken', condition: ['>', ['.', 'Session', 'Attributes', 'missing'], 1], effects: [['setDiscount', 'never', 1]] },
  { title: 'gold', condition: ['=', ['.|', 'Profile', 'Attributes', 'tier', 'none'], 'gold'], effects: [['setDiscount', 'gold', ['/', ['.', 'Session', 'Total'], 3]], ['setDiscount', 'bad', ['/', 1, 0]]] },
  { title: 'dear items', condition: ['>', ['count', ['filter', ['.', 'Session', 'CartItems'], [['i'], ['>', ['.', 'i', 'Price'], 30]]]], 0], effects: [['setDiscount', 'dear', ['max', ['map', ['.', 'Session', 'CartItems'], [['i'], ['.', 'i', 'Price']]]]]] },
];

function corpusInput(rand: () => number, n: number): EvaluationInput {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const cartItems = Array.from({ length: 1 + Math.floor(rand() * 8) }, (_, k) => ({
    Name: `item ${k}`,
    Sku: `S${k}`,
    Quantity: 1 + Math.floor(rand() * 3),
    Price: Math.round(rand() * 6000) / 100,
    Category: pick(['shoes', 'hats', 'socks']),
    Position: k,
    Attributes: {},
  }));
  const cartTotal = cartItems.reduce((s, i) => s + i.Price * i.Quantity, 0);
  const campaigns = Array.from({ length: 1 + Math.floor(rand() * 3) }, (_, c) => {
    const rules = ruleTemplates.filter(() => rand() < 0.5);
    return { id: c + 1, name: `C${c + 1}`, tags: [], attributes: {}, rulesetId: 1000 + n * 10 + c, ruleset: { rules, bindings: [] } };
  });
  return {
    version: 1,
    application: { id: 1, currency: pick(['EUR', 'USD', 'JPY']), timezone: 'UTC', attributes: {}, campaignPriority: 'universal', exclusiveCampaignsStrategy: 'listOrder' },
    campaigns,
    session: { Total: Math.round(cartTotal * 100) / 100, Attributes: {}, CartItems: cartItems },
    profile: { Attributes: rand() < 0.5 ? { tier: 'gold' } : {} },
    event: { Type: 'service_session_updated', Attributes: {} },
    now: '2026-03-01T10:00:00Z',
    budgetMs: 1000,
  };
}

describe('createEvaluator', () => {
  const pooled = createEvaluator({ mode: 'pool', poolSize: 2 });
  const inline = createEvaluator({ mode: 'inline' });
  afterAll(async () => {
    await pooled.close();
    await inline.close();
  });

  it('gives identical results inline and in the pool on a randomized corpus', async () => {
    const rand = random(20260301);
    const corpus = Array.from({ length: 1000 }, (_, n) => corpusInput(rand, n));
    const results = await Promise.all(corpus.map(async (i) => [await inline.evaluate(i), await pooled.evaluate(i)] as const));
    let effects = 0;
    for (const [a, b] of results) {
      expect(a.ranIn).toBe('inline');
      expect(b.ranIn).toBe('pool');
      const { ranIn: _a, ...left } = a;
      const { ranIn: _b, ...right } = b;
      expect(right).toEqual(left);
      effects += left.effects.length;
    }
    expect(effects).toBeGreaterThan(0);
  });

  it('returns a worker-side error as an error and keeps the pool serving', async () => {
    const broken = { ...corpusInput(random(1), 0), campaigns: null } as unknown as EvaluationInput;
    await expect(pooled.evaluate(broken)).rejects.toThrow(/rule worker failed/);
    const good = corpusInput(random(2), 1);
    const { ranIn, ...result } = await pooled.evaluate(good);
    expect(ranIn).toBe('pool');
    expect(result).toEqual(evaluate(good));
  });

  it('picks inline or pool by estimated cost in auto mode', async () => {
    const auto = createEvaluator({ mode: 'auto', costThreshold: 10, poolSize: 1 });
    try {
      const small = { ...corpusInput(random(3), 0), campaigns: [] };
      expect((await auto.evaluate(small)).ranIn).toBe('inline');
      const large = corpusInput(random(3), 0);
      large.campaigns = [{ id: 1, name: 'C', tags: [], attributes: {}, rulesetId: 5000, ruleset: { rules: ruleTemplates, bindings: [] } }];
      large.session = { ...large.session, CartItems: Array.from({ length: 5 }, (_, k) => ({ Sku: `S${k}`, Quantity: 1, Price: 1, Category: 'hats', Position: k })) };
      expect((await auto.evaluate(large)).ranIn).toBe('pool');
    } finally {
      await auto.close();
    }
  });
});

describe('worker', () => {
  it('answers a versioned request with the result', () => {
    const input = corpusInput(random(4), 0);
    expect(runInWorker({ version: 1, input })).toEqual({ version: 1, ok: true, result: evaluate(input) });
  });

  it('answers an unknown message version with an error as data', () => {
    expect(runInWorker({ version: 2, input: corpusInput(random(5), 0) } as unknown as Parameters<typeof runInWorker>[0])).toMatchObject({ ok: false, error: { message: expect.stringContaining('version') } });
  });

  it('answers a malformed input with an error as data instead of throwing', () => {
    const response = runInWorker({ version: 1, input: { ...corpusInput(random(6), 0), campaigns: null } as unknown as EvaluationInput });
    expect(response).toMatchObject({ ok: false, error: { message: expect.any(String) } });
  });
});
