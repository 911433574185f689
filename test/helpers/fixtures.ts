// Builders with overrides for the objects tests send.

export const tenPercentOver100 = (overrides: Record<string, unknown> = {}) => ({
  rules: [
    {
      title: '10% off',
      condition: ['>', ['.', 'Session', 'Total'], 100],
      effects: [['setDiscount', '10% off', ['*', ['.', 'Session', 'Total'], 0.1]]],
    },
  ],
  bindings: [],
  activate: true,
  ...overrides,
});

export const newApplication = (overrides: Record<string, unknown> = {}) => ({
  name: 'Shop',
  timezone: 'Europe/Berlin',
  currency: 'EUR',
  ...overrides,
});

export const newCampaign = (overrides: Record<string, unknown> = {}) => ({
  name: 'Autumn sale',
  state: 'enabled' as const,
  tags: ['autumn'],
  features: [] as string[],
  limits: [] as unknown[],
  ...overrides,
});

export const cart = (prices: number[], overrides: Record<string, unknown> = {}) => ({
  profileId: 'customer-1',
  cartItems: prices.map((price, i) => ({ name: `Item ${i}`, sku: `SKU-${i}`, quantity: 1, price })),
  ...overrides,
});
