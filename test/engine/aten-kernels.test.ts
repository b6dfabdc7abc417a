/**
 * The ATen kernels (csrc/kernels/aten/): the layer arithmetic the CUDA engine runs, here run on the
 * CPU (`kernels: 'aten'`) so that CI, which has no GPU, checks that path against the float64
 * reference: the embedding, weights and KV cache handled as on a device, the per-step visibility
 * mask over a cached prefix, shared question text and several states. Also the readout's
 * log-probabilities (one definition with the CUDA kernel) against the logits at each temperature.
 *
 * And the GPU's form of attention, the cascade (`attention: 'cascade'`, csrc/kernels/cascade/: tiers
 * merged by log-sum-exp), on the CPU over its fp32 reference: against the same float64 reference for
 * every family (Mistral's and Gemma 3's windows bite: the tiny models' are 24 and 16 tokens; Gemma 3
 * soft-caps), cold, cached, shared, at other block and step sizes, several states in one call.
 */
import { Engine } from '../../src/engine/engine';
import { NativeLoadOptions } from '../../src/engine/native';
import { tinyModelNames } from '../../src/testmodels/specs';
import { tinyModel } from '../helpers/models';
import { logSoftmax, maxAbsDiff, referenceLogits } from '../helpers/reference';
import { TokenizedTexts, tokenizeTexts } from '../helpers/tokens';

// The mixtures of experts share one MoE block on every kernel set: Mixtral differs from the two Qwen ones only in
// how its weights are named (parity.test.ts reads every one), so it is left out here, for the suite's time.
const atenModels = tinyModelNames.filter((name) => name !== 'tiny-mixtral');

describe.each(atenModels)('%s on the ATen kernels', (name) => {
  const dir = tinyModel(name);
  let aten: Engine;
  let texts: TokenizedTexts;
  /** Two questions sharing their first tokens (a shared segment) and one alone. */
  let qs: number[][];
  /** The reference logits of state + each of qs, from one run of the reference (it imports torch: seconds). */
  let refs: Float64Array[][];
  beforeAll(async () => {
    aten = await Engine.open({ path: dir, dtype: 'fp32', threads: 2, kernels: 'aten', registerBoundary: 'before' });
    texts = await tokenizeTexts(dir);
    const { state, questions } = texts;
    qs = [questions[0], questions[1], [...questions[0].slice(0, 3), ...questions[1]]];
    refs = await referenceLogits(dir, qs.map((q) => [...state, ...q]), 1);
  });
  afterAll(async () => aten.close());

  test('reports its kernels, device and that batch invariance is not promised', () => {
    expect(aten.info.kernels).toBe('aten');
    expect(aten.info.device.mode).toBe('cpu');
    expect(aten.info.batchInvariant).toBe(false);
  });

  test('fp32 logits agree with the float64 reference to 1e-4 at every position', async () => {
    const got = await aten.logitsAll([...texts.state, ...qs[0]]);
    expect(Math.max(...got.map((row, i) => maxAbsDiff(row, refs[0][i])))).toBeLessThanOrEqual(1e-4);
  });

  test('packed questions over a cached state match the reference, cold and cached, and at another block size', async () => {
    const { state, labels } = texts;
    const request = { state, questions: qs.map((tokens) => ({ tokens, labelIds: labels })) };
    const cold = await aten.answer(request);
    const cached = await aten.answer(request);
    expect(cold.cachedTokens).toBe(0);
    expect(cached.cachedTokens).toBe(state.length);
    const small = await Engine.open({ path: dir, dtype: 'fp32', threads: 2, kernels: 'aten', blockSize: 5, maxStepTokens: 7 });
    const stepped = await small.answer(request);
    await small.close();
    for (const res of [cold, cached, stepped])
      res.answers.forEach((a, i) => {
        const last = refs[i][refs[i].length - 1];
        expect(maxAbsDiff(a.labelLogits, labels.map((id) => last[id]))).toBeLessThanOrEqual(1e-4);
      });
  });

  /**
   * An engine with `options` (and another in steps of 7 tokens over blocks of 5), checked: its info, fp32 logits at
   * every position, and the packed questions cold, cached and in small steps within 1e-4 of the reference.
   */
  async function expectReference(options: Partial<NativeLoadOptions>, info: Record<string, unknown>) {
    const { state, labels } = texts;
    const request = { state, questions: qs.map((tokens) => ({ tokens, labelIds: labels })) };
    const engine = await Engine.open({ path: dir, dtype: 'fp32', threads: 2, registerBoundary: 'before', ...options });
    const small = await Engine.open({ path: dir, dtype: 'fp32', threads: 2, blockSize: 5, maxStepTokens: 7, ...options });
    try {
      expect(engine.info).toMatchObject(info);
      const all = await engine.logitsAll([...state, ...qs[0]]);
      expect(Math.max(...all.map((row, i) => maxAbsDiff(row, refs[0][i])))).toBeLessThanOrEqual(1e-4);
      const cold = await engine.answer(request);
      const cached = await engine.answer(request);
      expect(cached.cachedTokens).toBe(state.length);
      for (const res of [cold, cached, await small.answer(request)])
        res.answers.forEach((a, i) => {
          const last = refs[i][refs[i].length - 1];
          expect(maxAbsDiff(a.labelLogits, labels.map((id) => last[id]))).toBeLessThanOrEqual(1e-4);
        });
    } finally {
      await Promise.all([engine.close(), small.close()]);
    }
  }

  test('the cascade: fp32 logits at every position, and packed questions cold, cached and in small steps, within 1e-4 of the reference', () =>
    expectReference({ attention: 'cascade' }, { attention: 'cascade' }));

  test('the fused forward (row kernels, cascade), also in padded steps: within 1e-4 of the reference', () =>
    expectReference({ kernels: 'fused', cudaGraphs: true }, { kernels: 'fused', attention: 'cascade', batchInvariant: false, cudaGraphs: true }));

  test('the cascade: two states in one call are the bits of each alone', async () => {
    const { state, questions, labels } = texts;
    const a = { state, questions: [{ tokens: questions[0], labelIds: labels }, { tokens: qs[2], labelIds: labels }] };
    const b = { state: state.slice(0, 20), questions: [{ tokens: questions[1], labelIds: labels }] };
    const fresh = await Engine.open({ path: dir, dtype: 'fp32', threads: 2, attention: 'cascade', prefixCache: false });
    try {
      const [both0, both1] = await fresh.answerBatch([a, b]);
      const alone0 = await fresh.answer(a), alone1 = await fresh.answer(b);
      expect(both0.answers.map((x) => Array.from(x.labelLogits))).toEqual(alone0.answers.map((x) => Array.from(x.labelLogits)));
      expect(Array.from(both1.answers[0].labelLogits)).toEqual(Array.from(alone1.answers[0].labelLogits));
    } finally {
      await fresh.close();
    }
  });

  test('two states in one call match each alone', async () => {
    const { state, questions, labels } = await tokenizeTexts(dir);
    const a = { state, questions: [{ tokens: questions[0], labelIds: labels }] };
    const b = { state: state.slice(0, 20), questions: [{ tokens: questions[1], labelIds: labels }] };
    const fresh = await Engine.open({ path: dir, dtype: 'fp32', threads: 2, kernels: 'aten', prefixCache: false });
    const [both0, both1] = await fresh.answerBatch([a, b]);
    const alone0 = await fresh.answer(a), alone1 = await fresh.answer(b);
    await fresh.close();
    expect(maxAbsDiff(both0.answers[0].labelLogits, alone0.answers[0].labelLogits)).toBeLessThanOrEqual(1e-5);
    expect(maxAbsDiff(both1.answers[0].labelLogits, alone1.answers[0].labelLogits)).toBeLessThanOrEqual(1e-5);
  });
});

test.each(['engine', 'aten'] as const)('label log-probabilities are log softmax(logits / T) on the %s kernels', async (kernels) => {
  const dir = tinyModel('tiny-qwen3');
  const engine = await Engine.open({ path: dir, threads: 2, kernels });
  const { state, questions, labels } = await tokenizeTexts(dir);
  const temperatures = [1, 0.5, 2.5];
  const res = await engine.answer({ state, questions: temperatures.map((temperature) => ({ tokens: questions[0], labelIds: labels, temperature })) });
  await engine.close();
  res.answers.forEach((a, i) => {
    const expected = logSoftmax(Array.from(a.labelLogits, (x) => x / temperatures[i]));
    expect(maxAbsDiff(a.labelLogProbs, expected)).toBeLessThanOrEqual(2e-6);
  });
});

test('a CUDA device on this CPU build, and unknown kernels, are refused with a clear error', async () => {
  const dir = tinyModel('tiny-qwen3');
  await expect(Engine.open({ path: dir, device: 'cuda' })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('built without CUDA') });
  await expect(Engine.open({ path: dir, device: 'tpu' })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('cpu or cuda') });
  await expect(Engine.open({ path: dir, kernels: 'fast' as 'aten' })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('engine, aten or fused') });
  await expect(Engine.open({ path: dir, attention: 'flash' as 'cascade' })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('direct or cascade') });
  // An option of another type is refused by name, never ignored (the addon's OptionReader).
  await expect(Engine.open({ path: dir, cudaGraphs: 'on' as unknown as boolean })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: 'options.cudaGraphs must be true or false' });
  await expect(Engine.open({ path: dir, threads: '2' as unknown as number })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: 'options.threads must be a number' });
  // Each choice is read through its one table (csrc/common/choices.h): a name of none of its values is refused with them listed.
  await expect(Engine.open({ path: dir, dtype: 'fp16' as 'bf16' })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: 'dtype must be fp32 or bf16, got fp16' });
  await expect(Engine.open({ path: dir, registerBoundary: 'never' as 'after' })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: 'registerBoundary must be after or before, got never' });
  await expect(Engine.open({ path: dir, isa: 'sse9' as 'avx2' })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: 'isa must be avx512-bf16, avx512, avx2 or generic, got sse9' });
  await expect(Engine.open({ path: dir, dtype: 16 as unknown as 'bf16' })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: 'options.dtype must be a string' });
});
