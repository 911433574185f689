// Exact decimal sums for amounts that arrive as JSON numbers: each number is read as the shortest
// decimal that prints it (what the client wrote), summed as scaled integers, and turned back into
// the nearest double once. 0.1 + 0.2 is 0.3 here.

const SCALE = 9;
const TEN = 10n;

/** The number as an integer count of 10^-9 units, rounded half away from zero past 9 digits. */
export function toScaled(n: number): bigint {
  if (!Number.isFinite(n)) throw new RangeError(`not a finite number: ${n}`);
  // Fast path: below 1e6 the float product is within 0.1 of the exact scaled decimal; when it is
  // also within 0.25 of an integer, that integer is what the decimal reading below gives (amounts
  // with at most nine decimals always are; ties past nine digits take the slow path).
  if (Math.abs(n) < 1e6) {
    const x = Math.abs(n) * 1e9;
    const scaled = Math.round(x);
    if (Math.abs(x - scaled) < 0.25) return BigInt(n < 0 ? -scaled : scaled);
  }
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
