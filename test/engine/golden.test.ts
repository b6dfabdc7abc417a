/**
 * The golden answers (test/golden/): the label logits of fixed requests, for every family in fp32,
 * bf16 and bf16 with int8 weights, are the bits recorded in test/golden/answers.json, at every
 * instruction set level this CPU runs (2 threads), and at the level the engine picks itself with 1
 * thread. Recorded once on one CPU; CI on another CPU kind checks that machines agree
 * (docs/arithmetic.md, "Golden answers").
 */
import { IsaLevel } from '../../src/engine/native';
import { runnableIsaLevels } from '../helpers/cpu';
import { answerBits, goldenConfigs, GoldenBits, goldenModels, readGolden } from '../golden/golden';

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
    const runs: [string, IsaLevel | undefined, number][] = [...runnableIsaLevels().map((l) => [l, l, 2] as [string, IsaLevel, number]), ['chosen, 1 thread', undefined, 1]];
    const found: string[] = [];
    for (const [name, isa, threads] of runs) {
      const got = await answerBits(model, calls, config, isa, threads);
      for (const d of differences(got, answers[config.name])) found.push(`${name}: ${d}`);
    }
    expect(found).toEqual([]);
  });
});
