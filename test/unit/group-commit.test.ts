import { describe, expect, it } from 'vitest';
import { GroupCommit } from '../../services/shared/index.js';

describe('GroupCommit', () => {
  it('commits the first item alone and the ones that arrive meanwhile together', async () => {
    const batches: number[][] = [];
    const g = new GroupCommit<number, number>({
      maxInFlight: 1,
      one: async (i) => {
        batches.push([i]);
        await new Promise((r) => setTimeout(r, 5));
        return i * 10;
      },
      many: async (items) => {
        batches.push(items);
        return items.map((i) => i * 10);
      },
    });
    const results = await Promise.all([1, 2, 3, 4].map((i) => g.commit(i)));
    expect(results).toEqual([10, 20, 30, 40]);
    expect(batches).toEqual([[1], [2, 3, 4]]);
  });

  it('hands each item its own error, and commits item by item when the batch fails as a whole', async () => {
    const g = new GroupCommit<number, number>({
      maxInFlight: 1,
      one: async (i) => {
        await new Promise((r) => setTimeout(r, 1));
        if (i === 3) throw new Error('three');
        return i;
      },
      many: async (items) => {
        if (items.includes(3)) throw new Error('the batch failed');
        return items.map((i) => (i === 5 ? new Error('five') : i));
      },
    });
    const first = await Promise.allSettled([1, 2, 3, 4].map((i) => g.commit(i)));
    expect(first.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message))).toEqual([1, 2, 'three', 4]);
    const second = await Promise.allSettled([6, 5, 7].map((i) => g.commit(i)));
    expect(second.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message))).toEqual([6, 'five', 7]);
  });

  it('with two in flight, sends a second batch while the first commits, and the rest when one ends', async () => {
    const sent: number[][] = [];
    const open: Array<() => void> = [];
    const hold = <T>(value: T) => new Promise<T>((resolve) => open.push(() => resolve(value)));
    const g = new GroupCommit<number, number>({
      maxInFlight: 2,
      one: (i) => {
        sent.push([i]);
        return hold(i * 10);
      },
      many: (items) => {
        sent.push(items);
        return hold(items.map((i) => i * 10));
      },
    });
    const first = g.commit(1);
    const second = g.commit(2);
    // Both lanes busy: 3 and 4 wait.
    const rest = [g.commit(3), g.commit(4)];
    expect(sent).toEqual([[1], [2]]);
    // The second batch ends first: its caller has its answer, and the waiting items go at once.
    open[1]!();
    expect(await second).toBe(20);
    await new Promise((r) => setImmediate(r));
    expect(sent).toEqual([[1], [2], [3, 4]]);
    open[2]!();
    expect(await Promise.all(rest)).toEqual([30, 40]);
    open[0]!();
    expect(await first).toBe(10);
  });

  describe('gather', () => {
    /** A GroupCommit whose single commits end when the test says, recording what was sent. */
    const gathering = () => {
      const sent: number[][] = [];
      const open: Array<() => void> = [];
      const g = new GroupCommit<number, number>({
        gather: { items: 4, waitMs: 30 },
        one: (i) => {
          sent.push([i]);
          return new Promise<number>((resolve) => open.push(() => resolve(i)));
        },
        many: async (items) => {
          sent.push(items);
          return items;
        },
      });
      /**
       * Commits 1 alone and 2 and 3 behind it, then ends 1 and waits until its batch's slot is
       * free: 2 and 3 are the batch that follows. Returns 1's result and 2's and 3's pending ones.
       */
      const afterFirstBatch = async () => {
        const first = g.commit(1);
        const rest = [g.commit(2), g.commit(3)];
        open.shift()!();
        const one = await first;
        await new Promise((r) => setImmediate(r));
        return { one, rest };
      };
      return { g, sent, afterFirstBatch };
    };

    it('never holds back an item while the database is idle', () => {
      const { g, sent } = gathering();
      void g.commit(1);
      expect(sent).toEqual([[1]]);
    });

    it('lets a small batch that follows another wait for more, and sends it once it has enough', async () => {
      const { g, sent, afterFirstBatch } = gathering();
      const { one, rest } = await afterFirstBatch();
      expect(one).toBe(1);
      // Two waiting, fewer than four: the batch waits.
      expect(sent).toEqual([[1]]);
      rest.push(g.commit(4));
      expect(sent).toEqual([[1]]);
      rest.push(g.commit(5));
      expect(sent).toEqual([[1], [2, 3, 4, 5]]);
      expect(await Promise.all(rest)).toEqual([2, 3, 4, 5]);
    });

    it('sends what it has when the wait is over', async () => {
      const { sent, afterFirstBatch } = gathering();
      const { one, rest } = await afterFirstBatch();
      expect(one).toBe(1);
      expect(sent).toEqual([[1]]);
      expect(await Promise.all(rest)).toEqual([2, 3]);
      expect(sent).toEqual([[1], [2, 3]]);
    });
  });
});
