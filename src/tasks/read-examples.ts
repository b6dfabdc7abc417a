/**
 * Registration examples through the serving engine: each example is its own call (its own
 * state), several in flight at once, so the engine process merges them into batched
 * forward passes, its prefix cache serves repeated states and the shared question text
 * is computed once per batch. The baseline (what the server answers without tasks) and,
 * when asked, the hidden state at the readout position (the head engine's, when there is
 * one) come back per example.
 */
import { AnsweringContext } from '../answering/context';
import { toHttpError } from '../answering/http-errors';
import { HttpError } from '../wire/http-error';
import { QuestionResult, runQuestions, WireQuestion } from '../answering/pipeline';
import { QuestionSpec } from '../rendering/renderer';
import { safeLog } from './fit/softmax-model';
import { inTaskOrder } from './task';

/** Calls in flight at once: enough to fill the engine's batches, few enough for other requests to interleave. */
export const EXAMPLES_IN_FLIGHT = 8;

export class ExampleError extends Error {
  constructor(
    readonly index: number,
    readonly cause: unknown,
  ) {
    super(`example ${index}: ${cause instanceof Error ? cause.message : String(cause)}`);
  }

  /** The failure as the routes answer it, naming the example: `example 3: the rendered prompt is longer than the context: ...`. */
  toHttpError(): unknown {
    const translated = toHttpError(this.cause, { prompt: () => 'the rendered prompt' });
    if (!(translated instanceof HttpError) || typeof translated.detail !== 'string') return translated;
    return new HttpError(translated.status, `example ${this.index}: ${translated.detail}`, translated.headers);
  }
}

/**
 * Each example asked through the pipeline under `context` (one question, orders 1), EXAMPLES_IN_FLIGHT
 * at once; `onResult` gets each answer. A failure is thrown as an ExampleError naming the example.
 * `cacheSalt`: the registering request's, as its examples share cached work with that tenant's requests only.
 */
export async function forEachExample(
  context: AnsweringContext,
  examples: { state: unknown; question: WireQuestion; images?: Uint8Array[] }[],
  onResult: (i: number, q: QuestionResult) => void,
  cacheSalt?: string,
): Promise<void> {
  const n = examples.length;
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      let q;
      try {
        q = (await runQuestions(context, examples[i].state, [examples[i].question], { orders: 1, images: examples[i].images, cacheSalt })).questions[0];
      } catch (e) {
        throw new ExampleError(i, e);
      }
      onResult(i, q);
    }
  };
  await Promise.all(Array.from({ length: Math.min(EXAMPLES_IN_FLIGHT, n) }, worker));
}

export interface ExampleReadouts {
  /** n x C log-probabilities of the baseline, options in `keys` order. */
  logp: Float64Array;
  hidden?: { d: number; data: Float64Array };
}

/** A task's examples: the baseline alone (no task), each asked as served (with its abstain option, if the server gives it one) in the task's option order. */
export async function readExamples(
  context: AnsweringContext,
  examples: { state: unknown; question: WireQuestion }[],
  keys: string[],
  wantHidden: boolean,
  cacheSalt?: string,
): Promise<ExampleReadouts> {
  const reader = (spec: QuestionSpec) => ({ id: '', identity: '', asked: inTaskOrder(spec), wantsHidden: wantHidden, apply: () => undefined });
  const baselineOnly = { ...context, taskBook: { taskFor: reader } };
  const n = examples.length, C = keys.length;
  const logp = new Float64Array(n * C);
  let hidden: { d: number; data: Float64Array } | undefined;
  await forEachExample(baselineOnly, examples, (i, q) => {
    keys.forEach((k, j) => (logp[i * C + j] = safeLog(q.baseline.get(k)!)));
    if (q.taskHidden) {
      hidden ??= { d: q.taskHidden.length, data: new Float64Array(n * q.taskHidden.length) };
      hidden.data.set(q.taskHidden, i * hidden.d);
    }
  }, cacheSalt);
  return { logp, hidden };
}
