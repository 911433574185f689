// Money: amounts in a currency's minor units (ISO 4217 digits), rounding half away from zero, and
// exact largest-remainder splits.
import { roundHalfAway } from './values.js';

const ZERO_DIGIT = new Set(['BIF', 'CLP', 'DJF', 'GNF', 'ISK', 'JPY', 'KMF', 'KRW', 'PYG', 'RWF', 'UGX', 'UYI', 'VND', 'VUV', 'XAF', 'XOF', 'XPF']);
const THREE_DIGIT = new Set(['BHD', 'IQD', 'JOD', 'KWD', 'LYD', 'OMR', 'TND']);

/** Decimal digits of a currency's minor unit (2 unless ISO 4217 says otherwise). */
export function currencyDigits(currency: string): number {
  const c = currency.toUpperCase();
  if (ZERO_DIGIT.has(c)) return 0;
  if (THREE_DIGIT.has(c)) return 3;
  return 2;
}

/** The amount in minor units, rounded half away from zero (12.345 EUR → 1235). */
export const toMinor = (amount: number, digits: number): number => Math.round(roundHalfAway(amount, digits) * 10 ** digits);

// Integer division by a power of ten is correctly rounded, so it equals parsing the decimal text.
export const fromMinor = (minor: number, digits: number): number => minor / 10 ** digits;

/**
 * Splits `total` minor units over weights so that the parts sum exactly to the total: each part
 * gets its floor, and the units left over go to the largest remainders (earlier first on ties).
 */
export function splitLargestRemainder(total: number, weights: readonly number[]): number[] {
  const sum = weights.reduce((a, b) => a + b, 0);
  if (sum <= 0) return weights.map(() => 0);
  const exact = weights.map((w) => (total * w) / sum);
  const parts = exact.map(Math.floor);
  let left = total - parts.reduce((a, b) => a + b, 0);
  const order = exact.map((e, i) => [e - Math.floor(e), i] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
  for (const [, i] of order) {
    if (left <= 0) break;
    parts[i]!++;
    left--;
  }
  return parts;
}
