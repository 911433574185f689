import { describe, expect, it } from 'vitest';
import { addDuration, daysBetween, fromLocal, localFields } from '../../services/engine/calendar.js';
import { formatTime, parseTime } from '../../services/engine/values.js';

const t = (s: string) => parseTime(s)!;
const add = (s: string, d: string, tz: string, sign: 1 | -1 = 1) => formatTime(addDuration(t(s), d, tz, sign));

describe('calendar', () => {
  it('moves a skipped local time forward by the gap (Berlin, spring)', () => {
    // 2026-03-29 02:30 does not exist in Berlin; it becomes 03:30 CEST = 01:30Z.
    expect(formatTime(fromLocal({ year: 2026, month: 3, day: 29, hour: 2, minute: 30, second: 0, millisecond: 0 }, 'Europe/Berlin'))).toBe('2026-03-29T01:30:00Z');
    expect(add('2026-03-28T01:30:00Z', '1D', 'Europe/Berlin')).toBe('2026-03-29T01:30:00Z');
  });

  it('takes the earlier offset on a repeated local time (Berlin, autumn)', () => {
    // 2026-10-25 02:30 happens twice; the first is 02:30 CEST = 00:30Z.
    expect(formatTime(fromLocal({ year: 2026, month: 10, day: 25, hour: 2, minute: 30, second: 0, millisecond: 0 }, 'Europe/Berlin'))).toBe('2026-10-25T00:30:00Z');
  });

  it('caps the day at the end of the month and handles leap years', () => {
    expect(add('2028-01-31T10:00:00Z', '1M', 'UTC')).toBe('2028-02-29T10:00:00Z');
    expect(add('2028-02-29T10:00:00Z', '1Y', 'UTC')).toBe('2029-02-28T10:00:00Z');
    expect(add('2026-03-31T10:00:00Z', '1M', 'UTC', -1)).toBe('2026-02-28T10:00:00Z');
  });

  it('counts days between local calendar dates', () => {
    // 23:30Z on 1 March is already 2 March in Berlin.
    expect(daysBetween(t('2026-03-01T23:30:00Z'), t('2026-03-02T00:30:00Z'), 'UTC')).toBe(1);
    expect(daysBetween(t('2026-03-01T23:30:00Z'), t('2026-03-02T00:30:00Z'), 'Europe/Berlin')).toBe(0);
    expect(daysBetween(t('2026-03-11T00:00:00Z'), t('2026-03-01T00:00:00Z'), 'UTC')).toBe(-10);
  });

  it('reads local fields in the timezone', () => {
    expect(localFields(t('2026-07-01T22:30:00Z'), 'America/New_York')).toMatchObject({ year: 2026, month: 7, day: 1, hour: 18, minute: 30, weekday: 3 });
    expect(localFields(t('2026-12-31T23:30:00Z'), 'Asia/Tokyo')).toMatchObject({ year: 2027, month: 1, day: 1, hour: 8 });
  });
});
