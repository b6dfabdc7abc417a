/**
 * The CUDA kernels without a GPU: every .cu under csrc/kernels/cuda compiles with the installed nvcc
 * for sm_90 (the H100), alone and without torch headers, so a broken kernel fails CI. The build compiles them
 * (CMakeLists.txt: tq_cuda_sm90, in a CPU build where CMake finds nvcc); this brings that target up to date and reads
 * what it made. And the readout arithmetic they share with the CPU readout (csrc/kernels/math/label_readout_math.h)
 * is compiled by the host compiler exactly as written: no fused multiply-add where the kernel rounds twice.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const root = path.resolve(__dirname, '..', '..');
const csrc = path.join(root, 'csrc');
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-cuda-'));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

const kernels = fs.readdirSync(path.join(csrc, 'kernels', 'cuda')).filter((f) => f.endsWith('.cu'));

interface CudaBuildCheck { sources: string[]; torch2Sources: string[]; linkSources: string[]; units: { file: string; members: string[]; object: string | null }[]; flags: string[] }
type Run = (file: string, args: string[]) => Promise<void>;
// eslint-disable-next-line @typescript-eslint/no-var-requires
const cudaCheck = require(path.join(root, 'scripts', 'cuda-build-check.js')) as {
  fresh(): CudaBuildCheck | undefined;
  make(run: Run): Promise<CudaBuildCheck>;
  queued(cores: number): Run;
};
/** This file's commands, as many at a time as there are cores: each is queued as the file loads, so they share the cores. */
const run = cudaCheck.queued(os.cpus().length);

/**
 * The build's objects of the kernels and ptxas's report of each (build/cuda-sm90/<kernel>.cu.o and .resources), brought
 * up to date first: Ninja compiles again a kernel whose source or a header it includes changed since, and nothing else.
 */
const sm90 = path.join(root, 'build', 'cuda-sm90');
const kernelsBuilt = run('cmake', ['--build', path.join(root, 'build'), '--target', 'tq_cuda_sm90']).catch((error: Error) => {
  throw /unknown target/.test(error.message)
    ? new Error('build/ has no target tq_cuda_sm90: CMake found no nvcc when it configured the build (install the CUDA toolkit, or set -DTQ_NVCC=<path>), then: npm run build:addon')
    : error;
});
kernelsBuilt.catch(() => undefined); // reported by the tests that await it

/** ptxas's report: each kernel's stack frame in bytes, by its mangled name. */
function stackFrames(report: string): Map<string, number> {
  const frames = new Map<string, number>();
  let kernel = '';
  for (const line of report.split('\n')) {
    const named = /Function properties for (\S+)/.exec(line);
    if (named) kernel = named[1];
    const frame = /(\d+) bytes stack frame/.exec(line);
    if (frame && kernel) frames.set(kernel, Number(frame[1]));
  }
  return frames;
}

test('there are CUDA kernels to compile', () => {
  expect(kernels).toContain('label_readout.cu');
});

test.each(kernels)('%s compiles for sm_90 with nvcc, without torch', async (file) => {
  await kernelsBuilt;
  expect(fs.statSync(path.join(sm90, `${file}.o`)).size).toBeGreaterThan(0);
}, 120_000);

// A kernel whose per-row arrays (a merge's entries, a tile's fetch) are indexed by a loop of run-time length keeps them
// on the stack, in local memory: each access a trip through L1, and a loop's loads no longer issued together. The
// latency-bound kernels (a few rows a launch, on a warm question) are written with loops of fixed length so that this
// never happens (docs/gpu.md, "The row kernels' loads"). fp8_gemm's tile spills a few registers and is not one of them.
test.each(kernels.filter((file) => file !== 'fp8_gemm.cu'))('%s: every kernel holds its arrays in registers (no stack frame)', async (file) => {
  await kernelsBuilt;
  const frames = stackFrames(fs.readFileSync(path.join(sm90, `${file}.resources`), 'utf8'));
  expect(frames.size).toBeGreaterThan(0);
  expect([...frames].filter(([, bytes]) => bytes > 0)).toEqual([]);
}, 120_000);

test('the readout arithmetic is the same bits at -O0 and at -O3 with FMA allowed (no contraction)', () => {
  const run = (flags: string[]) => {
    const exe = path.join(scratch, `twin${flags.join('')}`);
    execFileSync('g++', ['-std=c++17', ...flags, `-I${csrc}`, path.join(root, 'test', 'native', 'readout_twin.cpp'), '-o', exe], { stdio: 'pipe' });
    return execFileSync(exe, { encoding: 'utf8' });
  };
  const plain = run(['-O0']);
  expect(plain.trim().split('\n')).toHaveLength(6);
  expect(run(['-O3', '-march=haswell', '-ffp-contract=fast'])).toBe(plain);
}, 120_000);

/**
 * The C++ of a CUDA build (TQ_CUDA=1, TQ_ONEDNN=0) compiles, in the units a CUDA build compiles, against the CUDA
 * toolkit's headers and the headers of the libtorch a GPU machine has: a PyTorch 2.x wheel's (TQ_TORCH2_WHEEL, else
 * /opt/wheels/torch-2.*.whl; the CPU wheel carries the c10/cuda and ATen/cuda headers too), so the code behind
 * `TORCH_VERSION_MAJOR >= 2` (FlashAttention-2 and the memory-efficient kernel, CUDA graph capture, the ATen kernels'
 * 2.x calls) is compiled as the GPU machine's libtorch 2.11 compiles it. Where no wheel is on the machine, Debian's
 * 1.13 headers stand in (those branches are then not compiled) and the 2.x test is skipped, saying so. The set-up
 * compiles it (scripts/cuda-build-check.js, which says what and how); here it is compiled again where a source, a
 * header a unit reads, or the plan changed since.
 */
// eslint-disable-next-line @typescript-eslint/no-var-requires
const torch2Wheel = (require(path.join(root, 'scripts', 'torch2-pch.js')) as { findWheel(): string | undefined }).findWheel();
if (!torch2Wheel) console.warn('No PyTorch 2.x wheel (TQ_TORCH2_WHEEL, /opt/wheels/torch-2.*.whl): the TORCH_VERSION_MAJOR >= 2 sources were NOT compiled');
const cudaBuildCheck: Promise<CudaBuildCheck> = (async () => cudaCheck.fresh() ?? cudaCheck.make(run))();
cudaBuildCheck.catch(() => undefined);

test(`the sources with CUDA or oneDNN branches compile as a CUDA build (TQ_CUDA=1, TQ_ONEDNN=0) against ${torch2Wheel ? path.basename(torch2Wheel) : "Debian's libtorch 1.13"}'s headers, in its units`, async () => {
  const check = await cudaBuildCheck;
  expect(check.sources.length).toBeGreaterThanOrEqual(4);
  expect(check.sources).toEqual(expect.arrayContaining(check.torch2Sources));
  // Each in the unit of its folder: fewer compiles than sources, every source in one of them.
  expect(check.units.length).toBeLessThan(check.sources.length);
  expect(check.units.flatMap((u) => u.members)).toEqual(expect.arrayContaining(check.sources));
}, 300_000);

test('a CUDA build calls no OpenMP or oneDNN: its objects leave no symbol of either undefined (the build links neither)', async () => {
  const check = await cudaBuildCheck;
  expect(check.linkSources).toEqual(expect.arrayContaining(['csrc/engine/intra_op_threads.cpp', 'csrc/kernels/cpu/gemm/onednn.cpp']));
  // Every such source's unit compiled to an object.
  const linkUnits = check.units.filter((u) => u.object);
  expect(linkUnits.flatMap((u) => u.members)).toEqual(expect.arrayContaining(check.linkSources));
  const undefinedIn = (object: string) => execFileSync('nm', ['-u', '-C', object], { encoding: 'utf8' }).split('\n');
  const foreign = linkUnits.flatMap((u) => undefinedIn(u.object!).filter((symbol) => /\b(omp_|GOMP_|kmp_|dnnl)/.test(symbol)).map((s) => `${path.basename(u.file)}: ${s.trim()}`));
  expect(foreign).toEqual([]);
  // The check can fail: an OpenMP call compiled with the CUDA build's flags leaves its symbol undefined.
  const probe = path.join(scratch, 'omp_probe.cpp');
  fs.writeFileSync(probe, '#include <omp.h>\nvoid set(int n) { omp_set_num_threads(n); }\n');
  execFileSync('g++', ['-c', '-O0', ...check.flags, probe, '-o', `${probe}.o`]);
  expect(execFileSync('nm', ['-u', `${probe}.o`], { encoding: 'utf8' })).toMatch(/omp_set_num_threads/);
}, 300_000);

test("the check's result is taken only while nothing it read has changed: a header a unit includes, newer than the result, makes it stale (compiled again)", async () => {
  await cudaBuildCheck;
  const result = path.join(root, 'build', 'cuda-build-check', 'check.json');
  const header = path.join(csrc, 'engine', 'intra_op_threads.h');
  expect(JSON.parse(fs.readFileSync(result, 'utf8')).dependencies).toContain(header);
  expect(cudaCheck.fresh()).toBeDefined();
  // As though the header had been edited after the result was written.
  const made = fs.statSync(result).mtime;
  try {
    fs.utimesSync(result, made, new Date(fs.statSync(header).mtimeMs - 1000));
    expect(cudaCheck.fresh()).toBeUndefined();
  } finally {
    fs.utimesSync(result, made, made);
  }
  expect(cudaCheck.fresh()).toBeDefined();
});

(torch2Wheel ? test : test.skip)(`the TORCH_VERSION_MAJOR >= 2 branches are among what compiled (${torch2Wheel ? path.basename(torch2Wheel) : 'no PyTorch 2.x wheel here: NOT compiled'})`, async () => {
  const check = await cudaBuildCheck;
  expect(check.torch2Sources).toEqual(
    expect.arrayContaining(['csrc/runner/step_graphs.cpp', 'csrc/kernels/aten/aten_layer_kernels.cpp', 'csrc/kernels/cascade/flash_attention.cpp']));
  // The preprocessed source calls FlashAttention-2 and the memory-efficient kernel: the 2.x branch is the one compiled.
  const flash = execFileSync('g++', [...check.flags, '-E', path.join(csrc, 'kernels', 'cascade', 'flash_attention.cpp')], { encoding: 'utf8', maxBuffer: 1 << 28 });
  expect(flash).toMatch(/at::_flash_attention_forward\(q, k, v/);
  expect(flash).toMatch(/at::_efficient_attention_forward\(/);
}, 300_000);
