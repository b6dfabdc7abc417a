/**
 * A question's attention on split-key attention (`stateAttention: 'split-key'`, csrc/kernels/math/split_key_math.h): its
 * rows over its state's keys (the state tier) and over its shared segment and itself (the questions' own runs, planned
 * in a tier of their own, causal): on CUDA our kernel reads the keys and values in place in the KV cache; on the CPU
 * its host twin does, with the same arithmetic. Here, through the real engine: against float64 (fp32), beside the varlen form (bf16), the
 * same bits for a question asked cold, from the prefix cache, beside another state and in steps of 7 tokens, for a
 * family without windows (Qwen3) and one with a sliding window and soft-capped scores (Gemma 3); and refused where no
 * cascade runs. (In the fixed form of CUDA graphs: buckets.test.ts; the tiers on random plans: gpu-forward.test.ts.)
 */
import { NativeLoadOptions } from '../../src/engine/native';
import { bits, withEngine } from '../helpers/engines';
import { tinyModel } from '../helpers/models';
import { maxAbsDiff, referenceLogits } from '../helpers/reference';
import { tokenizeTexts } from '../helpers/tokens';

const splitKey: Partial<NativeLoadOptions> = { attention: 'cascade', stateAttention: 'split-key', registerBoundary: 'before' };

describe.each(['tiny-qwen3', 'tiny-gemma3'])('%s', (name) => {
  const dir = tinyModel(name);

  test.each(['fp32', 'bf16'] as const)('%s: a question has the same bits cold, cached, beside another state and in small steps', async (dtype) => {
    const { state, questions, labels } = await tokenizeTexts(dir);
    const q = (tokens: number[]) => ({ tokens, labelIds: labels });
    const asked = { state, questions: [q(questions[0]), q(questions[1])] };
    const other = { state: state.slice(0, 13), questions: [q(questions[2])] };
    const answers = (maxStepTokens: number) =>
      withEngine(dir, { ...splitKey, dtype, maxStepTokens }, async (e) => {
        expect(e.info).toMatchObject({ attention: 'cascade', stateAttention: 'split-key' });
        const cold = await e.answer(asked);
        const cached = await e.answer(asked);
        expect(cached.cachedTokens).toBe(state.length);
        const [, beside] = await e.answerBatch([other, asked]);
        return [cold, cached, beside].map((r) => r.answers.map((a) => bits(a.labelLogits)));
      });
    const whole = await answers(2048);
    expect(whole[1]).toEqual(whole[0]);
    expect(whole[2]).toEqual(whole[0]);
    expect(await answers(7)).toEqual(whole);
  });
});

test('fp32: the label logits within 1e-5 of float64, and of the varlen state tier; bf16 within bf16 rounding of it', async () => {
  const dir = tinyModel('tiny-qwen3');
  const { state, questions, labels } = await tokenizeTexts(dir);
  const request = { state, questions: questions.map((tokens) => ({ tokens, labelIds: labels })) };
  const logits = (options: Partial<NativeLoadOptions>) =>
    withEngine(dir, { attention: 'cascade', registerBoundary: 'before', ...options }, async (e) => (await e.answer(request)).answers.map((a) => a.labelLogits));
  const refs = await referenceLogits(dir, questions.map((tokens) => [...state, ...tokens]), 0);
  const split = await logits({ dtype: 'fp32', stateAttention: 'split-key' });
  const varlen = await logits({ dtype: 'fp32', stateAttention: 'varlen' });
  split.forEach((l, i) => {
    const ref = Array.from(labels, (id) => refs[i][0][id]);
    expect(maxAbsDiff(Array.from(l), ref)).toBeLessThanOrEqual(1e-5);
    expect(maxAbsDiff(Array.from(l), Array.from(varlen[i]))).toBeLessThanOrEqual(1e-5);
  });
  // Another kernel did run: another order of the same sums.
  expect(split.some((l, i) => maxAbsDiff(Array.from(l), Array.from(varlen[i])) > 0)).toBe(true);
  // bf16: the state tier's q, keys and output in bf16 (as FlashAttention-2 takes and gives them on CUDA).
  const [split16, varlen16] = [await logits({ dtype: 'bf16', stateAttention: 'split-key' }), await logits({ dtype: 'bf16', stateAttention: 'varlen' })];
  split16.forEach((l, i) => expect(maxAbsDiff(Array.from(l), Array.from(varlen16[i]))).toBeLessThanOrEqual(5e-2));
});

test('split-key is refused where no cascade runs, and a name of neither value with both listed', async () => {
  const dir = tinyModel('tiny-qwen3');
  await expect(withEngine(dir, { stateAttention: 'split-key' }, async () => undefined)).rejects.toMatchObject({
    code: 'BAD_REQUEST',
    message: expect.stringContaining('split-key needs attention cascade'),
  });
  await expect(withEngine(dir, { attention: 'cascade', stateAttention: 'flash' as 'varlen' }, async () => undefined)).rejects.toMatchObject({
    code: 'BAD_REQUEST',
    message: 'stateAttention must be varlen or split-key, got flash',
  });
  // Without the cascade the engine says nothing of a state tier.
  expect(await withEngine(dir, {}, async (e) => e.info.stateAttention)).toBeUndefined();
});
