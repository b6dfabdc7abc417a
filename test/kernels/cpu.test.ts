/**
 * The engine's CPU kernels without torch (test/native/*_check.cpp, built with the engine library, so its kernels as
 * the addon has them compiled, with the compiler's default floating-point contraction).
 *
 * Packed weights' memory (csrc/kernels/cpu/gemm/weight_memory.h), with test/native/weight_memory_check.cpp (with torch: its
 * buffers are tensors): 2 MiB-aligned, zeros, advised for transparent huge pages, unmapped with its tensor.
 *
 * The invariant GEMM's kernel families (csrc/kernels/cpu/gemm/gemm_kernels.h), with test/native/gemm_check.cpp and run at every instruction set level this CPU has, in fp32 and bf16:
 * every output within a small fraction of the worst-case rounding bound of a float64 reference, every
 * row bit-identical alone, in batches of other sizes and places, under other column splits and when
 * accumulated; bf16 outputs the fp32 ones rounded; and every level the same bits (16, 8 or 4 lanes, vdpbf16ps,
 * libm's fma). Each at an odd and an even K (steps packed or read in place). And with bf16 values whose products and
 * sums fall below the normal range, every bf16 kernel the bits of a plain model of vdpbf16ps (test/native/dpbf16_model.h).
 * Each bf16 family's packing in vectors the bytes of its plain loops.
 *
 * RoPE and RMSNorm rows (csrc/kernels/cpu/rows/row_math.h), with test/native/rowwise_check.cpp: the same bits wherever
 * a row's output lies relative to its input.
 *
 * Attention's mix with two keys per vdpbf16ps (csrc/kernels/cpu/attention/key_pairs.h, csrc/batch/shared_prefix.h), with
 * test/native/pairs_check.cpp: a query's mixed values the same bits in every layout random batches give its keys, on
 * a model of the instruction on every CPU and on the instruction itself where the CPU has it.
 *
 * The int8 GEMM (csrc/kernels/cpu/gemm/int8_gemm.h), with test/native/int8_check.cpp: its quantization as the rules
 * say, every output the exact integer sum's fp32 expression, every row the same bits in any batch, and the
 * AVX2, AVX-512 VNNI and AMX paths the generic loop's bits (AMX on a model of its tiles on every CPU, csrc/kernels/cpu/gemm/amx_tiles.h,
 * and on the tiles where the CPU has them).
 *
 * The float64 functions of the RoPE tables (csrc/common/fixed_math.h), with test/native/fixed_math_check.cpp: within a few
 * ulps of libm's long double functions, and their fp32 roundings the reference's.
 */
import * as fs from 'fs';
import { runnableIsaLevels, runsBf16Amx, runsInt8Amx, runsInt8Vnni } from '../helpers/cpu';
import { runLinkedCheck, scratchDir } from '../helpers/linked-check';

const scratch = scratchDir();
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

type Row = {
  level: string; dtype: string; k: number; width: number; depth: number; worstErrorOverBound: number;
  rowsCompared: number; rowsDiffering: number; bf16OutputsDiffering: number; bits: string;
};

/**
 * Runs a check (built with the engine library: CMakeLists.txt), one JSON object per output line. Compiled here only
 * when edited since the build, then as the library is (-O3, NDEBUG): the checks instantiate kernel templates of their own.
 */
function runCheck<T>(name: string): Promise<T[]> {
  // TQ_KERNELS unset: the programs run every level up to this CPU's best.
  const env = { ...process.env };
  delete env.TQ_KERNELS;
  delete env.TQ_PORTABLE_KERNELS;
  return runLinkedCheck(name, scratch, { compileFlags: ['-O3', '-DNDEBUG'], env });
}

type Denormals = { check: 'denormals'; kernels: number; kernelsDiffering: number; tinyOutputs: number };
type Packing = { check: 'packing'; kernels: number; vectorKernels: number; cases: number; casesDiffering: number };
// rows: the portable arithmetic's kernels; native: the AMX bf16 kernel's (its own bits), on the model of the tiles and
// on the tiles where the CPU has AMX-BF16.
let rows: Row[], native: Row[], denormals: Denormals, packing: Packing;
beforeAll(async () => {
  const lines = await runCheck<Row | Denormals | Packing>('gemm_check');
  denormals = lines.find((l): l is Denormals => 'check' in l && l.check === 'denormals')!;
  packing = lines.find((l): l is Packing => 'check' in l && l.check === 'packing')!;
  const kernels = lines.filter((l): l is Row => !('check' in l));
  rows = kernels.filter((r) => !r.level.startsWith('amx'));
  native = kernels.filter((r) => r.level.startsWith('amx'));
}, 120_000);

test('every level this CPU runs is checked, and the generic one as a CPU without FMA runs it, in fp32 and bf16, at an odd and an even K', () => {
  const expected = ['generic-libm', ...runnableIsaLevels().reverse()];
  expect(rows.map((r) => `${r.level}/${r.dtype}/${r.k}`)).toEqual(
    expected.flatMap((l) => [2101, 2100].flatMap((k) => [`${l}/fp32/${k}`, `${l}/bf16/${k}`])),
  );
  // bf16 adds pairs of k per step (vdpbf16ps, or FMAs in its order); fp32 one k per step.
  for (const r of rows) expect(`${r.level}/${r.dtype}: ${r.depth}`).toBe(`${r.level}/${r.dtype}: ${r.dtype === 'bf16' ? 2 : 1}`);
});

test('outputs within 5% of the worst-case fp32 rounding bound of a float64 reference (a missing or doubled term is ~2x it)', () => {
  for (const r of rows) expect(`${r.level}/${r.dtype}/${r.k}: ${r.worstErrorOverBound <= 0.05}`).toBe(`${r.level}/${r.dtype}/${r.k}: true`);
});

test('every row bit-identical alone, in other batches and places, under other column splits, and accumulated', () => {
  for (const r of rows) {
    expect(r.rowsCompared).toBeGreaterThan(1000);
    expect(`${r.level}/${r.dtype}/${r.k}: ${r.rowsDiffering} differing`).toBe(`${r.level}/${r.dtype}/${r.k}: 0 differing`);
  }
});

test('bf16 outputs, rounded tile by tile, are the fp32 outputs rounded to nearest even', () => {
  for (const r of rows) expect(`${r.level}/${r.dtype}/${r.k}: ${r.bf16OutputsDiffering}`).toBe(`${r.level}/${r.dtype}/${r.k}: 0`);
});

test('every level gives the same bits (one arithmetic: docs/arithmetic.md), vdpbf16ps and the FMAs in its order alike', () => {
  for (const dtype of ['fp32', 'bf16'])
    for (const k of [2101, 2100]) {
      const same = rows.filter((r) => r.dtype === dtype && r.k === k);
      expect(same.length).toBe(runnableIsaLevels().length + 1);
      expect(`${dtype}/${k}: ${new Set(same.map((r) => r.bits)).size} kinds of bits`).toBe(`${dtype}/${k}: 1 kinds of bits`);
    }
});

test("AMX's native bf16 kernel (on a model of the tiles; on the tiles where the CPU has AMX-BF16): accurate, and the same bits in any batch", () => {
  expect(native.map((r) => `${r.level}/${r.dtype}/${r.k}`)).toEqual(['amx-model/bf16/301', ...(runsBf16Amx() ? ['amx-bf16/bf16/2101', 'amx-bf16/bf16/2100'] : [])]);
  for (const r of native) {
    expect(r.worstErrorOverBound).toBeLessThanOrEqual(0.05);
    expect(r.rowsCompared).toBeGreaterThan(1000);
    expect(`${r.level}/${r.k}: ${r.rowsDiffering} rows, ${r.bf16OutputsDiffering} bf16 outputs differing`).toBe(`${r.level}/${r.k}: 0 rows, 0 bf16 outputs differing`);
  }
});

test('bf16 values and sums below the normal range: every bf16 kernel the bits of the vdpbf16ps model (denormals read and written as 0)', () => {
  // The model, against libm's fma, the generic, AVX2 and AVX-512 FMA kernels and the instruction where the CPU has it.
  expect(denormals.kernels).toBe(runnableIsaLevels().length + 1);
  expect(denormals.tinyOutputs).toBeGreaterThan(0);
  expect(denormals.kernelsDiffering).toBe(0);
});

test("every bf16 family's vector pack writes its plain loops' bytes (keys and weights along k, values along n; odd K, partial panels), never reading past a row", () => {
  // gemm_check places the values against an unreadable page: a read past their end stops it.
  expect(packing.kernels).toBe(runnableIsaLevels().length + 1);
  expect(packing.vectorKernels).toBe(packing.kernels);
  expect(packing.cases).toBeGreaterThan(3000);
  expect(packing.casesDiffering).toBe(0);
});

test("a softmax numerator and its row's sum do not change with their place in the row (generic loops: no contraction in the vector body only), nor with the level", async () => {
  const paths = await runCheck<{ path: string; offsets: number; differing: number; differingFromGeneric: number; sumError: number }>('softmax_check');
  expect(paths.map((p) => p.path).sort()).toEqual(['generic', ...runnableIsaLevels().filter((l) => l.startsWith('avx512'))].sort());
  for (const p of paths) {
    expect(`${p.path}: ${p.differing} of ${p.offsets} offsets differ`).toBe(`${p.path}: 0 of ${p.offsets} offsets differ`);
    expect(`${p.path}: ${p.differingFromGeneric} of ${p.offsets} offsets differ from the generic loops`).toBe(`${p.path}: 0 of ${p.offsets} offsets differ from the generic loops`);
    expect(p.sumError).toBeLessThan(1e-7);
  }
}, 120_000);

test("RoPE and RMSNorm values do not change with where a row's output lies (no contraction in some loop versions only)", async () => {
  const rows = await runCheck<{ kernel: string; n: number; placements: number; differing: number }>('rowwise_check');
  expect(rows.map((r) => r.kernel).filter((k, i, all) => all.indexOf(k) === i)).toEqual(['rope', 'rms_norm']);
  for (const r of rows) {
    expect(r.placements).toBeGreaterThan(100);
    expect(`${r.kernel}/${r.n}: ${r.differing} of ${r.placements} placements differ`).toBe(`${r.kernel}/${r.n}: 0 of ${r.placements} placements differ`);
  }
}, 120_000);

// On a plain model of vdpbf16ps everywhere (test/native/dpbf16_model.h), and on the instruction where the CPU has it.
test("the mix's key pairs give a query the same bits in any batch, step, chunk, hole and address (and pairs as the keys lie, or shared text cut mid-pair, would not)", async () => {
  const rows = await runCheck<{ arithmetic: string; compared: number; differing: number; shifted: number; shiftedDiffering: number;
    naiveDiffering: number; splitCompared: number; splitDiffering: number; modelDiffering: number }>('pairs_check');
  expect(rows.map((r) => r.arithmetic)).toEqual(['model', ...(runnableIsaLevels().includes('avx512-bf16') ? ['vdpbf16ps'] : [])]);
  for (const r of rows) {
    expect(r.compared).toBeGreaterThan(3000);
    expect(r.shifted).toBeGreaterThan(5000);
    expect(`${r.arithmetic}: ${r.differing} of ${r.compared} layouts, ${r.shiftedDiffering} of ${r.shifted} shifts differ`).toBe(
      `${r.arithmetic}: 0 of ${r.compared} layouts, 0 of ${r.shifted} shifts differ`);
    // The check can see a wrong pairing: values spanning 2^-12..2^12 make the order of the adds show.
    expect(r.naiveDiffering).toBeGreaterThan(0);
    expect(r.splitCompared).toBeGreaterThan(100);
    expect(r.splitDiffering).toBeGreaterThan(0);
    // The model is the instruction: its bits where the CPU has it (-1: it has not).
    expect(r.modelDiffering).toBe(runnableIsaLevels().includes('avx512-bf16') ? 0 : -1);
  }
}, 120_000);

test('int8: quantized as the rules say, outputs exact, rows the same in any batch, and VNNI and AMX equal to the generic loop', async () => {
  const paths = await runCheck<{
    path: string; k: number; quantizedDiffering: number; outputsDiffering: number; accumulatedDiffering: number;
    bf16OutputsDiffering: number; rowsCompared: number; rowsDiffering: number; bits: string;
  }>('int8_check');
  // The AMX kernel on its model of the tiles on every CPU; on the tiles themselves where the CPU has AMX-INT8.
  const expected = ['generic', ...(runnableIsaLevels().includes('avx2') ? ['avx2'] : []), ...(runsInt8Vnni() ? ['avx512-vnni'] : []), 'amx-model',
    ...(runsInt8Amx() ? ['amx-int8'] : [])];
  expect([...new Set(paths.map((p) => p.path))]).toEqual(expected);
  for (const p of paths) {
    const counts = { quantized: p.quantizedDiffering, outputs: p.outputsDiffering, accumulated: p.accumulatedDiffering, bf16: p.bf16OutputsDiffering, rows: p.rowsDiffering };
    expect(`${p.path}/${p.k}: ${JSON.stringify(counts)}`).toBe(`${p.path}/${p.k}: ${JSON.stringify({ quantized: 0, outputs: 0, accumulated: 0, bf16: 0, rows: 0 })}`);
    expect(p.rowsCompared).toBeGreaterThan(300);
  }
  for (const k of [2101, 2102, 2100]) expect(new Set(paths.filter((p) => p.k === k).map((p) => p.bits)).size).toBe(1);
}, 120_000);

test("RoPE tables' float64 functions (common/fixed_math.h, plain arithmetic: the same bits on every CPU) within a few ulps of libm's long double", async () => {
  const [r] = await runCheck<{ worstPowUlps: number; worstSinUlps: number; worstCosUlps: number; worstExpUlps: number; worstLogUlps: number;
    tableValues: number; fp32Differing: number }>('fixed_math_check');
  // pow is exp(e ln theta): ln theta's rounding grows with e ln theta (at most about 16 here).
  expect(r.worstPowUlps).toBeLessThan(32);
  for (const worst of [r.worstSinUlps, r.worstCosUlps, r.worstExpUlps, r.worstLogUlps]) expect(worst).toBeLessThan(4);
  // Rounded to fp32, as the tables are, they are the reference's values but at a rare rounding boundary.
  expect(r.tableValues).toBeGreaterThan(50_000);
  expect(r.fp32Differing).toBeLessThanOrEqual(r.tableValues * 1e-4);
}, 60_000);

test("packed weights' memory: a buffer of a huge page or more starts 2 MiB-aligned, holds zeros, is advised for transparent huge pages, and is unmapped with its tensor; a smaller one holds zeros", async () => {
  const [m] = await runCheck<{ thp: string; large: { aligned: boolean; zeros: boolean; advised: boolean; hugePagesKb: number; unmapped: boolean };
    small: { bytes: number; zeros: boolean } }>('weight_memory_check');
  // Where the kernel has no transparent huge pages (no sysfs entry), madvise refuses the advice: the buffer is still good.
  expect(m.large).toMatchObject({ aligned: true, zeros: true, advised: m.thp !== 'none', unmapped: true });
  expect(m.small).toEqual({ bytes: 1000, zeros: true });
}, 60_000);
