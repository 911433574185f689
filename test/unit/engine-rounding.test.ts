import { describe, expect, it } from 'vitest';
import { fromMinor, toMinor } from '../../services/engine/index.js';
import { roundHalfAway } from '../../services/engine/values.js';

// The reference: round the decimal text of the number, half away from zero.
const reference = (x: number, d: number) => {
  const sign = x < 0 ? -1 : 1;
  const r = Number(`${Math.round(Number(`${Math.abs(x)}e${d}`))}e${-d}`);
  return r === 0 ? 0 : sign * r;
};

describe('roundHalfAway', () => {
  it('rounds halves away from zero on the decimal value', () => {
    expect(roundHalfAway(1.005, 2)).toBe(1.01);
    expect(roundHalfAway(-1.005, 2)).toBe(-1.01);
    expect(roundHalfAway(2.5)).toBe(3);
    expect(roundHalfAway(-2.5)).toBe(-3);
    expect(roundHalfAway(1.125, 2)).toBe(1.13);
    expect(roundHalfAway(0.285, 2)).toBe(0.29);
    expect(roundHalfAway(1234.5, 0)).toBe(1235);
  });

  it('agrees with rounding the decimal text on 100,000 generated amounts', () => {
    let seed = 7;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let i = 0; i < 100_000; i++) {
      const cents = Math.floor(rand() * 1e7);
      const x = (cents + [0, 0.5, 0.25, 0.125, 0.499, 0.501][i % 6]!) / 100 * (i % 2 ? 1 : -1) * (i % 7 === 0 ? 0.1 : 1);
      for (const d of [0, 2, 3]) expect(roundHalfAway(x, d)).toBe(reference(x, d));
    }
  });

  it('moves between amounts and minor units exactly', () => {
    expect(toMinor(12.345, 2)).toBe(1235);
    expect(fromMinor(1203, 2)).toBe(12.03);
    expect(fromMinor(999, 2)).toBe(9.99);
    expect(fromMinor(185, 0)).toBe(185);
  });
});
