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
});
