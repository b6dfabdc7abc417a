/**
 * Steps padded to fixed shapes for CUDA graphs (`cudaGraphs: true`, csrc/batch/step_buckets.h), run on the CPU: a
 * step's new tokens (a warm question's to a cold prefill's) and keys padded up to a bucket, the padding a state of its
 * own in the KV cache's scratch slot.
 * Padding must change no answer bit: the same calls (cold, warm from the prefix cache, two states in one call, steps
 * of 7 tokens) answered with and without it, on the batch-invariant kernels in fp32 and bf16 and on the cascade, for a
 * family with sliding windows and soft-capping (Gemma 3) and one without (Qwen3).
 *
 * With the cascade, a bucket's steps are planned in the fixed form and run as CUDA graphs would
 * (csrc/runner/step_graphs.h): the first step of each launch shape keeps its inputs as the graph's buffers, later ones
 * are copied into them and run from there, their launches checked against the first's (a difference throws). On the
 * GPU's forward (ATen's GEMMs, whose CPU form is not batch-invariant, and the fused row kernels) the answers are
 * compared within fp32 rounding instead of bit for bit. A step whose state a sliding window cuts (Gemma 3's here) has
 * no fixed form and runs as it is.
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
  ['bf16 cascade', { dtype: 'bf16', attention: 'cascade' }],
  ['bf16 cascade, split-key (the state tier, the questions\' own)', { dtype: 'bf16', attention: 'cascade', stateAttention: 'split-key' }],
  ['fp32 fused cascade (the GPU forward)', { dtype: 'fp32', attention: 'cascade', kernels: 'fused' }],
];

describe.each(['tiny-qwen3', 'tiny-gemma3'])('%s', (name) => {
  const dir = tinyModel(name);

  test.each(variants)('%s: padded steps answer with the bits of unpadded ones', async (_label, options) => {
    const { state, questions, labels } = await tokenizeTexts(dir);
    const q = (tokens: number[]) => ({ tokens, labelIds: labels });
    const a = { state, questions: [q(questions[0]), q(questions[1]), q([...questions[0].slice(0, 3), ...questions[2]])] };
    const b = { state: state.slice(0, 11), questions: [q(questions[2])] };
    // Three-token questions about a four-token state (inside Gemma 3's window): the second and third are steps of one
    // launch shape on the cached state, with other contents.
    const short = (i: number) => ({ state: state.slice(0, 4), questions: [q(questions[i].slice(0, 3))] });
    // A cold state of over 256 tokens (a prefill's bucket: 320; none of its blocks cached), twice with other contents: the
    // second replays the first.
    const long = (i: number) => ({ state: [...state.slice(i), ...state, ...state, ...state, ...state, ...state, ...state].slice(0, 290), questions: [q(questions[0])] });
    const run = (cudaGraphs: boolean, maxStepTokens = 2048) =>
      withEngine(dir, { ...options, cudaGraphs, maxStepTokens, registerBoundary: 'before' }, async (e) => {
        expect(e.info.cudaGraphs).toBe(cudaGraphs);
        const results = [await e.answer(a), await e.answer(a), ...(await e.answerBatch([a, b])), await e.answer(b)];
        for (const i of [0, 1, 2]) results.push(await e.answer(short(i)));
        for (const i of [1, 2]) results.push(await e.answer(long(i)));
        return { results, padding: results.reduce((n, r) => n + r.paddingTokens, 0) };
      });
    for (const step of [2048, 7]) {
      const [plain, padded] = [await run(false, step), await run(true, step)];
      expect(plain.padding).toBe(0);
      expect(plain.results.every((r) => r.graphReplays === 0)).toBe(true);
      expect(padded.padding).toBeGreaterThan(0);
      // Only the cascade plans steps in the fixed form; the third short call replays the second's graph.
      if (options.attention !== 'cascade') expect(padded.results.every((r) => r.graphReplays === 0)).toBe(true);
      else expect(padded.results[7].graphReplays).toBeGreaterThan(0);
      // Qwen3's long calls, in one step, share a launch shape; Gemma 3's window cuts their state (no fixed form there).
      if (options.attention === 'cascade' && name === 'tiny-qwen3' && step === 2048) {
        expect(padded.results[9].paddingTokens).toBeGreaterThan(0);
        expect(padded.results[9].graphReplays).toBe(1);
      }
      expect(padded.results[1].cachedTokens).toBe(state.length);
      const logits = (r: typeof plain) => r.results.map((x) => x.answers.map((y) => y.labelLogits));
      if (options.kernels !== 'fused') {
        expect(logits(padded).map((r) => r.map(bits))).toEqual(logits(plain).map((r) => r.map(bits)));
        continue;
      }
      const want = logits(plain).flat();
      const worst = Math.max(...logits(padded).flat().flatMap((l, i) => Array.from(l, (v, j) => Math.abs(v - want[i][j]))));
      expect(worst).toBeLessThan(1e-5);
    }
  });
});
