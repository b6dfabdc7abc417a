/**
 * The golden answers (test/golden/): the label logits of fixed requests, for every family in fp32,
 * bf16 and bf16 with int8 weights, are the bits recorded in test/golden/answers.json, at every
 * instruction set level this CPU runs (2 threads), and at the level the engine picks itself with 1 and 3
 * threads; and in fp32 with libtorch's own kernels at their plain, unvectorized form (ATEN_CPU_CAPABILITY=default,
 * as on a CPU without AVX2: what the engine leaves to ATen must not depend on the CPU either), and in bf16 with int8
 * weights on the AMX int8 kernel run on its model of the tiles, both through tq_cli.
 * Recorded once on one CPU; CI on another CPU kind checks that machines agree (docs/arithmetic.md, "Golden answers").
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { IsaLevel } from '../../src/engine/native';
import { runnableIsaLevels } from '../helpers/cpu';
import { tinyModel } from '../helpers/models';
import { runCli } from '../helpers/tq-cli';
import { answerBits, goldenConfigs, GoldenBits, GoldenCall, goldenModels, imageOf, readGolden } from '../golden/golden';

const golden = readGolden();

/** Where got differs from want: "call c, request r, question q" for each. */
function differences(got: GoldenBits, want: GoldenBits): string[] {
  const out: string[] = [];
  want.forEach((call, c) => call.forEach((req, r) => req.forEach((bits, q) => got[c]?.[r]?.[q] !== bits && out.push(`call ${c} request ${r} question ${q}`))));
  return out;
}

test('the file holds every family and configuration', () => {
  expect(Object.keys(golden.models)).toEqual(goldenModels);
  for (const m of goldenModels) expect(Object.keys(golden.models[m].answers)).toEqual(goldenConfigs.map((c) => c.name));
});

describe.each(goldenModels)('%s', (model) => {
  const { calls, answers } = golden.models[model];
  test.each(goldenConfigs.map((c) => [c.name, c] as const))('%s: the recorded bits at every level this CPU runs', async (_, config) => {
    const runs: [string, IsaLevel | undefined, number][] = [
      ...runnableIsaLevels().map((l) => [l, l, 2] as [string, IsaLevel, number]),
      ['chosen, 1 thread', undefined, 1],
      ['chosen, 3 threads', undefined, 3],
    ];
    // Side by side: an engine's load is mostly one thread's work, so the runs overlap well on two cores.
    const got = await Promise.all(runs.map(([, isa, threads]) => answerBits(model, calls, config, isa, threads)));
    const found = runs.flatMap(([name], i) => differences(got[i], answers[config.name]).map((d) => `${name}: ${d}`));
    expect(found).toEqual([]);
  });
});

/** The calls through tq_cli (a process of its own, so that ATen reads `env` at its start): label-logit bits. */
async function cliBits(model: string, calls: GoldenCall[], dtype: string, env: NodeJS.ProcessEnv, flags: string[] = []): Promise<GoldenBits> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-golden-'));
  try {
    const input = calls.map((call) => call.map((r) => ({
      state: r.state,
      questions: r.questions,
      images: r.images?.map((im, i) => {
        const file = path.join(dir, `${im.seed}-${i}.rgb`);
        fs.writeFileSync(file, imageOf(im).rgb);
        return { rgb: file, width: im.width, height: im.height };
      }),
    })));
    fs.writeFileSync(path.join(dir, 'calls.json'), JSON.stringify({ calls: input }));
    const out = await runCli(['answer', '--model', tinyModel(model), '--calls', path.join(dir, 'calls.json'), '--dtype', dtype, '--threads', '2', ...flags], env);
    if (env.TQ_INT8_AMX_MODEL) expect(out.info.quantizedKernels).toBe('amx-model');
    return out.calls.map((call: any[]) => call.map((r) => r.answers.map((a: { labelLogits: number[] }) => Buffer.from(Float32Array.from(a.labelLogits).buffer).toString('hex'))));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test('bf16 with int8 weights on the AMX int8 kernel (on its model of the tiles, TQ_INT8_AMX_MODEL=1), through tq_cli: the recorded bits, every model', async () => {
  const got = await Promise.all(goldenModels.map((model) => cliBits(model, golden.models[model].calls, 'bf16', { TQ_INT8_AMX_MODEL: '1' }, ['--quantization', 'int8'])));
  const found = goldenModels.flatMap((model, i) => differences(got[i], golden.models[model].answers['bf16+int8']).map((d) => `${model}: ${d}`));
  expect(found).toEqual([]);
}, 120_000);

test("fp32 with ATen's kernels unvectorized (ATEN_CPU_CAPABILITY=default), through tq_cli: the recorded bits, every model", async () => {
  const got = await Promise.all(goldenModels.map((model) => cliBits(model, golden.models[model].calls, 'fp32', { ATEN_CPU_CAPABILITY: 'default' })));
  const found = goldenModels.flatMap((model, i) => differences(got[i], golden.models[model].answers.fp32).map((d) => `${model}: ${d}`));
  expect(found).toEqual([]);
}, 120_000);
