// Value helpers of the rule language: type names, deep equality, RFC 3339 times, numbers.
import { EvalError } from './types.js';

export const typeName = (v: unknown): string => {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'list';
  if (typeof v === 'object') return 'map';
  return typeof v;
};

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!deepEqual(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const ka = Object.keys(a as object);
  const kb = Object.keys(b as object);
  if (ka.length !== kb.length) return false;
  for (const k of ka) {
    if (!Object.prototype.hasOwnProperty.call(b, k)) return false;
    if (!deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) return false;
  }
  return true;
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

// The evaluation time is parsed by several steps of every evaluation: remember the last one.
let lastText = '';
let lastValue: number | undefined;

/** Epoch milliseconds of a valid RFC 3339 instant, or undefined (2026-02-30 is not valid). */
export function parseTime(s: string): number | undefined {
  if (s === lastText) return lastValue;
  const v = parseTimeUncached(s);
  lastText = s;
  lastValue = v;
  return v;
}

function parseTimeUncached(s: string): number | undefined {
  const m = RFC3339.exec(s);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, se, frac, zone] = m;
  const year = Number(y), month = Number(mo), day = Number(d), hour = Number(h), minute = Number(mi), second = Number(se);
  if (month < 1 || month > 12 || hour > 23 || minute > 59 || second > 59) return undefined;
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (day < 1 || day > daysInMonth) return undefined;
  let offset = 0;
  if (zone !== 'Z' && zone !== 'z') {
    const sign = zone!.startsWith('-') ? -1 : 1;
    const oh = Number(zone!.slice(1, 3)), om = Number(zone!.slice(4, 6));
    if (oh > 23 || om > 59) return undefined;
    offset = sign * (oh * 60 + om);
  }
  const ms = frac ? Math.floor(Number(`0${frac}`) * 1000) : 0;
  return Date.UTC(year, month - 1, day, hour, minute, second, ms) - offset * 60_000;
}

export const isTime = (v: unknown): v is string => typeof v === 'string' && parseTime(v) !== undefined;

/** Canonical form: UTC, `Z`, to the second, milliseconds only when not zero (trailing zeros cut). */
export function formatTime(ms: number): string {
  const iso = new Date(ms).toISOString();
  const frac = iso.slice(20, 23).replace(/0+$/, '');
  return `${iso.slice(0, 19)}${frac ? `.${frac}` : ''}Z`;
}

export function timeOf(v: unknown, what: string): number {
  if (typeof v !== 'string') throw new EvalError(`${what} must be a time, got ${typeName(v)}`);
  const t = parseTime(v);
  if (t === undefined) throw new EvalError(`${what} is not an RFC 3339 time: ${JSON.stringify(v)}`);
  return t;
}

/**
 * Removes binary floating-point noise from a result (120 * 0.1 is 12, 0.1 + 0.2 is 0.3): amounts
 * in rules are decimals, and 15 significant digits hold every amount exactly.
 */
export const clean = (x: number): number => (Number.isInteger(x) || !Number.isFinite(x) ? x : Number(x.toPrecision(15)));

/** Rounds half away from zero to `digits` decimals, on the decimal value (1.005 → 1.01). */
export function roundHalfAway(x: number, digits = 0): number {
  const sign = x < 0 ? -1 : 1;
  const abs = Math.abs(x);
  const scaled = abs * 10 ** digits;
  const floor = Math.floor(scaled);
  // Far from a half, binary rounding cannot change the answer; near one (1.005 * 100 is
  // 100.49999999999999), decide on the decimal text of the number.
  const r =
    Math.abs(scaled - floor - 0.5) > 1e-6
      ? (scaled - floor > 0.5 ? floor + 1 : floor) / 10 ** digits
      : Number(`${Math.round(Number(`${abs}e${digits}`))}e${-digits}`);
  return r === 0 ? 0 : sign * r;
}

const NUMBER_TEXT = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;
export const parseNumber = (s: string): number | undefined => (NUMBER_TEXT.test(s) ? Number(s) : undefined);
