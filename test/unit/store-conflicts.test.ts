import { describe, expect, it } from 'vitest';
import { againOnConflict, isConflictAbort } from '../../services/store/index.js';

const abort = (code: string) => Object.assign(new Error(`aborted ${code}`), { code });

describe('againOnConflict', () => {
  it('runs a statement again after a deadlock or serialization failure, and returns what the run that went through returned', async () => {
    const codes = ['40P01', '40001'];
    let runs = 0;
    const out = await againOnConflict(async () => {
      runs++;
      const code = codes.shift();
      if (code) throw abort(code);
      return 'done';
    });
    expect([out, runs]).toEqual(['done', 3]);
  });

  it('gives up after its attempts with the last abort, and never runs again after any other error', async () => {
    let runs = 0;
    await expect(
      againOnConflict(async () => {
        runs++;
        throw abort('40P01');
      }, 3),
    ).rejects.toMatchObject({ code: '40P01' });
    expect(runs).toBe(3);
    runs = 0;
    await expect(
      againOnConflict(async () => {
        runs++;
        throw abort('23505');
      }),
    ).rejects.toMatchObject({ code: '23505' });
    expect(runs).toBe(1);
    expect([isConflictAbort(abort('40P01')), isConflictAbort(abort('40001')), isConflictAbort(new Error('x')), isConflictAbort(null)]).toEqual([true, true, false, false]);
  });
});
