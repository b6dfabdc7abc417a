/**
 * Parity of the engine with an independent float64 reference (Debian's
 * python3-torch, test/reference/ref_model.py) on every supported architecture.
 */
import { Engine } from '../../src/engine/engine';
import { testModels, tinyModelNames } from '../../src/testmodels/specs';
import { tinyModel, withEditedConfig } from '../helpers/models';
import { logSoftmax, maxAbs, maxAbsDiff, referenceLogits } from '../helpers/reference';
import { TokenizedTexts, tokenizeTexts } from '../helpers/tokens';

describe.each(tinyModelNames)('%s against the float64 reference', (name) => {
  const dir = tinyModel(name);
  let fp32: Engine;
  let bf16: Engine;
  let texts: TokenizedTexts;
  /** The reference logits of state + each question, from one run of the reference (it imports torch: seconds). */
  let refs: Float64Array[][];
  beforeAll(async () => {
    fp32 = await Engine.open({ path: dir, dtype: 'fp32', threads: 2 });
    bf16 = await Engine.open({ path: dir, dtype: 'bf16', threads: 2 });
    texts = await tokenizeTexts(dir);
    refs = await referenceLogits(dir, texts.questions.map((q) => [...texts.state, ...q]), 1);
  });
  afterAll(async () => {
    await fp32.close();
    await bf16.close();
  });

  test('fp32 logits agree to 1e-4 at every position; bf16 error is reported', async () => {
    const { state, questions } = texts;
    // Longer than several KV blocks and, for Mistral, than its sliding window.
    const seq = [...state, ...questions[0]];
    expect(seq.length).toBeGreaterThan(48);
    const ref = refs[0];
    const got = await fp32.logitsAll(seq);
    const perPosition = got.map((row, i) => maxAbsDiff(row, ref[i]));
    expect(Math.max(...perPosition)).toBeLessThanOrEqual(1e-4);
    const gotBf16 = await bf16.logitsAll(seq);
    const bf16Err = Math.max(...gotBf16.map((row, i) => maxAbsDiff(row, ref[i])));
    const scale = maxAbs(ref);
    console.log(`${name}: fp32 max|Δlogit| ${Math.max(...perPosition).toExponential(2)}, bf16 max|Δlogit| ${bf16Err.toExponential(2)} (logit scale ${scale.toFixed(2)})`);
    // A mixture of experts' routing is not continuous: where a token's k-th and next experts score within bf16's
    // rounding of each other, bf16 sends it to the other expert (as transformers' bf16 does), a step, not a drift.
    const moe = testModels[name].moe !== undefined;
    expect(bf16Err).toBeLessThan((moe ? 0.1 : 0.05) * scale);
  });

  test('readout of packed questions equals the reference at each question end, and its log-probs equal the restricted softmax', async () => {
    const { state, questions, labels } = texts;
    const res = await fp32.answer({ state, questions: questions.map((tokens) => ({ tokens, labelIds: labels })) });
    res.answers.forEach((a, i) => {
      const last = refs[i][refs[i].length - 1];
      const refLabels = labels.map((id) => last[id]);
      expect(maxAbsDiff(a.labelLogits, refLabels)).toBeLessThanOrEqual(1e-4);
      // Full-vocabulary log-softmax restricted to the labels and renormalised.
      const full = logSoftmax(last);
      const restricted = logSoftmax(labels.map((id) => full[id]));
      expect(maxAbsDiff(logSoftmax(a.labelLogits), restricted)).toBeLessThanOrEqual(1e-5);
    });
  });

  test('hidden state tap returns the final-normed state at the readout position', async () => {
    const { state, questions, labels } = await tokenizeTexts(dir);
    const res = await fp32.answer({ state, questions: [{ tokens: questions[1], labelIds: labels }], wantHidden: true });
    const hidden = res.answers[0].hidden!;
    expect(hidden.length).toBe(fp32.info.hiddenSize);
    // Norm of a final-normed vector is about sqrt(hidden) * |norm weight| (~1): not zeros, not raw.
    const norm = Math.sqrt(hidden.reduce((s, v) => s + v * v, 0));
    expect(norm).toBeGreaterThan(0.5 * Math.sqrt(hidden.length));
    expect(norm).toBeLessThan(2 * Math.sqrt(hidden.length));
  });
});

// tiny-phi3's longrope: original_max_position_embeddings 64. transformers takes the long factors for a
// forward over more tokens than that, the short ones otherwise; here each sequence (state + question)
// takes them by its own length, whatever else its call holds.
test('longrope: a state asked a short and a long question answers each with its own factors, alone, together and cached', async () => {
  const dir = tinyModel('tiny-phi3');
  const { state: full, questions, labels } = await tokenizeTexts(dir);
  const short = questions[0], long = [...questions[0], ...questions[1], ...questions[2]];
  const state = full.slice(0, 60 - short.length);
  expect(state.length + short.length).toBeLessThanOrEqual(64);
  expect(state.length + long.length).toBeGreaterThan(64);
  const refs = await referenceLogits(dir, [short, long].map((q) => [...state, ...q]), 0);
  const ask = (qs: number[][]) => ({ state, questions: qs.map((tokens) => ({ tokens, labelIds: labels })) });
  const engine = await Engine.open({ path: dir, dtype: 'fp32', threads: 2 });
  try {
    const together = await engine.answer(ask([short, long]));  // cold: the state packed once per kind
    const again = await engine.answer(ask([long, short]));     // both kinds from the prefix cache
    expect(again.cachedTokens).toBeGreaterThan(0);
    const alone = [(await engine.answer(ask([short]))).answers[0], (await engine.answer(ask([long]))).answers[0]];
    [together.answers, [again.answers[1], again.answers[0]], alone].forEach((answers) =>
      answers.forEach((a, i) => expect(maxAbsDiff(a.labelLogits, labels.map((id) => refs[i][0][id]))).toBeLessThanOrEqual(1e-4)));
  } finally {
    await engine.close();
  }
  // The same weights with an original context long enough for both: the long question, now under the
  // short factors, no longer agrees with the reference (the test can tell the factors apart).
  const allShort = (c: any) => ({ ...c, original_max_position_embeddings: 4096, rope_scaling: { ...c.rope_scaling, attention_factor: Math.sqrt(1 + Math.log(64) / Math.log(64)) } });
  await withEditedConfig(dir, allShort, async (copy) => {
    const shortOnly = await Engine.open({ path: copy, dtype: 'fp32', threads: 2 });
    try {
      const a = (await shortOnly.answer(ask([long]))).answers[0];
      expect(maxAbsDiff(a.labelLogits, labels.map((id) => refs[1][0][id]))).toBeGreaterThan(1e-2);
    } finally {
      await shortOnly.close();
    }
  });
});
