/**
 * What the mixture of experts promises beyond the tiny models' parity and invariance (which run with the other
 * families): top-k ties go to the lower expert index, as the float64 reference takes them (a stable sort), and an
 * expert no token is routed to is never computed. tiny-mixtral with its routers zeroed: every expert scores 0, so
 * every token takes experts 0 and 1 at weight 1/2.
 */
import { Engine } from '../../src/engine/engine';
import { tinyModel, withEditedConfig, withEditedTensors } from '../helpers/models';
import { maxAbsDiff, referenceLogits } from '../helpers/reference';

const model = tinyModel('tiny-mixtral');
const tokens = Array.from({ length: 40 }, (_, i) => 100 + 37 * i);
const router = /block_sparse_moe\.gate\.weight$/;

async function logitsOf(dir: string): Promise<Float32Array[]> {
  const engine = await Engine.open({ path: dir, dtype: 'fp32', threads: 2 });
  try {
    return await engine.logitsAll(tokens);
  } finally {
    await engine.close();
  }
}

test('ties: with every expert scoring alike, each token takes the two lowest, as the reference does', async () => {
  await withEditedTensors(model, (name, data) => void (router.test(name) && data.fill(0)), async (tied) => {
    const [ref] = await referenceLogits(tied, [tokens], 1);
    const got = await logitsOf(tied);
    expect(Math.max(...got.map((row, p) => maxAbsDiff(row, ref[p])))).toBeLessThanOrEqual(1e-4);
  });
});

test('an expert no token is routed to is never computed: NaN weights in experts 2 and 3 change nothing', async () => {
  const nan = (data: Buffer, dtype: string) => {
    expect(dtype).toBe('BF16');
    for (let i = 0; i < data.length; i += 2) data.writeUInt16LE(0x7fc0, i);
  };
  const tied = (name: string, data: Buffer) => void (router.test(name) && data.fill(0));
  const unrouted = /experts\.[23]\./;
  const [clean, poisoned] = await Promise.all([
    withEditedTensors(model, tied, logitsOf),
    withEditedTensors(model, (name, data, dtype) => (router.test(name) ? data.fill(0) : unrouted.test(name) && nan(data, dtype)), logitsOf),
  ]);
  expect(poisoned.every((row) => row.every(Number.isFinite))).toBe(true);
  expect(poisoned.map((row) => Array.from(row))).toEqual(clean.map((row) => Array.from(row)));
});

// transformers reads a field under each name its config's attribute_map gives it, and writes the one it stores:
// transformers 5 writes Qwen3-MoE's num_experts as num_local_experts (Mixtral's map, the other way round, too). The
// engine reads either name for every family, with the same answers.
test.each([
  ['tiny-qwen3-moe', 'num_experts', 'num_local_experts'],
  ['tiny-qwen2-moe', 'num_experts', 'num_local_experts'],
  ['tiny-mixtral', 'num_local_experts', 'num_experts'],
])('%s with %s written as %s (another transformers\' layout) answers as before', async (name, stored, alias) => {
  const dir = tinyModel(name);
  const renamed = (config: any) => {
    expect(config[stored]).toBeGreaterThan(0);
    const { [stored]: experts, ...rest } = config;
    return { ...rest, [alias]: experts };
  };
  const [original, aliased] = await Promise.all([logitsOfModel(dir), withEditedConfig(dir, renamed, logitsOfModel)]);
  // The same bits, compared as bytes (a deep equality over 12 rows of the vocabulary takes seconds).
  expect(aliased.map((row) => Buffer.from(row.buffer, row.byteOffset, row.byteLength).toString('base64')))
    .toEqual(original.map((row) => Buffer.from(row.buffer, row.byteOffset, row.byteLength).toString('base64')));
});

async function logitsOfModel(dir: string): Promise<Float32Array[]> {
  const engine = await Engine.open({ path: dir, dtype: 'fp32', threads: 1 });
  try {
    return await engine.logitsAll(tokens.slice(0, 12));
  } finally {
    await engine.close();
  }
}
