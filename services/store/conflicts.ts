// Errors of writes that raced another. Deadlocks and serialization failures: PostgreSQL aborts the
// loser of such a race, and nothing of the aborted statement or transaction stays, so running it
// again is what the loser should do. A unique violation is the caller's to answer (a name taken).

/** Whether an error is a unique violation (23505): a row with the same key exists, or was just written by another. */
export function isUniqueViolation(e: unknown): boolean {
  return (e as { code?: unknown } | null)?.code === '23505';
}

/** Whether an error is a deadlock (40P01) or a serialization failure (40001). */
export function isConflictAbort(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return code === '40P01' || code === '40001';
}

/**
 * Runs `fn` and, when it ends in a deadlock or serialization failure, again after a short random
 * pause, `attempts` times in all. `fn` must be one statement outside a transaction or a whole
 * transaction: only then did the abort undo all of it.
 */
export async function againOnConflict<T>(fn: () => Promise<T>, attempts = 5): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (e) {
      if (!isConflictAbort(e) || attempt >= attempts) throw e;
      await new Promise((r) => setTimeout(r, 2 + Math.random() * 10 * attempt));
    }
  }
}
