/**
 * `ownGemm` (`--own-gemm`): our few-row GEMM among the forms the batch-invariant CUDA engine measures
 * (csrc/kernels/aten/few_rows_gemm.h). On the CPU no GEMM form is chosen, so every entry point refuses the option
 * with the engine's reason rather than ignore it: the library's load here and decide's flag (tq_cli's: cli.test.ts;
 * the server's flag reaches the engine through the same engineLoad as decide's, test/config/engine-load.test.ts).
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { Engine } from '../../src/engine/engine';
import { tinyModel } from '../helpers/models';
import { runDecide } from '../helpers/server';

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-own-gemm-'));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));
const reason = /ownGemm is a form of the batch-invariant CUDA engine's bf16 GEMMs on few rows/;

test('the library refuses ownGemm off the batch-invariant CUDA engine, and says it is off by default', async () => {
  for (const kernels of ['engine', 'fused'] as const)
    await expect(Engine.open({ path: tinyModel('tiny-qwen3'), threads: 1, dtype: 'bf16', kernels, ownGemm: true })).rejects.toThrow(reason);
  const e = await Engine.open({ path: tinyModel('tiny-qwen3'), threads: 1, dtype: 'bf16', ownGemm: false });
  await e.close();
  expect(e.info.ownGemm).toBe(false);
});

test('decide takes --own-gemm to its engine: on is refused here for the engine\'s reason, off answers', async () => {
  const request = path.join(scratch, 'request.json');
  fs.writeFileSync(request, JSON.stringify({ state: 'The invoice was paid twice.', questions: { q: { type: 'noul' } } }));
  const on = await runDecide([request, '--base', 'tiny-qwen3', '--own-gemm', 'on']);
  expect(on.code).not.toBe(0);
  expect(on.stderr).toMatch(reason);
  expect((await runDecide([request, '--base', 'tiny-qwen3', '--own-gemm', 'off'])).code).toBe(0);
}, 60_000);
