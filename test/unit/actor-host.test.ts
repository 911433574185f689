import { describe, expect, it } from 'vitest';
import { ActorHost } from '../../services/actors/index.js';
import { AppError } from '../../services/shared/index.js';

const tick = () => new Promise((r) => setTimeout(r, 5));

describe('ActorHost', () => {
  it('runs the calls of one key one at a time, in arrival order', async () => {
    const host = new ActorHost();
    const order: string[] = [];
    let running = 0;
    const call = (name: string) =>
      host.run('k', async () => {
        running++;
        expect(running).toBe(1);
        order.push(`start ${name}`);
        await tick();
        order.push(`end ${name}`);
        running--;
      });
    await Promise.all([call('a'), call('b'), call('c')]);
    expect(order).toEqual(['start a', 'end a', 'start b', 'end b', 'start c', 'end c']);
  });

  it('refuses a fourth call of a busy key with the 409 of its entity', async () => {
    const host = new ActorHost({ entity: (k) => (k.startsWith('p:') ? 'profile' : 'session') });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const first = host.run('p:1', () => gate);
    const queued = [host.run('p:1', async () => 1), host.run('p:1', async () => 2)];
    const refused = host.run('p:1', async () => 3);
    await expect(refused).rejects.toMatchObject({ kind: 'conflict', message: 'Too many requests are updating this profile at the same time' });
    expect(host.queueDepth).toBe(2);
    expect(host.activeCount).toBe(1);
    release();
    await first;
    expect(await Promise.all(queued)).toEqual([1, 2]);
    expect(host.queueDepth).toBe(0);
  });

  it('runs calls of different keys in parallel', async () => {
    const host = new ActorHost();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const a = host.run('a', () => gate);
    const b = await host.run('b', async () => 'b done');
    expect(b).toBe('b done');
    release();
    await a;
  });

  it('frees the actor when a call throws', async () => {
    const host = new ActorHost();
    await expect(host.run('k', async () => { throw new AppError('invalid_argument', 'bad'); })).rejects.toThrow('bad');
    expect(await host.run('k', async () => 'next')).toBe('next');
  });

  it('drops the cached states of a shard and evicts the least recently used', async () => {
    const host = new ActorHost({ cacheSize: 2 });
    host.setCached('a', 1, 'A');
    host.setCached('b', 2, 'B');
    expect(host.getCached('a')).toBe('A');
    host.setCached('c', 2, 'C');
    expect(host.getCached('b')).toBeUndefined();
    host.dropShard(2);
    expect(host.getCached('c')).toBeUndefined();
    expect(host.getCached('a')).toBe('A');
  });
});
