/**
 * Batch invariance: a question's label logits do not depend on the other
 * questions in the call, on how the state is cut into forward steps, or on the
 * KV block size.
 */
import { Engine } from '../src/engine/engine';
import { NativeLoadOptions } from '../src/engine/native';
import { tinyModel } from './helpers/models';
import { maxAbsDiff } from './helpers/reference';
import { tokenizeTexts, TokenizedTexts } from './helpers/tokens';

const dir = tinyModel('tiny-qwen3');

async function withEngine<T>(options: Partial<NativeLoadOptions>, f: (e: Engine) => Promise<T>): Promise<T> {
  const e = await Engine.open({ path: dir, dtype: 'fp32', threads: 2, ...options });
  try {
    return await f(e);
  } finally {
    await e.close();
  }
}

async function answerEach(e: Engine, t: TokenizedTexts): Promise<Float32Array[]> {
  const out: Float32Array[] = [];
  for (const tokens of t.questions) {
    const r = await e.answer({ state: t.state, questions: [{ tokens, labelIds: t.labels }] });
    out.push(r.answers[0].labelLogits);
  }
  return out;
}

describe('batch invariance (fp32, max |Δ| <= 1e-5)', () => {
  let t: TokenizedTexts;
  beforeAll(async () => {
    t = await tokenizeTexts(dir);
  });

  test('N questions in one call equal each question alone, in any order', async () => {
    await withEngine({}, async (e) => {
      const alone = await answerEach(e, t);
      const together = await e.answer({ state: t.state, questions: t.questions.map((tokens) => ({ tokens, labelIds: t.labels })) });
      together.answers.forEach((a, i) => expect(maxAbsDiff(a.labelLogits, alone[i])).toBeLessThanOrEqual(1e-5));
      const reversed = await e.answer({ state: t.state, questions: [...t.questions].reverse().map((tokens) => ({ tokens, labelIds: t.labels })) });
      reversed.answers.reverse().forEach((a, i) => expect(maxAbsDiff(a.labelLogits, alone[i])).toBeLessThanOrEqual(1e-5));
      // Sixteen copies of one question: every copy reads the same answer.
      const many = await e.answer({ state: t.state, questions: Array.from({ length: 16 }, () => ({ tokens: t.questions[2], labelIds: t.labels })) });
      many.answers.forEach((a) => expect(maxAbsDiff(a.labelLogits, alone[2])).toBeLessThanOrEqual(1e-5));
    });
  });

  test('different label sets and readout positions in one call equal separate calls', async () => {
    await withEngine({}, async (e) => {
      const qs = [
        { tokens: t.questions[0], labelIds: t.labels.slice(4) },
        { tokens: t.questions[1], labelIds: t.labels.slice(0, 3), readoutIndex: 3 },
      ];
      const together = await e.answer({ state: t.state, questions: qs });
      for (let i = 0; i < qs.length; i++) {
        const alone = await e.answer({ state: t.state, questions: [qs[i]] });
        expect(maxAbsDiff(together.answers[i].labelLogits, alone.answers[0].labelLogits)).toBeLessThanOrEqual(1e-5);
      }
    });
  });

  test('cutting the state into small forward steps and changing the block size change nothing', async () => {
    const baseline = await withEngine({}, (e) => answerEach(e, t));
    for (const options of [{ maxStepTokens: 7 }, { blockSize: 1 }, { blockSize: 5, maxStepTokens: 13 }, { blockSize: 64 }]) {
      const got = await withEngine(options, (e) => answerEach(e, t));
      got.forEach((g, i) => expect(maxAbsDiff(g, baseline[i])).toBeLessThanOrEqual(1e-5));
    }
  });

  test('an empty state is allowed: questions attend to their own tokens only', async () => {
    await withEngine({}, async (e) => {
      const r = await e.answer({ state: [], questions: [{ tokens: t.questions[0], labelIds: t.labels }] });
      expect(r.answers[0].labelLogits.length).toBe(t.labels.length);
      expect(r.stateTokens).toBe(0);
    });
  });
});
