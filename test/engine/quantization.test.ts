/**
 * int8 weights (--quantization int8, csrc/kernels/cpu/gemm/int8_linear.h): on every architecture the label
 * probabilities stay near bf16's, the engine says what it runs, the AVX-512 VNNI and AVX2 paths give the
 * generic loop's bits, weights take about half of bf16's memory, and what cannot run is refused with a message
 * (fp8 runs on CUDA only: bench/gpu/fp8.py checks it on a GPU).
 * The bound, 2.5e-2, is what these random-weight models measure (up to 1.2e-2 here, 1.8e-2 over
 * bench:quantization's 200 questions), not issue 31's 1e-2 budget, which they do not meet
 * (docs/quantization.md says why); a wrong scale, offset or rounding moves them by 1e-1 and more.
 * (Invariance with int8: test/engine/invariance.test.ts; the kernel itself: test/kernels/cpu.test.ts.)
 */
import { Engine } from '../../src/engine/engine';
import { IsaLevel, NativeAnswerRequest, NativeLoadOptions } from '../../src/engine/native';
import { tinyModelNames } from '../../src/testmodels/specs';
import { int8KernelAt, runnableIsaLevels } from '../helpers/cpu';
import { tinyModel } from '../helpers/models';
import { tokenizeTexts } from '../helpers/tokens';

// Forced, beside the level the engine measures: the AVX2 path where the CPU runs it, and the generic loop.
const forcedLevels: IsaLevel[] = [...(runnableIsaLevels().includes('avx2') ? ['avx2' as const] : []), 'generic'];

async function answers(dir: string, options: Partial<NativeLoadOptions>, request: NativeAnswerRequest) {
  const e = await Engine.open({ path: dir, threads: 2, dtype: 'bf16', ...options });
  try {
    return { info: e.info, answers: (await e.answer(request)).answers };
  } finally {
    await e.close();
  }
}

describe.each(tinyModelNames)('%s', (name) => {
  test('int8: label probabilities within 2.5e-2 of bf16, not equal to them, and the same bits on the AVX2 and generic paths', async () => {
    const dir = tinyModel(name);
    const t = await tokenizeTexts(dir);
    const request = { state: t.state, questions: t.questions.map((tokens) => ({ tokens, labelIds: t.labels })) };
    const bf16 = await answers(dir, {}, request);
    const int8 = await answers(dir, { quantization: 'int8' }, request);
    // The kernel of the level measured fastest: on a machine busy with the other tests, not always the highest.
    expect(int8.info).toMatchObject({ quantization: 'int8', quantizedKernels: int8KernelAt(int8.info.kernels as IsaLevel) });
    expect(bf16.info.quantization).toBe('none');
    let worst = 0;
    int8.answers.forEach((a, i) => a.labelLogProbs.forEach((x, j) => (worst = Math.max(worst, Math.abs(Math.exp(x) - Math.exp(bf16.answers[i].labelLogProbs[j]))))));
    console.log(`${name}: int8 vs bf16 max |Δp| ${worst.toExponential(2)}`);
    expect(worst).toBeLessThanOrEqual(2.5e-2);
    // The weights are quantized: the logits move.
    expect(int8.answers.map((a) => Array.from(a.labelLogits))).not.toEqual(bf16.answers.map((a) => Array.from(a.labelLogits)));
    for (const isa of forcedLevels) {
      const other = await answers(dir, { quantization: 'int8', isa }, request);
      expect(other.info.quantizedKernels).toBe(int8KernelAt(isa));
      expect(other.answers.map((a) => Array.from(a.labelLogits))).toEqual(int8.answers.map((a) => Array.from(a.labelLogits)));
    }
  });
});

test('int8 weights take about half the memory of bf16 weights, and are quantized at load in well under a second here', async () => {
  const dir = tinyModel('tiny-llama');
  const info = async (options: Partial<NativeLoadOptions>) => {
    const e = await Engine.open({ path: dir, threads: 2, dtype: 'bf16', ...options });
    await e.close();
    return e.info;
  };
  const [bf16, int8] = [await info({}), await info({ quantization: 'int8' })];
  // One byte a weight, and per column an fp32 scale and an int32 offset (K = 64 here: 8 bytes on 64).
  expect(int8.linearBytes / bf16.linearBytes).toBeGreaterThan(0.5);
  expect(int8.linearBytes / bf16.linearBytes).toBeLessThan(0.6);
  expect(int8.weightsMs).toBeGreaterThan(0);
  expect(int8.weightsMs).toBeLessThan(1000);
});

test.each([
  [{ quantization: 'fp8' }, /fp8 weights run on CUDA only/],
  [{ quantization: 'fp8', kernels: 'aten' }, /fp8 weights run on CUDA only/],
  [{ quantization: 'int8', kernels: 'aten' }, /int8 weights run on the engine's CPU kernels only/],
  [{ quantization: 'int4' }, /quantization must be none, int8 or fp8, got int4/],
] as [Partial<NativeLoadOptions>, RegExp][])('refused with a message: %j', async (options, message) => {
  await expect(Engine.open({ path: tinyModel('tiny-qwen3'), threads: 2, dtype: 'bf16', ...options })).rejects.toThrow(message);
});
