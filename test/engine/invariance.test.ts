/**
 * Batch invariance, exactly: a question's label logits are bit-identical
 * whether it is computed alone or in a batch of any composition (other
 * questions, other states, questions sharing its leading text), cold or from
 * the prefix cache, in one forward step or cut into many, in fp32 and bf16, on
 * every architecture, and at every instruction set level this CPU runs (the
 * default, its best, on every architecture; the lower ones on one); with int8
 * weights too (bf16, every architecture; and its AVX2 and generic paths). (oneDNN's
 * kernels, kept behind batchInvariant: false, are not: their GEMM result for a
 * row changes with M.)
 */
import { Engine } from '../../src/engine/engine';
import { Dtype, IsaLevel, NativeAnswerRequest, NativeLoadOptions, Quantization } from '../../src/engine/native';
import { uniformStream } from '../../src/common/prng';
import { tinyModelNames } from '../../src/testmodels/specs';
import { runnableIsaLevels } from '../helpers/cpu';
import { bits, withEngine } from '../helpers/engines';
import { tinyModel } from '../helpers/models';
import { tokenizeTexts, TokenizedTexts } from '../helpers/tokens';


/** The label logits of every question of every request, as bit strings. */
async function logitBits(e: Engine, requests: NativeAnswerRequest[]): Promise<string[][]> {
  const results = await e.answerBatch(requests);
  return results.map((r) => r.answers.map((a) => bits(a.labelLogits)));
}

/** A second state and extra questions: the batches mix states, and questions that share their leading tokens. */
function variedRequests(t: TokenizedTexts, seed: number): { states: number[][]; questions: number[][] } {
  const rnd = uniformStream(seed);
  const states = [t.state, t.state.slice(7).concat(t.state.slice(0, 7)), t.state.slice(0, 9)];
  const shared = t.questions[1].slice(0, -3);  // an option list several questions begin with
  const questions = [...t.questions, ...t.questions.map((q) => [...shared, ...q.slice(Math.floor(rnd() * 3))])];
  return { states, questions };
}

/**
 * Every (state, question) alone and cold, then the same in batches of every composition, cached and
 * cut into steps: the label logits must be the same bits. isa: the kernels' level (default: the best).
 */
async function expectInvariant(dir: string, t: TokenizedTexts, dtype: Dtype, isa?: IsaLevel, quantization?: Quantization) {
  const { states, questions } = variedRequests(t, 11);
  const ask = (state: number[], qs: number[][]): NativeAnswerRequest => ({ state, questions: qs.map((tokens) => ({ tokens, labelIds: t.labels })) });
  // Reference: every (state, question) alone, each on a fresh cache (no prefix cache: always cold).
  const alone = new Map<string, string>();
  await withEngine(dir, { dtype, isa, quantization, prefixCache: false }, async (e) => {
    if (isa) expect(e.info.kernels).toBe(isa === 'avx512-bf16' && dtype === 'fp32' ? 'avx512' : isa);
    if (quantization) expect(e.info.quantization).toBe(quantization);
    for (let s = 0; s < states.length; s++)
      for (let q = 0; q < questions.length; q++) alone.set(`${s}/${q}`, (await logitBits(e, [ask(states[s], [questions[q]])]))[0][0]);
  });
  const expectAlone = (got: string[][], layout: [number, number[]][]) =>
    layout.forEach(([s, qs], r) => qs.forEach((q, i) => expect(`${s}/${q}: ${got[r][i]}`).toBe(`${s}/${q}: ${alone.get(`${s}/${q}`)}`)));

  for (const options of [{}, { maxStepTokens: 7 }, { blockSize: 5 }] as Partial<NativeLoadOptions>[]) {
    await withEngine(dir, { dtype, isa, quantization, ...options }, async (e) => {
      const all = questions.map((_, i) => i);
      // One request with every question (cold state), then reversed (cached state).
      expectAlone(await logitBits(e, [ask(states[0], questions)]), [[0, all]]);
      const reversed = [...all].reverse();
      expectAlone(await logitBits(e, [ask(states[0], reversed.map((i) => questions[i]))]), [[0, reversed]]);
      // Several requests in one call: different states (one cold), overlapping question sets, a repeated question.
      const layout: [number, number[]][] = [[1, [0, 4, 5]], [0, [2]], [2, [5, 6, 1, 1]], [0, [7, 3]]];
      expectAlone(await logitBits(e, layout.map(([s, qs]) => ask(states[s], qs.map((q) => questions[q])))), layout);
    });
  }
}

describe.each(tinyModelNames)('%s: bit-identical label logits in any batch', (name) => {
  const dir = tinyModel(name);
  let t: TokenizedTexts;
  beforeAll(async () => {
    t = await tokenizeTexts(dir);
  });

  test.each(['fp32', 'bf16'] as Dtype[])('%s: alone and cold = batched, reordered, mixed with other states, cached, cut into steps', (dtype) =>
    expectInvariant(dir, t, dtype));
});

// Every level this CPU runs, forced, on one architecture (the default above runs the level measured fastest).
describe.each(runnableIsaLevels())('tiny-qwen3 at level %s: bit-identical label logits in any batch', (isa) => {
  const dir = tinyModel('tiny-qwen3');
  let t: TokenizedTexts;
  beforeAll(async () => {
    t = await tokenizeTexts(dir);
  });

  test.each(['fp32', 'bf16'] as Dtype[])('%s', (dtype) => expectInvariant(dir, t, dtype, isa));
});

// int8 weights (csrc/kernels/cpu/gemm/int8_linear.h): bf16 on every architecture, on the CPU's best path
// (AVX-512 VNNI where it has it); and the lower paths (AVX2, generic) on one.
// Of the mixtures of experts, the one with a shared expert: int8 changes only the experts' GEMMs, which bf16 above
// shows invariant in all three (for the suite's time).
const int8Models = tinyModelNames.filter((name) => name !== 'tiny-qwen3-moe' && name !== 'tiny-mixtral');
describe.each(int8Models)('%s, int8 weights: bit-identical label logits in any batch', (name) => {
  const dir = tinyModel(name);
  test('bf16', async () => expectInvariant(dir, await tokenizeTexts(dir), 'bf16', undefined, 'int8'));
});
const lowerInt8Paths = (['avx2', 'generic'] as IsaLevel[]).filter((isa) => runnableIsaLevels().includes(isa));
test.each(lowerInt8Paths)('tiny-qwen3, int8 weights on the %s path: bit-identical label logits in any batch', async (isa) => {
  const dir = tinyModel('tiny-qwen3');
  await expectInvariant(dir, await tokenizeTexts(dir), 'bf16', isa, 'int8');
});

/** tiny-qwen3's answers to every question on the invariant kernels and on oneDNN's, in one dtype. */
async function invariantAndOnednn(dtype: Dtype) {
  const dir = tinyModel('tiny-qwen3');
  const t = await tokenizeTexts(dir);
  const request = { state: t.state, questions: t.questions.map((tokens) => ({ tokens, labelIds: t.labels })) };
  const invariant = await withEngine(dir, { dtype }, (e) => e.answer(request));
  const onednn = await withEngine(dir, { dtype, batchInvariant: false }, async (e) => {
    expect(e.info).toMatchObject({ batchInvariant: false, dtype });
    return e.answer(request);
  });
  return { invariant: invariant.answers, onednn: onednn.answers };
}

test('oneDNN kernels (batchInvariant: false) still answer within 1e-5 of the invariant ones (fp32)', async () => {
  const { invariant, onednn } = await invariantAndOnednn('fp32');
  onednn.forEach((a, i) => a.labelLogits.forEach((x, j) => expect(Math.abs(x - invariant[i].labelLogits[j])).toBeLessThanOrEqual(1e-5)));
});

// oneDNN's bf16 matmul needs AVX-512; elsewhere an engine without invariance computes bf16 in fp32 (csrc/engine/engine.cpp).
const onednnHasBf16 = runnableIsaLevels().includes('avx512');
(onednnHasBf16 ? test : test.skip)("bf16: label probabilities within 2e-3 of oneDNN's bf16 kernels (batchInvariant: false)", async () => {
  const { invariant, onednn } = await invariantAndOnednn('bf16');
  onednn.forEach((a, i) =>
    a.labelLogProbs.forEach((x, j) => expect(Math.abs(Math.exp(x) - Math.exp(invariant[i].labelLogProbs[j]))).toBeLessThanOrEqual(2e-3)));
});

(onednnHasBf16 ? test.skip : test)('bf16 on oneDNN (batchInvariant: false) without AVX-512: computed in fp32, and said so', async () => {
  await withEngine(tinyModel('tiny-qwen3'), { dtype: 'bf16', batchInvariant: false }, async (e) => {
    expect(e.info).toMatchObject({ batchInvariant: false, dtype: 'fp32', dtypeNote: expect.stringContaining('oneDNN has no bf16 matmul') });
  });
});

test('an empty state is allowed: questions attend to their own tokens only', async () => {
  const dir = tinyModel('tiny-qwen3');
  const t = await tokenizeTexts(dir);
  await withEngine(dir, { dtype: 'fp32' }, async (e) => {
    const r = await e.answer({ state: [], questions: [{ tokens: t.questions[0], labelIds: t.labels }] });
    expect(r.answers[0].labelLogits.length).toBe(t.labels.length);
    expect(r.stateTokens).toBe(0);
  });
});
