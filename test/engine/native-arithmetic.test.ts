/**
 * `arithmetic: 'native'` (`--arithmetic native`): the bf16 linear layers on AMX tiles (csrc/kernels/cpu/gemm/gemm_amx_bf16.cpp),
 * bits of their own (docs/arithmetic.md). Refused with its reason where it cannot run: fp32, int8, without batch
 * invariance, or on a CPU without AMX-BF16. Where there is no AMX, the tiles' model runs it under the test instrument
 * TQ_AMX_MODEL=1 (through tq_cli and a server: jest's process.env does not reach the addon): its answers are close to
 * the portable ones but not their bits, the same bits in any batch and cached, and /health says which arithmetic answers.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { Engine } from '../../src/engine/engine';
import { runsBf16Amx } from '../helpers/cpu';
import { tinyModel } from '../helpers/models';
import { runDecide, startServer } from '../helpers/server';
import { tokenizeTexts } from '../helpers/tokens';
import { runCli } from '../helpers/tq-cli';

const model = tinyModel('tiny-qwen3');
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-native-'));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

test('refused, with the reason, where it cannot run', async () => {
  const open = (options: object) => Engine.open({ path: model, threads: 2, arithmetic: 'native', ...options }).then((e) => e.close());
  await expect(open({ dtype: 'fp32' })).rejects.toThrow(/arithmetic native: it is bf16's/);
  await expect(open({ dtype: 'bf16', quantization: 'int8' })).rejects.toThrow(/arithmetic native: int8 is exact on every path/);
  await expect(open({ dtype: 'bf16', batchInvariant: false })).rejects.toThrow(/arithmetic native: it is the engine's own invariant CPU kernels'/);
  await expect(Engine.open({ path: model, arithmetic: 'exotic' as 'native' })).rejects.toThrow(/arithmetic must be portable or native/);
  if (runsBf16Amx()) await open({ dtype: 'bf16' });
  else await expect(open({ dtype: 'bf16' })).rejects.toThrow(/this CPU has no AMX-BF16/);
});

test('on the tiles (their model here): close to the portable answers, not their bits, and the same bits in any batch and cached', async () => {
  const t = await tokenizeTexts(model);
  const q = (i: number) => ({ tokens: t.questions[i], labelIds: t.labels });
  const other = t.state.slice(5);
  const calls = path.join(scratch, 'calls.json');
  // Call 0: the state cold with three questions; call 1: another state, then the first again (cached) with question 2.
  fs.writeFileSync(calls, JSON.stringify({ calls: [[{ state: t.state, questions: [q(0), q(1), q(2)] }], [{ state: other, questions: [q(0)] }, { state: t.state, questions: [q(2)] }]] }));
  const answer = (arithmetic: string) => runCli(['answer', '--model', model, '--calls', calls, '--dtype', 'bf16', '--threads', '2', '--arithmetic', arithmetic], { TQ_AMX_MODEL: '1' });
  const [native, portable] = await Promise.all([answer('native'), answer('portable')]);
  expect([native.info.arithmetic, portable.info.arithmetic]).toEqual(['native', 'portable']);
  const logits = (out: any, c: number, r: number, i: number): number[] => out.calls[c][r].answers[i].labelLogits;
  expect(logits(native, 1, 1, 0)).toEqual(logits(native, 0, 0, 2));
  let largest = 0, differing = 0;
  for (let i = 0; i < 3; i++)
    logits(native, 0, 0, i).forEach((x, j) => {
      largest = Math.max(largest, Math.abs(x - logits(portable, 0, 0, i)[j]));
      differing += x !== logits(portable, 0, 0, i)[j] ? 1 : 0;
    });
  expect(largest).toBeLessThan(5e-2);
  expect(differing).toBeGreaterThan(0);
}, 60_000);

test('a server with --arithmetic native says so in /health and its start-up line', async () => {
  const s = await startServer(['--dtype', 'bf16', '--arithmetic', 'native'], { TQ_AMX_MODEL: '1' });
  try {
    const health = (await s.get('/health')).body;
    expect(health.arithmetic).toBe('native');
    expect(s.log()).toContain('native arithmetic: bf16 on AMX tiles, bits of AMX machines alone');
    expect((await s.post('/v1/answer', { state: 'The invoice was paid twice.', questions: [{ kind: 'noul', instructions: 'Paid twice?' }] })).status).toBe(200);
  } finally {
    await s.stop();
  }
});

test('decide takes --arithmetic to its engine: native is refused here for the engine\'s reason, or answers on AMX', async () => {
  const request = path.join(scratch, 'request.json');
  fs.writeFileSync(request, JSON.stringify({ state: 'The invoice was paid twice.', questions: { q: { type: 'noul' } } }));
  const native = await runDecide([request, '--base', 'tiny-qwen3', '--dtype', 'bf16', '--arithmetic', 'native']);
  if (runsBf16Amx()) expect(native.code).toBe(0);
  else {
    expect(native.code).not.toBe(0);
    expect(native.stderr).toMatch(/this CPU has no AMX-BF16/);
  }
  const fp32 = await runDecide([request, '--base', 'tiny-qwen3', '--dtype', 'fp32', '--arithmetic', 'native']);
  expect(fp32.stderr).toMatch(/arithmetic native: it is bf16's/);
  expect((await runDecide([request, '--base', 'tiny-qwen3', '--dtype', 'bf16', '--arithmetic', 'portable'])).code).toBe(0);
});
