// Calendar arithmetic in an IANA timezone with Intl only: local fields of an instant, the instant
// of local fields (a skipped local time moves forward by the gap, a repeated one takes the earlier
// offset), durations (s, m, h exact; D, W, M, Y by the calendar, the day capped at month's end).
import { EvalError } from './types.js';

export interface LocalFields {
  year: number;
  month: number; // 1..12
  day: number;
  hour: number;
  minute: number;
  second: number;
  millisecond: number;
  weekday: number; // 0 = Sunday
}

const formatters = new Map<string, Intl.DateTimeFormat>();
const weekdays: Record<string, number> = { Sun: 0, Mon: 1, Tue: 2, Wed: 3, Thu: 4, Fri: 5, Sat: 6 };

function formatter(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (!f) {
    try {
      f = new Intl.DateTimeFormat('en-US', {
        timeZone: tz,
        hourCycle: 'h23',
        year: 'numeric',
        month: 'numeric',
        day: 'numeric',
        hour: 'numeric',
        minute: 'numeric',
        second: 'numeric',
        weekday: 'short',
      });
    } catch {
      throw new EvalError(`unknown timezone ${JSON.stringify(tz)}`);
    }
    formatters.set(tz, f);
  }
  return f;
}

export function localFields(ms: number, tz: string): LocalFields {
  if (tz === 'UTC' || tz === 'Etc/UTC') {
    const d = new Date(ms);
    return {
      year: d.getUTCFullYear(),
      month: d.getUTCMonth() + 1,
      day: d.getUTCDate(),
      hour: d.getUTCHours(),
      minute: d.getUTCMinutes(),
      second: d.getUTCSeconds(),
      millisecond: d.getUTCMilliseconds(),
      weekday: d.getUTCDay(),
    };
  }
  const parts: Record<string, string> = {};
  for (const p of formatter(tz).formatToParts(new Date(ms))) parts[p.type] = p.value;
  return {
    year: Number(parts.year),
    month: Number(parts.month),
    day: Number(parts.day),
    hour: Number(parts.hour),
    minute: Number(parts.minute),
    second: Number(parts.second),
    millisecond: ((ms % 1000) + 1000) % 1000,
    weekday: weekdays[parts.weekday!] ?? 0,
  };
}

const asUtc = (f: Omit<LocalFields, 'weekday'>): number => Date.UTC(f.year, f.month - 1, f.day, f.hour, f.minute, f.second, f.millisecond);

/** UTC offset of the timezone at an instant, in ms. */
export const offsetAt = (ms: number, tz: string): number => asUtc(localFields(ms, tz)) - ms;

/** The instant that shows these local fields in tz. */
export function fromLocal(f: Omit<LocalFields, 'weekday'>, tz: string): number {
  const t = asUtc(f);
  const DAY = 86_400_000;
  const before = t - offsetAt(t - DAY, tz);
  const after = t - offsetAt(t + DAY, tz);
  const shows = (i: number) => asUtc(localFields(i, tz)) === t;
  const ok = [before, after].filter(shows);
  if (ok.length > 0) return Math.min(...ok); // repeated local time: the earlier instant
  return before; // skipped local time: read with the offset before the gap, i.e. moved forward by it
}

const DURATION = /^(\d+)([smhDWMY])$/;

export const isDuration = (v: unknown): v is string => typeof v === 'string' && DURATION.test(v);

export function addDuration(ms: number, duration: string, tz: string, sign: 1 | -1): number {
  const m = DURATION.exec(duration);
  if (!m) throw new EvalError(`malformed duration ${JSON.stringify(duration)}; use e.g. 30s, 40m, 1h, 7D, 2W, 1M, 1Y`);
  const n = Number(m[1]) * sign;
  switch (m[2]) {
    case 's':
      return ms + n * 1000;
    case 'm':
      return ms + n * 60_000;
    case 'h':
      return ms + n * 3_600_000;
  }
  const f = localFields(ms, tz);
  let { year, month, day } = f;
  if (m[2] === 'D' || m[2] === 'W') {
    const d = new Date(Date.UTC(year, month - 1, day + n * (m[2] === 'W' ? 7 : 1)));
    year = d.getUTCFullYear();
    month = d.getUTCMonth() + 1;
    day = d.getUTCDate();
  } else {
    const months = m[2] === 'M' ? n : n * 12;
    const index = year * 12 + (month - 1) + months;
    year = Math.floor(index / 12);
    month = (index % 12) + 1;
    day = Math.min(day, new Date(Date.UTC(year, month, 0)).getUTCDate());
  }
  return fromLocal({ year, month, day, hour: f.hour, minute: f.minute, second: f.second, millisecond: f.millisecond }, tz);
}

/** Whole days from t1 to t2 by the local calendar dates. */
export function daysBetween(t1: number, t2: number, tz: string): number {
  const a = localFields(t1, tz);
  const b = localFields(t2, tz);
  return Math.round((Date.UTC(b.year, b.month - 1, b.day) - Date.UTC(a.year, a.month - 1, a.day)) / 86_400_000);
}
