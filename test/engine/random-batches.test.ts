/**
 * Exact under load, at every instruction set level this CPU runs (issue 42): each question's label logits
 * alone and cold, then the same questions in random batches, bit for bit. The batches mix long and short
 * states (several per step), states that begin with another's text (a partly cached prefix), questions that
 * share an option list or repeat one (shared segments of many lengths), and steps cut every few tokens at
 * offsets that move across the kernels' row tiles (6 rows for vdpbf16ps, 4 and 8 for the FMA family),
 * row blocks (48) and attention chunks (128). Then the same batch with every kernel's operands
 * shifted by each multiple of 4 bytes up to 64 (the engine's bufferShift), so that a path chosen by
 * alignment shows on any CPU. The pairing of keys that the avx512-bf16 level adds is checked on every CPU,
 * on a model of vdpbf16ps, by test/native/pairs_check.cpp (test/kernels/cpu.test.ts).
 */
import { Engine } from '../../src/engine/engine';
import { IsaLevel, NativeAnswerRequest } from '../../src/engine/native';
import { uniformStream } from '../../src/common/prng';
import { runnableIsaLevels } from '../helpers/cpu';
import { bits, withEngine } from '../helpers/engines';
import { tinyModel } from '../helpers/models';
import { tokenizeTexts, TokenizedTexts } from '../helpers/tokens';

const dir = tinyModel('tiny-qwen3');

interface Workload {
  states: number[][];
  questions: number[][];
}

/** States: the test text, a long one (~560 tokens) and one that begins with it (a partly cached prefix), short ones of either parity. */
function workload(t: TokenizedTexts): Workload {
  const long = Array.from({ length: 9 }, (_, i) => [...t.state.slice(i), ...t.state.slice(0, i)]).flat();
  const states = [t.state, long, [...long.slice(0, 301), ...t.state.slice(0, 20)], t.state.slice(0, 9), t.state.slice(3, 13)];
  // An option list several questions begin with, cut at every length from 4 to 9 tokens short of it.
  const options = t.questions[1].slice(0, -3);
  const questions = [...t.questions, ...t.questions.map((q, i) => [...options.slice(0, options.length - i), ...q.slice(2)]), [...options, ...t.questions[0].slice(-4)]];
  return { states, questions };
}

/** A random batch: 1 to 5 requests, each about one of the states, with 1 to 4 of the questions (repeats allowed). */
function randomBatch(w: Workload, rnd: () => number): [number, number[]][] {
  const pick = (n: number) => Math.floor(rnd() * n);
  return Array.from({ length: 1 + pick(5) }, () => [pick(w.states.length), Array.from({ length: 1 + pick(4) }, () => pick(w.questions.length))]);
}

async function expectExact(isa: IsaLevel) {
  const dtype = 'bf16';
  const t = await tokenizeTexts(dir);
  const w = workload(t);
  const ask = (s: number, qs: number[]): NativeAnswerRequest => ({ state: w.states[s], questions: qs.map((q) => ({ tokens: w.questions[q], labelIds: t.labels })) });
  const alone = new Map<string, string>();
  await withEngine(dir, { dtype, isa, prefixCache: false }, async (e) => {
    expect(e.info.kernels).toBe(isa);
    for (let s = 0; s < w.states.length; s++)
      for (let q = 0; q < w.questions.length; q++) alone.set(`${s}/${q}`, bits((await e.answer(ask(s, [q]))).answers[0].labelLogits));
  });
  let compared = 0;
  const expectAlone = async (e: Engine, batch: [number, number[]][], label: string) => {
    const results = await e.answerBatch(batch.map(([s, qs]) => ask(s, qs)));
    batch.forEach(([s, qs], r) =>
      qs.forEach((q, i) => {
        compared++;
        expect(`${label} ${s}/${q}: ${bits(results[r].answers[i].labelLogits)}`).toBe(`${label} ${s}/${q}: ${alone.get(`${s}/${q}`)}`);
      }));
  };
  const rnd = uniformStream(42);
  // Whole requests in a step (the default 2,048 tokens), and steps cut every 7, 13, 53 or 131 tokens; KV blocks of 16 and 5.
  for (const options of [{}, { maxStepTokens: 7 }, { maxStepTokens: 13, blockSize: 5 }, { maxStepTokens: 53 }, { maxStepTokens: 131 }])
    await withEngine(dir, { dtype, isa, ...options }, async (e) => {
      for (let b = 0; b < 6; b++) await expectAlone(e, randomBatch(w, rnd), JSON.stringify(options));
    });
  // One batch of every kind of request, with the operands at every shift.
  const mixed: [number, number[]][] = [[1, [0, 5, 6]], [2, [1, 8]], [3, [7, 8, 8]], [0, [4, 2]], [4, [3, 6]]];
  for (let shift = 4; shift <= 64; shift += 4)
    await withEngine(dir, { dtype, isa, bufferShift: shift, maxStepTokens: 97 }, (e) => expectAlone(e, mixed, `shift ${shift}`));
  expect(compared).toBeGreaterThan(150);
}

// bf16: the vdpbf16ps family and its key pairs at avx512-bf16 (fp32 runs the FMA family, which
// invariance.test.ts checks at every level).
test.each(runnableIsaLevels())('tiny-qwen3, bf16, at level %s: random batches and shifted operands give every question its bits alone', (isa) =>
  expectExact(isa), 120_000);

test('bufferShift is refused unless a multiple of 4 bytes from 0 to 64 on the engine kernels', async () => {
  for (const bufferShift of [2, 68, -4])
    await expect(Engine.open({ path: dir, bufferShift })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('bufferShift') });
  await expect(Engine.open({ path: dir, bufferShift: 4, kernels: 'aten' })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('bufferShift') });
});
