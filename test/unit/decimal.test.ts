import { describe, expect, it } from 'vitest';
import { addExact, fromScaled, sumProducts, toScaled } from '../../services/shared/index.js';

describe('decimal', () => {
  it('adds decimals exactly', () => {
    expect(addExact(0.1, 0.2)).toBe(0.3);
    expect(addExact(110.1, 0.2)).toBe(110.3);
    expect(addExact(-1.005, 1)).toBe(-0.005);
  });

  it('sums price times quantity exactly', () => {
    expect(sumProducts([[3.33, 3], [0.01, 1]])).toBe(10);
    expect(sumProducts([[19.99, 7]])).toBe(139.93);
    expect(sumProducts([])).toBe(0);
  });

  it('reads every amount as its decimal text says, on the fast path too', () => {
    // Reference: the decimal text itself, scaled by string arithmetic.
    const reference = (n: number): bigint => {
      const [int, frac = ''] = Math.abs(n).toFixed(12).split('.');
      const digits = BigInt(int! + frac.slice(0, 9));
      const rest = Number(frac.slice(9));
      const v = rest >= 500 ? digits + 1n : digits;
      return n < 0 ? -v : v;
    };
    let seed = 7;
    const rand = () => ((seed = (seed * 48271) % 2147483647) / 2147483647);
    for (let i = 0; i < 20_000; i++) {
      const decimals = Math.floor(rand() * 7);
      const n = Number((rand() * 10 ** Math.floor(rand() * 6) * (rand() < 0.2 ? -1 : 1)).toFixed(decimals));
      expect(toScaled(n), String(n)).toBe(reference(n));
    }
  });

  it('reads exponent notation and rounds past nine digits half away from zero', () => {
    expect(fromScaled(toScaled(1e-7))).toBe(1e-7);
    expect(fromScaled(toScaled(1.5e21))).toBe(1.5e21);
    expect(toScaled(1.0000000005)).toBe(1_000_000_001n);
    expect(toScaled(-1.0000000005)).toBe(-1_000_000_001n);
  });
});
