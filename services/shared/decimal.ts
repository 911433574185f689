// Exact decimal sums for amounts that arrive as JSON numbers: each number is read as the shortest
// decimal that prints it (what the client wrote), summed as scaled integers, and turned back into
// the nearest double once. 0.1 + 0.2 is 0.3 here.

const SCALE = 9;
const TEN = 10n;

/** The number as an integer count of 10^-9 units, rounded half away from zero past 9 digits. */
export function toScaled(n: number): bigint {
  if (!Number.isFinite(n)) throw new RangeError(`not a finite number: ${n}`);
  const text = String(n).toLowerCase();
  const [mantissa = '0', exponent = '0'] = text.split('e');
  const negative = mantissa.startsWith('-');
  const [int = '0', frac = ''] = (negative ? mantissa.slice(1) : mantissa).split('.');
  let digits = BigInt(int + frac);
  const shift = Number(exponent) - frac.length + SCALE;
  if (shift >= 0) digits *= TEN ** BigInt(shift);
  else {
    const div = TEN ** BigInt(-shift);
    const q = digits / div;
    digits = (digits % div) * 2n >= div ? q + 1n : q;
  }
  return negative ? -digits : digits;
}

export function fromScaled(v: bigint): number {
  const negative = v < 0n;
  const abs = negative ? -v : v;
  const s = abs.toString().padStart(SCALE + 1, '0');
  const text = `${s.slice(0, -SCALE)}.${s.slice(-SCALE)}`;
  return Number((negative ? '-' : '') + text);
}

/** Exact sum of terms, each price × integer quantity. */
export function sumProducts(terms: Iterable<readonly [price: number, quantity: number]>): number {
  let total = 0n;
  for (const [price, quantity] of terms) total += toScaled(price) * BigInt(quantity);
  return fromScaled(total);
}

export function addExact(...values: number[]): number {
  return fromScaled(values.reduce((acc, v) => acc + toScaled(v), 0n));
}
