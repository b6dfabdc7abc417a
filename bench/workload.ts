/**
 * What the benchmarks share: the ~1,000-token state (as text, or as a model's token ids), its topic question, and
 * the statistics they report.
 */
import { ModelTokenizer } from '../src/tokenizer/tokenizer';

const paragraph =
  'The committee reviewed the quarterly figures, noted that shipping costs had risen by a third, and asked the regional offices ' +
  'to report any delays longer than two days before the next meeting, together with the names of the carriers involved. ';

/** About 1,000 tokens of state; `label` changes its first words, so a new label misses the prefix cache. */
export const dossier = (label: string | number) => `Dossier ${label}. ` + paragraph.repeat(20);

/** A 4-option choice about the dossier; `i` changes its text. */
export const topicQuestion = (i: number) => ({ type: 'choice', instructions: `Question ${i}: what is the main topic?`, criteria: { costs: null, delays: null, carriers: null, staffing: null } });

export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
export const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];

/** `n` token ids of the paragraph, repeated, in the tokenizer of the model in `dir` (the engine benchmarks' prefill). */
export async function paragraphTokens(dir: string, n: number): Promise<number[]> {
  const unit = await (await ModelTokenizer.load(dir)).encode(paragraph);
  const out: number[] = [];
  while (out.length < n) out.push(...unit);
  return out.slice(0, n);
}
