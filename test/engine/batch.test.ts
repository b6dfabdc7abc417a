/** Several requests in one forward pass answer exactly like each alone; identical states are computed once. */
import { Engine } from '../../src/engine/engine';
import { NativeAnswerRequest } from '../../src/engine/native';
import { tinyModel, torchscriptModel } from '../helpers/models';
import { maxAbsDiff, softmax } from '../helpers/reference';
import { tokenizeTexts } from '../helpers/tokens';


test.each(['tiny-qwen3', 'tiny-mistral'])('%s: a batch of requests with different and shared states equals each request alone (fp32, 1e-6)', async (name) => {
  const dir = tinyModel(name);
  const t = await tokenizeTexts(dir);
  const other = t.state.slice(5).concat(t.state.slice(0, 5));
  const requests: NativeAnswerRequest[] = [
    { state: t.state, questions: [{ tokens: t.questions[0], labelIds: t.labels }] },
    { state: other, questions: [{ tokens: t.questions[1], labelIds: t.labels }, { tokens: t.questions[2], labelIds: t.labels.slice(0, 3) }] },
    { state: t.state, questions: [{ tokens: t.questions[3], labelIds: t.labels, readoutIndex: 2 }] },
    { state: [], questions: [{ tokens: t.questions[0], labelIds: t.labels }] },
  ];
  const cold = await Engine.open({ path: dir, dtype: 'fp32', threads: 2, prefixCache: false });
  const batched = await Engine.open({ path: dir, dtype: 'fp32', threads: 2, prefixCache: false, maxStepTokens: 64 });
  try {
    const alone: Awaited<ReturnType<Engine['answer']>>[] = [];
    for (const r of requests) alone.push(await cold.answer(r));
    const together = await batched.answerBatch(requests);
    together.forEach((res, i) => {
      expect(res.answers).toHaveLength(requests[i].questions.length);
      res.answers.forEach((a, j) => expect(maxAbsDiff(softmax(a.labelLogits), softmax(alone[i].answers[j].labelLogits))).toBeLessThanOrEqual(1e-6));
    });
  } finally {
    await cold.close();
    await batched.close();
  }
});

test('requests with the same state share one computation of it', async () => {
  const dir = tinyModel('tiny-qwen3');
  const t = await tokenizeTexts(dir);
  const e = await Engine.open({ path: dir, dtype: 'fp32', threads: 2, prefixCache: false });
  try {
    const same = await e.answerBatch(t.questions.map((q) => ({ state: t.state, questions: [{ tokens: q, labelIds: t.labels }] })));
    const stats = await e.cacheStats();
    expect(stats.lookups).toBe(0); // no prefix cache: the sharing is within the batch
    expect(same).toHaveLength(4);
    // The state once, then the four questions.
    const questionTokens = t.questions.reduce((s, q) => s + q.length, 0);
    expect(same.every((r) => r.computedTokens === t.state.length + questionTokens)).toBe(true);
  } finally {
    await e.close();
  }
});

describe.each([
  ['tiny-qwen3', () => tinyModel('tiny-qwen3')],
  ['tiny-mistral (sliding window)', () => tinyModel('tiny-mistral')],
  ['TorchScript tiny-llama', () => torchscriptModel('tiny-llama')],
])('%s: text that questions begin with in common', (_name, modelPath) => {
  test('is computed once, across requests, and answers equal each question alone (fp32, 1e-6)', async () => {
    const path = modelPath();
    const t = await tokenizeTexts(path.endsWith('.pt') ? tinyModel('tiny-llama') : path);
    // A shared 24-token "option list" in front of each question; one question without it.
    const shared = t.state.slice(3, 27);
    const withShared = t.questions.map((q) => shared.concat(q));
    const requests: NativeAnswerRequest[] = [
      { state: t.state, questions: [{ tokens: withShared[0], labelIds: t.labels }, { tokens: t.questions[1], labelIds: t.labels }, { tokens: withShared[2], labelIds: t.labels }] },
      { state: t.state, questions: [{ tokens: withShared[1], labelIds: t.labels }, { tokens: withShared[3], labelIds: t.labels.slice(0, 2) }] },
    ];
    const e = await Engine.open({ path, dtype: 'fp32', threads: 2, prefixCache: false });
    try {
      const together = await e.answerBatch(requests);
      // The state once, the shared text once, then at most each question's own tokens
      // (less where the questions' own texts begin alike too).
      const own = t.questions.reduce((n, q) => n + q.length, 0) + t.questions[1].length;
      expect(together[0].computedTokens).toBeLessThanOrEqual(t.state.length + shared.length + own);
      for (const [i, r] of requests.entries())
        for (const [j, q] of r.questions.entries()) {
          const alone = await e.answer({ state: r.state, questions: [q] });
          expect(maxAbsDiff(softmax(together[i].answers[j].labelLogits), softmax(alone.answers[0].labelLogits))).toBeLessThanOrEqual(1e-6);
        }
    } finally {
      await e.close();
    }
  });

  test('a readout inside the common text stays in the question: it is computed, and answers equal the question alone', async () => {
    const path = modelPath();
    const t = await tokenizeTexts(path.endsWith('.pt') ? tinyModel('tiny-llama') : path);
    const shared = t.state.slice(3, 27);
    const questions = t.questions.map((q, i) => ({ tokens: shared.concat(q), labelIds: t.labels, readoutIndex: i === 2 ? 10 : undefined }));
    const e = await Engine.open({ path, dtype: 'fp32', threads: 2, prefixCache: false });
    try {
      const together = await e.answer({ state: t.state, questions });
      expect(together.computedTokens).toBeLessThan(t.state.length + questions.reduce((n, q) => n + q.tokens.length, 0));
      for (const [j, q] of questions.entries()) {
        const alone = await e.answer({ state: t.state, questions: [q] });
        expect(maxAbsDiff(softmax(together.answers[j].labelLogits), softmax(alone.answers[0].labelLogits))).toBeLessThanOrEqual(1e-6);
      }
    } finally {
      await e.close();
    }
  });
});

test('bf16: a batch with shared states and shared question text answers like each question alone; the bound is measured', async () => {
  const dir = tinyModel('tiny-qwen3');
  const t = await tokenizeTexts(dir);
  const shared = t.state.slice(3, 27);
  const other = t.state.slice(5).concat(t.state.slice(0, 5));
  const requests: NativeAnswerRequest[] = [
    { state: t.state, questions: t.questions.map((q) => ({ tokens: shared.concat(q), labelIds: t.labels })) },
    { state: other, questions: [{ tokens: t.questions[1], labelIds: t.labels }] },
    { state: t.state, questions: [{ tokens: shared.concat(t.questions[0]), labelIds: t.labels.slice(0, 3) }] },
  ];
  const e = await Engine.open({ path: dir, dtype: 'bf16', threads: 2, prefixCache: false });
  try {
    const together = await e.answerBatch(requests);
    let worst = 0;
    for (const [i, r] of requests.entries())
      for (const [j, q] of r.questions.entries()) {
        const alone = await e.answer({ state: r.state, questions: [q] });
        worst = Math.max(worst, maxAbsDiff(softmax(together[i].answers[j].labelLogits), softmax(alone.answers[0].labelLogits)));
      }
    console.log(`bf16 batched (shared states and question text) vs alone: max |Δp| ${worst.toExponential(2)}`);
    expect(worst).toBeLessThan(1e-3);
  } finally {
    await e.close();
  }
});

test('a bad request fails the batch with its index; the engine stays usable', async () => {
  const e = await Engine.open({ path: tinyModel('tiny-qwen3'), dtype: 'fp32' });
  try {
    await expect(e.answerBatch([{ state: [1, 2], questions: [{ tokens: [3], labelIds: [4] }] }, { state: [1], questions: [{ tokens: [], labelIds: [4] }] }])).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringContaining('request 1: question 0 has no tokens'),
    });
    expect((await e.answerBatch([{ state: [1, 2], questions: [{ tokens: [3], labelIds: [4] }] }]))[0].answers).toHaveLength(1);
  } finally {
    await e.close();
  }
});
