/**
 * Registering a task, once its body is valid (server/routes/task-body.ts): read the examples
 * through the serving engine as it serves them (hidden states when a head may be fitted),
 * fit in a worker, and return the task to store.
 */
import { createHash } from 'crypto';
import { AnsweringContext } from '../answering/context';
import { WireQuestion } from '../answering/pipeline';
import { QuestionSpec } from '../rendering/renderer';
import { fitInWorker } from './fit-in-worker';
import { HEAD_MIN_OPTIONS } from './fit/fit-task';
import { Fingerprint } from './fingerprint';
import { readExamples } from './read-examples';
import { questionOf, Task, taskFromFit } from './task';

export interface ParsedRegistration {
  id: string;
  /** The question all examples ask (the first example's). */
  spec: QuestionSpec;
  examples: { state: unknown; question: WireQuestion; answer: string }[];
  /** The registration body as sent, for the examples' hash. */
  raw: unknown;
}

/**
 * The question a task is fitted for: the examples' question as the server asks it, with the abstain
 * option the server gives it (docs/abstention.md) among its options, so the task matches the
 * questions it serves.
 */
export function servedQuestion(context: AnsweringContext, spec: QuestionSpec) {
  return questionOf(context.abstentions?.abstentionFor(spec)?.asked ?? spec);
}

export async function registerTask(context: AnsweringContext, fingerprint: Fingerprint, r: ParsedRegistration, cacheSalt?: string): Promise<Task> {
  const question = servedQuestion(context, r.spec);
  const keys = question.options.map((o) => o.key);
  const wantHidden = keys.length >= HEAD_MIN_OPTIONS;
  const t0 = performance.now();
  const { logp, hidden } = await readExamples(context, r.examples, keys, wantHidden, cacheSalt);
  const read_ms = performance.now() - t0;
  const y = Int32Array.from(r.examples, (e) => keys.indexOf(e.answer));
  const fit = await fitInWorker({ id: r.id, keys, readouts: { n: y.length, C: keys.length, logp, y }, hidden });
  const examples_sha256 = createHash('sha256').update(JSON.stringify(r.raw)).digest('hex');
  return taskFromFit(r.id, question, fit, { examples_sha256, read_ms, fingerprint });
}
