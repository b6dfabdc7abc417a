/**
 * Registering an abstention task, once its body is valid (server/routes/abstention-body.ts):
 * read the examples through the engine of its route (the serving engine, or the image engine for
 * imajev_extension) exactly as a matching question is answered
 * (the abstain option in place, the question's task applied), then fit the threshold on the
 * abstain option's probability (fit.ts). The fit takes milliseconds: no worker.
 */
import { createHash } from 'crypto';
import { AnsweringContext } from '../../answering/context';
import { WireQuestion } from '../../answering/pipeline';
import { inPromptOrder, stateWithImages } from '../../answering/image-state';
import { ImageInput } from '../../images/collect';
import { choiceAnswer } from '../../answering/answers';
import { QuestionSpec } from '../../rendering/renderer';
import { Fingerprint } from '../fingerprint';
import { forEachExample } from '../read-examples';
import { fitThreshold } from './fit';
import { AbstainOption, AbstentionTask, abstainKeyOf, MatchMode, optionSetOf, withAbstainOption } from './task';

export interface ParsedAbstention {
  id: string;
  option: AbstainOption;
  match: MatchMode;
  /** The question as asked, abstain option included (the first example's). */
  asked: QuestionSpec;
  /** `answer`: an option key other than the abstain option, or null (unanswerable). `images`: imajev_extension's, as collected. */
  examples: { state: unknown; question: WireQuestion; answer: string | null; images: ImageInput[] }[];
  raw: unknown;
}

/** The task applied to the question changed while the examples were read: they were read under two distributions. */
export class TaskChangedError extends Error {
  constructor() {
    super('the task applied to this question changed while its examples were read: register again');
  }
}

/**
 * Fits an abstention task from its examples (reads them, each answered with the abstain option appended, and
 * chooses the threshold); the route then stores it (TaskStore.registerAbstention).
 */
export async function fitAbstention(context: AnsweringContext, fingerprint: Fingerprint, r: ParsedAbstention, cacheSalt?: string): Promise<AbstentionTask> {
  const key = abstainKeyOf(r.option);
  const n = r.examples.length;
  const data = { u: new Float64Array(n), answerable: new Uint8Array(n), right: new Uint8Array(n), byDefault: new Uint8Array(n) };
  const appliedTasks = new Set<string | null>();
  // Each example asked with the task's abstain option and no threshold: the default rule's decision comes back too.
  const asAsked = (spec: QuestionSpec) => {
    const asked = withAbstainOption(spec, r.option)!;
    return { asked, key, appended: asked !== spec };
  };
  const reading = { ...context, abstentions: { abstentionFor: asAsked } };
  const t0 = performance.now();
  // An example with images is read as the image route reads a request: its images placed in its state.
  const asServed = r.examples.map((e) => (e.images.length ? { ...e, state: stateWithImages(e.state, e.images), images: inPromptOrder(e.images).map((i) => i.bytes) } : { ...e, images: undefined }));
  await forEachExample(reading, asServed, (i, q) => {
    const label = r.examples[i].answer;
    const others = [...q.probabilities.keys()].filter((k) => k !== key);
    data.u[i] = q.abstention!.unknown;
    data.byDefault[i] = q.abstention!.abstained ? 1 : 0;
    data.answerable[i] = label === null ? 0 : 1;
    data.right[i] = label !== null && choiceAnswer(others, q.probabilities).choice === label ? 1 : 0;
    appliedTasks.add(q.taskIdentity ?? null);
  }, cacheSalt);
  const read_ms = performance.now() - t0;
  if (appliedTasks.size > 1) throw new TaskChangedError();
  const record = fitThreshold(r.id, data);
  const set = optionSetOf(r.asked, key);
  const abstainOption = r.asked.options.find((o) => o.key === key)!;
  return {
    id: r.id,
    type: set.type as AbstentionTask['type'],
    instructions: set.instructions,
    match: r.match,
    option: r.option,
    abstain_option: { key, description: abstainOption.description },
    options: set.options,
    match_key: set.match_key,
    threshold: record.applied ? record.fitted_threshold : null,
    applied: record.applied,
    fitted_with: [...appliedTasks][0] ?? null,
    record: { ...record, examples_sha256: createHash('sha256').update(JSON.stringify(r.raw)).digest('hex'), read_ms },
    fingerprint: fingerprint.hash,
    fingerprint_components: fingerprint.components,
    created_at: new Date().toISOString(),
  };
}
