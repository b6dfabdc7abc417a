/**
 * Steps padded to fixed shapes for CUDA graphs (`cudaGraphs: true`, csrc/batch/step_buckets.h), run eagerly on the
 * CPU: a small step's new tokens and keys padded up to a bucket, the padding a state of its own in the KV cache's
 * scratch slot. Padding must change no answer bit: the same calls (cold, warm from the prefix cache, two states in one
 * call, steps of 7 tokens) answered with and without it, on the batch-invariant kernels in fp32 and bf16 and on the
 * cascade, for a family with sliding windows and soft-capping (Gemma 3) and one without (Qwen3).
 */
import { tinyModel } from '../helpers/models';
import { bits, withEngine } from '../helpers/engines';
import { tokenizeTexts } from '../helpers/tokens';
import { NativeLoadOptions } from '../../src/engine/native';

type Variant = [string, Partial<NativeLoadOptions>];
const variants: Variant[] = [
  ['fp32', { dtype: 'fp32' }],
  ['bf16', { dtype: 'bf16' }],
  ['fp32 cascade', { dtype: 'fp32', attention: 'cascade' }],
];

describe.each(['tiny-qwen3', 'tiny-gemma3'])('%s', (name) => {
  const dir = tinyModel(name);

  test.each(variants)('%s: padded steps answer with the bits of unpadded ones', async (_label, options) => {
    const { state, questions, labels } = await tokenizeTexts(dir);
    const q = (tokens: number[]) => ({ tokens, labelIds: labels });
    const a = { state, questions: [q(questions[0]), q(questions[1]), q([...questions[0].slice(0, 3), ...questions[2]])] };
    const b = { state: state.slice(0, 11), questions: [q(questions[2])] };
    const run = (cudaGraphs: boolean, maxStepTokens = 2048) =>
      withEngine(dir, { ...options, cudaGraphs, maxStepTokens, registerBoundary: 'before' }, async (e) => {
        expect(e.info.cudaGraphs).toBe(cudaGraphs);
        const results = [await e.answer(a), await e.answer(a), ...(await e.answerBatch([a, b]))];
        return { results, padding: results.reduce((n, r) => n + r.paddingTokens, 0) };
      });
    for (const step of [2048, 7]) {
      const [plain, padded] = [await run(false, step), await run(true, step)];
      expect(plain.padding).toBe(0);
      expect(padded.padding).toBeGreaterThan(0);
      expect(padded.results[1].cachedTokens).toBe(state.length);
      expect(padded.results.map((r) => r.answers.map((x) => bits(x.labelLogits)))).toEqual(plain.results.map((r) => r.answers.map((x) => bits(x.labelLogits))));
    }
  });
});
