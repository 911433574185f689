// Piscina worker entry: evaluates in a worker thread with its own compiled-ruleset cache. Messages
// are versioned; an error comes back as data and never takes the worker down.
import { evaluate } from './evaluate.js';
import type { EvaluationInput, EvaluationResult } from './types.js';

export interface WorkerRequest {
  version: 1;
  input: EvaluationInput;
}

export type WorkerResponse = { version: 1; ok: true; result: EvaluationResult } | { version: 1; ok: false; error: { message: string } };

export default function run(request: WorkerRequest): WorkerResponse {
  if (request?.version !== 1) return { version: 1, ok: false, error: { message: `unsupported message version ${String(request?.version)}` } };
  try {
    return { version: 1, ok: true, result: evaluate(request.input) };
  } catch (e) {
    return { version: 1, ok: false, error: { message: e instanceof Error ? e.message : String(e) } };
  }
}
