import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { estimateCost, evaluate } from './evaluate.js';
import type { EvaluationInput, EvaluationResult } from './types.js';
import type { WorkerRequest, WorkerResponse } from './worker.js';

export interface EvaluatorOptions {
  /** inline: always in this thread; pool: always in a worker; auto (default): by estimated cost. */
  mode?: 'inline' | 'pool' | 'auto';
  /** Estimated cost (rules × cart lines) from which `auto` uses the pool. Default 2000. */
  costThreshold?: number;
  /** Worker threads (default: cores − 1, at least 1). */
  poolSize?: number;
}

export interface Evaluator {
  evaluate(input: EvaluationInput): Promise<EvaluationResult & { ranIn: 'inline' | 'pool' }>;
  /** Share of the pool's capacity in use, 0..1 (0 when no pool was started). */
  utilization(): number;
  close(): Promise<void>;
}

const fromSource = import.meta.url.endsWith('.ts');
const workerFile = fileURLToPath(new URL(fromSource ? './worker-dev.mjs' : './worker.js', import.meta.url));

/** Evaluates inline or in a Piscina pool that is started on first use. */
export function createEvaluator(options: EvaluatorOptions = {}): Evaluator {
  const mode = options.mode ?? 'auto';
  const threshold = options.costThreshold ?? 2000;
  let pool: Piscina | undefined;
  const getPool = () =>
    (pool ??= new Piscina({
      filename: workerFile,
      maxThreads: options.poolSize ?? Math.max(1, availableParallelism() - 1),
      minThreads: 1,
      idleTimeout: 60_000,
    }));

  return {
    async evaluate(input) {
      const pooled = mode === 'pool' || (mode === 'auto' && estimateCost(input) >= threshold);
      // ranIn before the spread: after it, Node 20's V8 makes a new hidden class for every result
      // (see withPosition in integration/session-model.ts).
      if (!pooled) return { ranIn: 'inline', ...evaluate(input) };
      const response = (await getPool().run({ version: 1, input } satisfies WorkerRequest)) as WorkerResponse;
      if (!response.ok) throw new Error(`rule worker failed: ${response.error.message}`);
      return { ranIn: 'pool', ...response.result };
    },
    utilization: () => pool?.utilization ?? 0,
    close: async () => {
      if (pool) await pool.destroy();
      pool = undefined;
    },
  };
}
