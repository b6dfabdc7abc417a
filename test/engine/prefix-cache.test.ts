/**
 * The prefix cache: answers do not depend on whether the state was cached, on
 * the block size, or on eviction; hits are counted; boundaries register.
 */
import { Engine } from '../../src/engine/engine';
import { NativeLoadOptions } from '../../src/engine/native';
import { tinyModel } from '../helpers/models';
import { maxAbsDiff, softmax } from '../helpers/reference';
import { modelTokenizer, tokenizeTexts, TokenizedTexts } from '../helpers/tokens';

const dir = tinyModel('tiny-llama');


async function open(options: Partial<NativeLoadOptions> = {}) {
  return Engine.open({ path: dir, dtype: 'fp32', threads: 2, ...options });
}

let t: TokenizedTexts;
let longState: number[];
let cold: Engine;
beforeAll(async () => {
  t = await tokenizeTexts(dir);
  const tok = await modelTokenizer(dir);
  // Several hundred tokens: many 16-token blocks, not ending on a block boundary.
  longState = [...(await tok.encode(Array.from({ length: 12 }, (_, i) => `Paragraph ${i}: the ledger for week ${i + 3} shows ${17 * i} crates moved.`).join(' ')))];
  if (longState.length % 16 === 0) longState.pop();
  cold = await open({ prefixCache: false });
});
afterAll(() => cold.close());

const ask = (e: Engine, state: number[], qi = 0) => e.answer({ state, questions: [{ tokens: t.questions[qi], labelIds: t.labels }] });

test('cold, warm, and warm after the boundary is registered give the same probabilities (fp32, 1e-6)', async () => {
  const e = await open();
  try {
    const reference = softmax((await ask(cold, longState)).answers[0].labelLogits);
    const first = await ask(e, longState);
    expect(first.cachedTokens).toBe(0);
    expect(first.boundaryTicket).toBeGreaterThanOrEqual(0);
    const second = await ask(e, longState, 0);
    // Full blocks are registered at once; the partial last block only with the boundary.
    expect(second.cachedTokens).toBe(Math.floor(longState.length / 16) * 16);
    expect(await e.registerBoundary(second.boundaryTicket)).toBe(true);
    const third = await ask(e, longState, 0);
    expect(third.cachedTokens).toBe(longState.length);
    for (const r of [first, second, third]) expect(maxAbsDiff(softmax(r.answers[0].labelLogits), reference)).toBeLessThanOrEqual(1e-6);
    const stats = await e.cacheStats();
    expect(stats.hitTokens).toBe(second.cachedTokens + third.cachedTokens);
    expect(stats.registeredBlocks).toBe(Math.ceil(longState.length / 16));
  } finally {
    await e.close();
  }
});

test('registerBoundary before: the next question about the same state hits every token without a second call', async () => {
  const e = await open({ registerBoundary: 'before' });
  try {
    const first = await ask(e, longState);
    expect(first.boundaryTicket).toBe(-1);
    const second = await ask(e, longState, 1);
    expect(second.cachedTokens).toBe(longState.length);
    const reference = softmax((await ask(cold, longState, 1)).answers[0].labelLogits);
    expect(maxAbsDiff(softmax(second.answers[0].labelLogits), reference)).toBeLessThanOrEqual(1e-6);
  } finally {
    await e.close();
  }
});

test('a state extended by one sentence reuses the original full blocks and answers like a cold run', async () => {
  const e = await open({ registerBoundary: 'before' });
  try {
    await ask(e, longState);
    const tok = await modelTokenizer(dir);
    const extended = [...longState, ...(await tok.encode(' One more sentence was added at the end.'))];
    const r = await ask(e, extended, 2);
    expect(r.cachedTokens).toBe(Math.floor(longState.length / 16) * 16);
    const reference = softmax((await ask(cold, extended, 2)).answers[0].labelLogits);
    expect(maxAbsDiff(softmax(r.answers[0].labelLogits), reference)).toBeLessThanOrEqual(1e-6);
  } finally {
    await e.close();
  }
});

test('block size does not change answers, cached or not', async () => {
  const reference = softmax((await ask(cold, longState, 3)).answers[0].labelLogits);
  for (const blockSize of [1, 7, 64]) {
    const e = await open({ blockSize, registerBoundary: 'before' });
    try {
      await ask(e, longState, 0);
      const warm = await ask(e, longState, 3);
      expect(warm.cachedTokens).toBe(longState.length);
      expect(maxAbsDiff(softmax(warm.answers[0].labelLogits), reference)).toBeLessThanOrEqual(1e-6);
    } finally {
      await e.close();
    }
  }
});

test('a tiny budget evicts instead of failing, and answers stay the same', async () => {
  // Room for one long state plus its question, not for two states.
  const e = await open({ cacheTokens: longState.length + 64, registerBoundary: 'before' });
  try {
    const other = longState.map((id) => (id + 7) % 1000 + 10);
    const answers: number[][] = [];
    for (const state of [longState, other, longState, other]) answers.push(softmax((await ask(e, state)).answers[0].labelLogits));
    const stats = await e.cacheStats();
    expect(stats.evictedBlocks).toBeGreaterThan(0);
    expect(maxAbsDiff(answers[0], answers[2])).toBeLessThanOrEqual(1e-6);
    expect(maxAbsDiff(answers[1], answers[3])).toBeLessThanOrEqual(1e-6);
    const reference = softmax((await ask(cold, other)).answers[0].labelLogits);
    expect(maxAbsDiff(answers[3], reference)).toBeLessThanOrEqual(1e-6);
  } finally {
    await e.close();
  }
});

test('pending boundaries give way under memory pressure (dropped, not failed)', async () => {
  const e = await open({ cacheTokens: longState.length + 64 });
  try {
    const first = await ask(e, longState);
    const other = longState.map((id) => (id + 11) % 1000 + 10);
    await ask(e, other); // needs the blocks the pending boundary holds
    expect(await e.registerBoundary(first.boundaryTicket)).toBe(false);
  } finally {
    await e.close();
  }
});

test('bf16: cached and cold answers agree; the bound is measured', async () => {
  const coldBf16 = await open({ dtype: 'bf16', prefixCache: false });
  const e = await open({ dtype: 'bf16', registerBoundary: 'before' });
  try {
    let worst = 0;
    for (let qi = 0; qi < t.questions.length; qi++) {
      await ask(e, longState, qi);
      const warm = await ask(e, longState, qi);
      expect(warm.cachedTokens).toBe(longState.length);
      worst = Math.max(worst, maxAbsDiff(softmax(warm.answers[0].labelLogits), softmax((await ask(coldBf16, longState, qi)).answers[0].labelLogits)));
    }
    console.log(`bf16 cached vs cold: max |Δp| ${worst.toExponential(2)}`);
    expect(worst).toBeLessThan(1e-3);
  } finally {
    await e.close();
    await coldBf16.close();
  }
});
