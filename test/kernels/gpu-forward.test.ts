/**
 * The GPU fast path's parts that run on the CPU (docs/gpu.md, "Built ahead of the GPU"), with native checks linked
 * against the engine library (test/helpers/linked-check.ts):
 *
 * The cascade (csrc/batch/cascade_plan.h, csrc/kernels/cascade/), with test/native/cascade_check.cpp: on 440 random
 * segment trees (cached prefixes, shared segments, several states, steps of every size, read-outs at any token, with
 * and without a sliding window, with and without soft-capping), the visibility each step's plan encodes is the
 * engine's one rule element for element; no tier is empty; the merged reference equals float64 attention; the ATen
 * form equals the reference; and a row that sees no key in a tier is merged without its log-sum-exp being read.
 * Each step padded to its bucket and planned in the fixed form CUDA graphs replay (csrc/batch/fixed_cascade.h): the
 * same visibility, a launch shape that depends on the bucket and the fixed form's capacities alone, the same bits, and
 * FlashAttention-2's grids sized by the step's rows rather than its bucket (the GPU benchmark's calls among them).
 * On the same steps, the CPU kernels' attention (csrc/kernels/cpu/attention/attention.h: invariant at every level, and oneDNN)
 * against its plain reference (attention_reference.h), and that against float64 attention.
 *
 * The fused row kernels' arithmetic (csrc/kernels/math/row_kernels_math.h), with test/native/row_kernels_check.cpp: run on
 * the host, the same bits as the engine's CPU kernels for residual add + RMSNorm, q/k norm + RoPE and SiLU/GELU-tanh
 * gating, fp32 and bf16.
 *
 * With --state-attention split-key, the questions' own runs planned in a tier of their own, and every tier but the states'
 * own runs on split-key attention (csrc/kernels/math/split_key_math.h: the state tiers unmasked, the questions' own
 * causal, in a window where the model has one), run on the host by its twin of the CUDA kernel: reading the keys and
 * values in place in a paged store, against float64 attention, and in the fixed form the plain plan's bits.
 *
 * The CUDA row kernels', merge's and readout's bodies themselves (csrc/kernels/cuda/row_kernels.cuh, attention_merge.cuh,
 * label_readout.cuh), with
 * test/native/cuda_bodies_check.cpp: run on the host through csrc/kernels/cuda/host_emulation.h with the launches' shapes
 * (lanes, shuffles and barriers emulated), the same bits as the host forms, in the quad and the strided forms. And the
 * few-row GEMM's in each tiling (few_rows_mma.cuh: its cp.async pipeline and tensor-core fragments emulated), against the emulation's
 * model of the tensor cores' sums: its indexing, not the hardware's rounding, which the window's probe checks.
 *
 * The CUDA kernels themselves (the merge, the row kernels, split-key attention) are compiled for sm_90 by cuda.test.ts.
 */
import * as fs from 'fs';
import { runLinkedCheck, scratchDir } from '../helpers/linked-check';

const scratch = scratchDir();
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

// The build compiles the CUDA bodies' check under AddressSanitizer (CMakeLists.txt), so that its one run gives the bits
// and the bounds alike; compiled here the same way where its source is newer than the build.
const bodiesCheck = (args?: string[]) => runLinkedCheck('cuda_bodies_check', scratch, { compileFlags: ['-O1', '-fsanitize=address'], args });

let cascade: Record<string, any>;
let rows: any[];
let bodies: { kernel: string; form: string; compared: number; differing: number }[];
beforeAll(async () => {
  const [c, r, b] = await Promise.all([runLinkedCheck('cascade_check', scratch), runLinkedCheck('row_kernels_check', scratch), bodiesCheck()]);
  cascade = Object.fromEntries(c.map((l) => [l.part, l]));
  rows = r;
  bodies = b;
}, 240_000);

test("the CUDA row kernels', merge's, readout's, split-key attention's and few-row GEMM's bodies, run on the host as their launches shape them, give the host forms' bits in every form", () => {
  // Each kernel in each of its forms: the quad form where bf16 and the shapes allow it, else the strided one.
  const forms = new Set(bodies.map((b) => `${b.kernel.split(' ')[0]} ${b.form}`));
  expect([...forms].sort()).toEqual(['add_rms_norm rows', 'attention_merge held', 'few_rows_mma pipeline', 'gated_mul quads', 'gated_mul strided',
    'label_readout block a question', 'qk_norm_rope quads', 'qk_norm_rope strided', 'split_key tiers together']);
  expect(bodies.length).toBeGreaterThanOrEqual(46);
  for (const b of bodies) {
    expect(b.compared).toBeGreaterThanOrEqual(36);
    expect({ kernel: b.kernel, differing: b.differing }).toEqual({ kernel: b.kernel, differing: 0 });
  }
  // The few-row GEMM in each of its tilings (a block's rows x columns), each on four shapes at least, rows over several
  // blocks and its pipeline's slots reused among them.
  const tilings = bodies.filter((b) => b.kernel.startsWith('few_rows_mma')).map((b) => b.kernel.split(' ')[1]);
  expect([...new Set(tilings)].sort()).toEqual(['16x16', '16x8', '32x16', '32x8']);
  expect(tilings.length).toBe(19);
});

test("under AddressSanitizer every kernel body's emulation reads and writes within its buffers (on a GPU, past them is a fault or another's data), and a read past the end is reported", async () => {
  // The run above was under it: it would have stopped at the first access out of bounds.
  expect(bodies.length).toBeGreaterThanOrEqual(46);
  await expect(bodiesCheck(['read-past-end'])).rejects.toThrow(/AddressSanitizer: heap-buffer-overflow/);
});

test("the fused row kernels' device check (the GPU window's: on CUDA against the host forms, bit for bit) runs here with the CPU standing in for the device, every kernel compared", async () => {
  const parts = await runLinkedCheck('row_kernels_device_check', scratch);
  expect(parts.map((p) => p.part)).toEqual(['addRmsNorm', 'gatedMul', 'qkNormRope']);
  for (const p of parts) expect(p).toEqual({ part: p.part, device: 'cpu', compared: expect.any(Number), differ: 0 });
  expect(Math.min(...parts.map((p) => p.compared))).toBeGreaterThanOrEqual(48);
});

test('the emulation stops a launch whose threads wait at a barrier one of them never reaches, with a message, instead of hanging', async () => {
  await expect(bodiesCheck(['barrier-never-reached'])).rejects.toThrow(/host_emulation: the block's threads wait at a barrier some of them never reach/);
});

test('the emulation stops a 16-byte load or store at an address a GPU would fault on (not a multiple of 16), with a message', async () => {
  await expect(bodiesCheck(['misaligned-load'])).rejects.toThrow(/host_emulation: __ldg of 16 bytes at 0x[0-9a-f]+, not a multiple of 16/);
  await expect(bodiesCheck(['misaligned-cp-async'])).rejects.toThrow(/host_emulation: cp.async from global memory of 16 bytes/);
  await expect(bodiesCheck(['misaligned-store'])).rejects.toThrow(/host_emulation: a vector store of 16 bytes/);
});

test("the emulation runs a launch's blocks last first, and a block's threads between two waits lowest first, then highest first, as a GPU may: a body reading what another block or thread writes without a barrier between shows it", async () => {
  expect(await bodiesCheck(['run-order'])).toEqual([{ blocks: [5, 4, 3, 2, 1, 0] }, { threads: [0, 1, 2, 3, 3, 2, 1, 0] }]);
});

test("the emulation's cp.async lands at the wait that covers its group, as on a GPU, not before: a stage read too early holds what it held", async () => {
  expect(await bodiesCheck(['cp-async-lands-at-wait'])).toEqual([{ before: 'NaN', after: 1.5 }]);
});

test("the emulation's shared memory, dynamic and __shared__, reads as NaN where a body's block never wrote it (a GPU's holds whatever was there), and a write past the launch's bytes stops the check", async () => {
  await expect(bodiesCheck(['shared-memory'])).rejects.toThrow(/unwritten shared memory read as NaN, a __shared__ variable as NaN\nhost_emulation: a block wrote past its 64 bytes of dynamic shared memory \(at byte 64\)/);
});

test('cascade: every step of 440 random segment trees sees what the visibility rule sees, each key once, no tier empty', () => {
  const p = cascade.plans;
  expect(p.layouts).toBeGreaterThan(1500);
  expect(p.mismatched).toBe(0);
  expect(p.emptyTiers).toBe(0);
  // The merge reads each tier's result where it lies: the same bits as from the tiers stacked into one first.
  expect(p.stackedMergeDiffers).toBe(0);
  // Written into the own tier's result where it holds every row (a row of one tier left where it lies): the same bits.
  expect(p.inPlaceMerges).toBeGreaterThan(500);
  expect(p.inPlaceMergeDiffers).toBe(0);
  expect(p.keylessEntries).toBe(0);
  // The window cut the state tier in some of them, some read a long state in chunks, and some rows were in several tiers.
  expect(p.windowedTiers).toBeGreaterThan(0);
  expect(p.chunkedTiers).toBeGreaterThan(20);
  expect(p.maxTiers).toBeGreaterThan(2);
  // Planned with the questions' own runs apart (as split-key attention runs them) too: the same checks held there.
  expect(p.questionTiers).toBeGreaterThan(500);
});

test("cascade: a tier whose keys are the step's own rows reads them where the layer wrote them (StepKeys), not gathered from the store: the same bits", () => {
  const k = cascade.stepKeys;
  // Cold prefills' and questions' own tiers among the random steps; in the fixed form only from the step's first row.
  expect(k.tiers).toBeGreaterThan(300);
  expect(k.fixedTiers).toBeGreaterThan(50);
  // The other rows of the arrays hold NaN: a key read from a wrong row would show.
  expect(k.differ).toBe(0);
});

test("cascade: a tier whose sequences' keys are runs of the KV cache's slots reads them there, the store whole (FlashAttention-2's cu_seqlens_k and seqused_k), not gathered: the same bits", () => {
  const r = cascade.storeRuns;
  expect(r.tiers).toBeGreaterThan(1000);
  expect(r.fixedTiers).toBeGreaterThan(500);
  // Every other slot of the store holds NaN: a key read from a wrong slot would show.
  expect(r.differ).toBe(0);
});

test("cascade, fixed form: a bucket's steps see what the rule sees, launch alike, and give the plain plan's bits", () => {
  const f = cascade.fixed;
  expect(f.fixed).toBeGreaterThan(900);
  expect(f.mismatched).toBe(0);
  expect(f.keylessEntries).toBe(0);
  // Launch shapes: many, each the same whatever the step's layout (sequences, rows, keys per tier) within its bucket and
  // capacities; prefill-sized buckets among them.
  expect(f.shapes).toBeGreaterThan(20);
  expect(f.largestBucket).toBeGreaterThan(1024);
  expect(f.shapeDifferences).toBe(0);
  expect(f.compared).toBeGreaterThan(200);
  expect(f.bitsDiffer).toBe(0);
  // Only plans with a window that cuts a state are refused (they run without a graph).
  expect(f.refused).toBeGreaterThan(0);
  expect(f.refusedUnwindowed).toBe(0);
  // The padding's rows see the few keys before them, not the padding state's hundreds (as its last rows they each saw
  // nearly all: a warm question's padding cost a state's attention per layer on the GPU).
  expect(f.paddingRows).toBeGreaterThan(1000);
  expect(f.paddingRowsSeeingMore).toBe(0);
});

test("cascade, fixed form: FlashAttention-2's grids and the merge's sized by the step's rows, not by its bucket", () => {
  // A block per sequence, head and 128 rows of a tier's longest sequence (docs/gpu.md, "The fixed form's grids"). The
  // GPU benchmark's calls: the 16 questions' own tier holds the state's run of 1,000 rows (8 blocks) and the questions'
  // runs, within a power of two; their state tier 6 chunks of the 1,000 keys (cascade_plan.h) of 384 rows each; a warm
  // question's and a cold prefill's state tiers their 6 chunks of 24 rows or one.
  const g = cascade.benchGrids;
  expect(g.sixteen.own).toMatchObject({ rowBlocks: 8, sequences: 33, stepSequences: 18 });
  expect(g.sixteen.state).toMatchObject({ rowBlocks: 4, sequences: 13, stepSequences: 6 });
  expect(g.warm.own).toMatchObject({ rowBlocks: 1, sequences: 3, stepSequences: 2 });
  expect(g.warm.state).toMatchObject({ rowBlocks: 1, sequences: 12, stepSequences: 6 });
  expect(g.cold.own).toMatchObject({ rowBlocks: 8, sequences: 5, stepSequences: 3 });
  expect(g.cold.state).toMatchObject({ rowBlocks: 1, sequences: 10, stepSequences: 6 });
  // Over the random steps' fixed forms: the blocks launched against those holding rows (sized by the bucket, five times).
  expect(cascade.fixed.flashBlocks).toBeLessThan(2.5 * cascade.fixed.workingBlocks);
  // The merge in place visits the rows it writes (a warp per row and head), within a capacity: a cold prefill's one
  // question row of its 1,024, 16 questions' 384 of 1,536 (every row before).
  expect(g.cold).toMatchObject({ tokens: 1024, mergeWritten: 1, mergeRows: 8 });
  expect(g.sixteen).toMatchObject({ tokens: 1536, mergeWritten: 384, mergeRows: 512 });
  expect(g.warm).toMatchObject({ tokens: 32, mergeWritten: 24, mergeRows: 32 });
});

test('cascade: the merged reference equals float64 attention, and the ATen form the reference (fp32, 1e-5)', () => {
  expect(cascade.plans.compared).toBeGreaterThan(300);
  expect(cascade.plans.worstReference).toBeLessThanOrEqual(1e-5);
  expect(cascade.plans.worstAten).toBeLessThanOrEqual(1e-5);
});

// Split-key attention (csrc/kernels/math/split_key_math.h: the CUDA kernel's arithmetic, run here by its host twin) on
// every tier but the states' own runs, with the questions' own runs planned apart, its keys and values read in place in
// a paged store through the tiers' slots.
test('cascade on split-key attention, questions apart: float64 attention within 1e-5 (fp32) and a bf16 rounding (bf16); the fixed form gives the plain plan\'s bits', () => {
  expect(cascade.plans.worstSplitKey).toBeLessThanOrEqual(1e-5);
  // The kernel's grid gives each (row, head) of every such tier (the fixed form's too) to one warp.
  expect(cascade.plans.splitKeyCoverageErrors).toBe(0);
  // Outputs of a few units rounded to bf16 in each tier (a half unit in the last place at 4 is 7.8e-3), then merged.
  expect(cascade.plans.worstSplitKeyBf16).toBeLessThanOrEqual(1.6e-2);
  expect(cascade.fixed.splitKeyCompared).toBeGreaterThan(200);
  expect(cascade.fixed.splitKeyBitsDiffer).toBe(0);
  // Among the fixed forms, steps of questions alone (a warm question's): the states' own tier held empty, launching nothing.
  expect(cascade.fixed.withoutOwnTier).toBeGreaterThan(0);
});

test("split-key attention's exp, log and tanh (the kernel's and its host twin's alike) within 1e-7 of double precision", () => {
  const m = cascade.splitKeyMath;
  expect(m.expRelative).toBeLessThanOrEqual(1e-7);
  expect(m.logRelative).toBeLessThanOrEqual(1e-7);
  expect(m.tanhAbsolute).toBeLessThanOrEqual(1e-7);
  // The weight of a tile's top key is 1 exactly, a first tile's rescale 0, and a sum of one such weight gives an LSE of the top.
  expect(m.exactPoints).toBe(true);
  // The kernel's wide loads (eight bf16 of a key, two of a lane's value slice) give the element-wise forms' bits.
  expect(m.wideCompared).toBeGreaterThan(80);
  expect(m.wideDiffer).toBe(0);
  // The kernel against its host twin: on a GPU (the window), bit for bit; here the comparison runs with the CPU standing in.
  // Each tier launched alone and a layer's tiers in one launch (on the CPU, each by the twin).
  expect(cascade.splitKeyDevice).toMatchObject({ device: 'cpu', compared: 48, differ: 0, togetherDiffer: 0 });
  // The kernel's grid gives each (tier row, head) to one warp, on tiers of 1 to 24 rows a sequence and 1 to 8 heads a key head,
  // unmasked, causal and windowed.
  expect(cascade.splitKeyDevice.coverageErrors).toBe(0);
  // The merge's device check (the window's, on CUDA against the CPU loop), the CPU standing in for the device here.
  expect(cascade.mergeDevice).toMatchObject({ device: 'cpu', differ: 0, inPlaceDiffer: 0, worstFp32: 0, worstBf16: 0 });
  expect(cascade.mergeDevice.compared).toBeGreaterThanOrEqual(400);
  expect(cascade.mergeDevice.inPlaceCompared).toBeGreaterThanOrEqual(100);
});

test("the CPU kernels' attention (invariant at every level this CPU runs, and oneDNN) equals its plain reference, and that float64 attention (fp32, 1e-5); read from a store through the keys' slots, the same bits (fp32 and bf16)", () => {
  const c = cascade.cpu;
  expect(c.compared).toBeGreaterThan(300);
  expect(c.storeCompared).toBeGreaterThan(c.compared);
  expect(c.storeDiffer).toBe(0);
  expect(c.worstPlain).toBeLessThanOrEqual(1e-5);
  expect(Object.keys(c.worst)).toEqual(expect.arrayContaining(['generic', 'onednn']));
  for (const worst of Object.values(c.worst)) expect(worst).toBeLessThanOrEqual(1e-5);
});

test('cascade: a row that sees no key in a tier is merged from its other tier, whatever that tier left in its log-sum-exp', () => {
  expect(cascade.keyless).toEqual({ part: 'keyless', entriesOfRow0: 1, poisonIgnored: true, row0IsOtherTier: true });
});

test('cascade: a merge row with no entries merges to 0 without reading a tier', () => {
  expect(cascade.emptyRow).toEqual({ part: 'emptyRow', zero: true, other: true });
});

test("a step's arrays go to the device as views of one buffer (step_upload.h): every dtype, empty ones too, aligned and equal; a later step's are copied into it in one copy (a graph's refill), and arrays of other sizes are refused", () => {
  expect(cascade.upload).toEqual({ part: 'upload', arrays: 6, equal: true, oneBuffer: true, aligned: true, refilled: true, otherSizesRefused: true });
});

// --cuda-graph-chunks (csrc/runner/step_graphs.h): a graph step's graphs begin at layers 0, 1, 3, 7, ..., each twice the
// one before, the last taking the rest; as many as asked where the layers allow (bench-qwen3's 28: five at most).
test("a graph step is cut at layers 0, 1, 3, 7, 15, ...: each graph twice the last, as many as asked and the layers allow", () => {
  expect(cascade.graphCuts.cuts).toEqual({ '1 of 28': [0], '3 of 28': [0, 1, 3], '5 of 28': [0, 1, 3, 7, 15], '8 of 28': [0, 1, 3, 7, 15],
    '8 of 36': [0, 1, 3, 7, 15, 31], '8 of 3': [0, 1], '8 of 1': [0] });
});

test('row kernels: every fused kernel row is the bits of the CPU kernels, fp32 and bf16; q/k/v read in bf16 as read widened, four at a time too', () => {
  expect(rows.map((r) => `${r.kernel}/${r.dtype}`).sort()).toEqual(
    ['add_rms_norm', 'qk_norm_rope', 'qk_norm_rope_bf16_qkv', 'qk_norm_rope_step_keys', 'silu_mul', 'gelu_tanh_mul'].flatMap((k) => [`${k}/bf16`, `${k}/fp32`]).concat('bf16_quads/bf16').sort(),
  );
  for (const r of rows) {
    expect(r.compared).toBeGreaterThan(1000);
    expect(r).toMatchObject({ differing: 0 });
  }
});
