// npm run bench:engine — evaluations per second (one core, inline) and latency of the rule engine
// for 1, 10, 100 and 1,000 active campaigns of realistic rules on a 20-line cart, beside the same
// workload in json-rules-engine run in this process. Prints a table; asserts nothing.
import { Engine as JsonRulesEngine } from 'json-rules-engine';
import { evaluate, type CampaignInput, type EvaluationInput } from '../services/engine/index.js';

const CATEGORIES = ['shoes', 'hats', 'socks', 'bags', 'shirts'];
const durationMs = Number(process.env.BENCH_MS ?? 2000);

// A campaign: an item of a category above a price, a gold or platinum customer, a valid coupon of
// the campaign (json-rules-engine: the campaign's code among the session's codes), a minimum
// total; 10% off.
function campaignSpec(i: number) {
  // Every campaign has its own thresholds (no two conditions are the same), like real campaigns.
  return { category: CATEGORIES[i % CATEGORIES.length]!, minPrice: 5 + i / 100, code: `CODE${i % 50}`, minTotal: 50 + i / 10 };
}

type Order = 'items first' | 'coupon first';

function perklineCampaign(i: number, order: Order): CampaignInput {
  const s = campaignSpec(i);
  const items = ['exists', ['.', 'Session', 'CartItems'], [['Item'], ['and', ['=', ['.', 'Item', 'Category'], s.category], ['>', ['.', 'Item', 'Price'], s.minPrice]]]];
  const tier = ['in', ['.', 'Profile', 'Attributes', 'tier'], ['list', 'gold', 'platinum']];
  const total = ['>', ['.', 'Session', 'Total'], s.minTotal];
  const condition = order === 'items first' ? ['and', items, tier, ['couponValid'], total] : ['and', ['couponValid'], total, tier, items];
  return {
    id: i + 1,
    name: `campaign ${i}`,
    tags: [],
    attributes: {},
    rulesetId: i + 1,
    ruleset: {
      bindings: [],
      rules: [
        {
          title: '10% off',
          condition,
          effects: [['setDiscount', '10% off', ['*', ['.', 'Session', 'Total'], 0.1]]],
        },
      ],
    },
  };
}

const cartItems = Array.from({ length: 20 }, (_, k) => ({
  Name: `item ${k}`,
  Sku: `SKU${k}`,
  Quantity: 1 + (k % 3),
  Price: 3 + ((k * 7) % 40),
  Category: CATEGORIES[k % CATEGORIES.length]!,
  Position: k,
  Attributes: {},
}));
const total = cartItems.reduce((s, i) => s + i.Price * i.Quantity, 0);

// The session carries two codes; like the integration layer, the bench resolves them to the
// stored coupons of the campaigns that have them (coupon codes are unique in an Application).
const SESSION_CODES = ['CODE3', 'CODE7'];

function input(campaigns: CampaignInput[]): EvaluationInput {
  const coupons = campaigns
    .map((c, i) => ({ c, code: campaignSpec(i).code }))
    .filter(({ code }) => SESSION_CODES.includes(code))
    .filter(({ code }, k, all) => all.findIndex((x) => x.code === code) === k)
    .map(({ c, code }) => ({ id: c.id, value: code, campaignId: c.id, usageCounter: 0, usageLimit: 0, attributes: {} }));
  return {
    version: 1,
    application: { id: 1, currency: 'EUR', timezone: 'UTC', attributes: {}, campaignPriority: 'universal', exclusiveCampaignsStrategy: 'listOrder' },
    campaigns,
    session: { Total: total, CartItemTotal: total, AdditionalCostTotal: 0, CartItems: cartItems, CouponCodes: SESSION_CODES, Attributes: {}, AdditionalCosts: {} },
    profile: { IntegrationId: 'p1', Attributes: { tier: 'gold' }, ClosedSessions: 3, TotalSales: 250 },
    event: { Type: 'service_session_updated', Attributes: {} },
    now: new Date().toISOString(),
    budgetMs: 10_000,
    facts: { seed: 'bench', coupons },
  };
}

function jsonRulesEngine(n: number): JsonRulesEngine {
  const engine = new JsonRulesEngine([], { allowUndefinedFacts: true });
  engine.addOperator('anyItem', (items: unknown, want: { category: string; minPrice: number }) =>
    Array.isArray(items) && items.some((it: { Category: string; Price: number }) => it.Category === want.category && it.Price > want.minPrice),
  );
  for (let i = 0; i < n; i++) {
    const s = campaignSpec(i);
    engine.addRule({
      conditions: {
        all: [
          { fact: 'cartItems', operator: 'anyItem', value: { category: s.category, minPrice: s.minPrice } },
          { fact: 'profile', path: '$.attributes.tier', operator: 'in', value: ['gold', 'platinum'] },
          { fact: 'couponCodes', operator: 'contains', value: s.code },
          { fact: 'total', operator: 'greaterThan', value: s.minTotal },
        ],
      },
      event: { type: 'setDiscount', params: { campaignId: i + 1, name: '10% off', rate: 0.1 } },
    });
  }
  return engine;
}

const facts = () => ({ cartItems, profile: { attributes: { tier: 'gold' } }, couponCodes: SESSION_CODES, total });

interface Figures {
  perSecond: number;
  p50: number;
  p99: number;
  effects: number;
}

const percentile = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

async function measure(run: () => unknown | Promise<unknown>, count: (r: unknown) => number): Promise<Figures> {
  // Warm up, then time individual evaluations for durationMs.
  for (let i = 0; i < 200; i++) await run();
  const latencies: number[] = [];
  let effects = 0;
  const start = performance.now();
  while (performance.now() - start < durationMs) {
    const t0 = performance.now();
    const r = await run();
    latencies.push(performance.now() - t0);
    effects = count(r);
  }
  const elapsed = performance.now() - start;
  latencies.sort((a, b) => a - b);
  return { perSecond: latencies.length / (elapsed / 1000), p50: percentile(latencies, 50) * 1000, p99: percentile(latencies, 99) * 1000, effects };
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

console.log(`Perkline rule engine vs json-rules-engine, 20-line cart, inline on one core, ${durationMs} ms per measurement`);
console.log('The same four conditions per campaign; Perkline evaluates them in the order written (short-circuit), json-rules-engine evaluates all.');
console.log('order | campaigns | perkline evals/s | p50 µs | p99 µs | json-rules-engine evals/s | p50 µs | p99 µs | ratio | effects (perkline/jre)');
for (const n of [1, 10, 100, 1000]) {
  const jre = jsonRulesEngine(n);
  const theirs = await measure(
    () => jre.run(facts()),
    (r) => (r as { events: unknown[] }).events.length,
  );
  for (const order of ['items first', 'coupon first'] as const) {
    const campaigns = Array.from({ length: n }, (_, i) => perklineCampaign(i, order));
    const inp = input(campaigns);
    const ours = await measure(() => evaluate(inp), (r) => (r as ReturnType<typeof evaluate>).effects.length);
    console.log(
      [order, n, fmt(ours.perSecond), ours.p50.toFixed(1), ours.p99.toFixed(1), fmt(theirs.perSecond), theirs.p50.toFixed(1), theirs.p99.toFixed(1), `${(ours.perSecond / theirs.perSecond).toFixed(1)}x`, `${ours.effects}/${theirs.effects}`].join(' | '),
    );
  }
}
