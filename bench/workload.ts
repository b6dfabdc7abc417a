/**
 * What the benchmarks share: the ~1,000-token state (as text, or as a model's token ids), its topic question, and
 * the statistics they report, and the engine's end-to-end timing.
 */
import { softmax } from '../src/answering/answers';
import type { Engine } from '../src/engine/engine';
import type { NativeAnswerRequest } from '../src/engine/native';
import { ModelTokenizer } from '../src/tokenizer/tokenizer';

const paragraph =
  'The committee reviewed the quarterly figures, noted that shipping costs had risen by a third, and asked the regional offices ' +
  'to report any delays longer than two days before the next meeting, together with the names of the carriers involved. ';

/** About 1,000 tokens of state; `label` changes its first words, so a new label misses the prefix cache. */
export const dossier = (label: string | number) => `Dossier ${label}. ` + paragraph.repeat(20);

/** A 4-option choice about the dossier; `i` changes its text. */
export const topicQuestion = (i: number) => ({ type: 'choice', instructions: `Question ${i}: what is the main topic?`, criteria: { costs: null, delays: null, carriers: null, staffing: null } });

/** A response's `x-service-stages` header (`name=ms;...`) as numbers by stage name. */
export const serviceStages = (header: string): Record<string, number> =>
  Object.fromEntries(header.split(';').map((kv) => kv.split('=')).map(([k, v]) => [k, Number(v)]));

export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
export const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];

/** `n` token ids of the paragraph, repeated, in the tokenizer of the model in `dir` (the engine benchmarks' prefill). */
export async function paragraphTokens(dir: string, n: number): Promise<number[]> {
  const unit = await (await ModelTokenizer.load(dir)).encode(paragraph);
  const out: number[] = [];
  while (out.length < n) out.push(...unit);
  return out.slice(0, n);
}

/**
 * The engine's end-to-end time for one request, answered `runs` times (no warm-up: the caller's): the median of
 * state + questions + readout, and the first question's label probabilities of the last run.
 */
export async function timeEngineAnswers(engine: Engine, request: NativeAnswerRequest, runs: number): Promise<{ ms: number; probs: number[] }> {
  const times: number[] = [];
  let logits!: Float32Array;
  for (let i = 0; i < runs; i++) {
    const r = await engine.answer(request);
    times.push(r.timing.stateMs + r.timing.questionsMs + r.timing.readoutMs);
    logits = r.answers[0].labelLogits;
  }
  return { ms: median(times), probs: softmax(logits, 1) };
}
