import { describe, expect, it } from 'vitest';
import { messagesOf } from '../../cluster/config-bus.js';

describe('messagesOf', () => {
  it('leaves a change that fits, or that names no sessions, as one message', () => {
    expect(messagesOf({ kind: 'campaigns', applicationId: 3 }, 100)).toEqual([{ kind: 'campaigns', applicationId: 3 }]);
    expect(messagesOf({ kind: 'sessions', applicationId: 3, sessionIds: ['a', 'b'] }, 100)).toEqual([{ kind: 'sessions', applicationId: 3, sessionIds: ['a', 'b'] }]);
  });

  it('splits the session IDs of a change into messages within the budget, keeping every ID once and in order', () => {
    const ids = Array.from({ length: 40 }, (_, i) => `${'é'.repeat(20 + i)}-${i}`);
    const budget = 400;
    const parts = messagesOf({ kind: 'sessions', applicationId: 7, sessionIds: ids }, budget);
    expect(parts.length).toBeGreaterThan(5);
    for (const p of parts) {
      expect(p.kind).toBe('sessions');
      expect(p.applicationId).toBe(7);
      expect(Buffer.byteLength(JSON.stringify(p.sessionIds), 'utf8')).toBeLessThanOrEqual(budget);
    }
    expect(parts.flatMap((p) => p.sessionIds)).toEqual(ids);
  });

  it('names every session of the Application when one ID does not fit a message alone', () => {
    expect(messagesOf({ kind: 'sessions', applicationId: 7, sessionIds: ['short', 'x'.repeat(500)] }, 400)).toEqual([{ kind: 'sessions', applicationId: 7 }]);
  });
});
