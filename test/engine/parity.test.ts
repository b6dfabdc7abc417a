/**
 * Parity of the engine with an independent float64 reference (Debian's
 * python3-torch, test/reference/ref_model.py) on every supported architecture.
 */
import { Engine } from '../../src/engine/engine';
import { tinyModelNames } from '../../src/testmodels/specs';
import { tinyModel } from '../helpers/models';
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
    refs = referenceLogits(dir, texts.questions.map((q) => [...texts.state, ...q]));
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
    expect(bf16Err).toBeLessThan(0.05 * scale);
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
