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

interface CudaBuildCheck {
  units: { file: string; members: string[]; object: string }[];
  library: string[];
  programs: Record<string, string[]>;
  sources: string[];
  flags: string[];
  dependencies: string[];
}
type Run = (file: string, args: string[]) => Promise<void>;
// eslint-disable-next-line @typescript-eslint/no-var-requires
const cudaCheck = require(path.join(root, 'scripts', 'cuda-build-check.js')) as {
  fresh(): CudaBuildCheck | undefined;
  make(run: Run): Promise<CudaBuildCheck>;
  queued(cores: number): Run;
  unresolved(check: CudaBuildCheck, program: string, extra?: string[]): string[];
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
 * The C++ of a CUDA build (TQ_CUDA=1, TQ_ONEDNN=0) compiles, in the units a CUDA build compiles (the engine library's,
 * tq_cli's and the native checks the GPU window builds), and links on paper (below), against the CUDA toolkit's headers
 * and the headers of the libtorch a GPU machine has: a PyTorch 2.x wheel's (TQ_TORCH2_WHEEL, else
 * /opt/wheels/torch-2.*.whl; the CPU wheel carries the c10/cuda and ATen/cuda headers too), so the code behind
 * `TORCH_VERSION_MAJOR >= 2` (FlashAttention-2 and the memory-efficient kernel, CUDA graph capture, the ATen kernels'
 * 2.x calls) is compiled as the GPU machine's libtorch 2.11 compiles it. Where no wheel is on the machine, Debian's
 * 1.13 headers stand in (those branches are then not compiled) and the 2.x test is skipped, saying so. The set-up
 * compiles it (scripts/cuda-build-check.js, which says what and how); here a unit is compiled again where its source or
 * a header it reads changed since, and every unit where the plan, the flags or the wheel did.
 */
// eslint-disable-next-line @typescript-eslint/no-var-requires
const torch2Wheel = (require(path.join(root, 'scripts', 'torch2-pch.js')) as { findWheel(): string | undefined }).findWheel();
if (!torch2Wheel) console.warn('No PyTorch 2.x wheel (TQ_TORCH2_WHEEL, /opt/wheels/torch-2.*.whl): the TORCH_VERSION_MAJOR >= 2 sources were NOT compiled');
const cudaBuildCheck: Promise<CudaBuildCheck> = (async () => cudaCheck.fresh() ?? cudaCheck.make(run))();
cudaBuildCheck.catch(() => undefined);

test(`a CUDA build's C++ (TQ_CUDA=1, TQ_ONEDNN=0) compiles against ${torch2Wheel ? path.basename(torch2Wheel) : "Debian's libtorch 1.13"}'s headers, in its units: the library, tq_cli and the window's checks`, async () => {
  const check = await cudaBuildCheck;
  expect(check.sources).toEqual(expect.arrayContaining(['csrc/engine/intra_op_threads.cpp', 'csrc/kernels/cpu/gemm/onednn.cpp', 'csrc/cli/main.cpp',
    'csrc/kernels/aten/few_rows_gemm.cpp', 'test/native/row_kernels_device_check.cpp']));
  // Each folder in one unit (fewer compiles than sources), every unit compiled to an object.
  expect(check.units.length).toBeLessThan(check.sources.length);
  expect(check.units.every((u) => fs.statSync(u.object).size > 0)).toBe(true);
  // The programs the GPU window builds (bench/gpu/window.py), less the addon, whose own sources have no CUDA branch.
  const windowTargets = /targets = \[([^\]]*)\]/.exec(fs.readFileSync(path.join(root, 'bench', 'gpu', 'window.py'), 'utf8'))![1];
  expect(Object.keys(check.programs).sort()).toEqual(Array.from(windowTargets.matchAll(/"(\w+)"/g), (m) => m[1]).sort());
}, 300_000);

/** The CUDA kernels' objects (their launches are what the C++ calls), once the build has them. */
const kernelObjects = () => kernelsBuilt.then(() => kernels.map((file) => path.join(sm90, `${file}.o`)));

// libtorch_cuda and libc10_cuda, the one part of a CUDA build's link that no wheel here carries: their namespaces.
const FROM_TORCH_CUDA = /^(typeinfo for |vtable for )?(c10|at)::cuda::/;

test.each(['tq_cli', 'cascade_check', 'row_kernels_device_check'])("a CUDA build's %s links: every symbol its objects need is defined by them, by the libraries a CUDA build links, or by libtorch_cuda", async (program) => {
  const check = await cudaBuildCheck;
  const missing = cudaCheck.unresolved(check, program, await kernelObjects());
  expect(missing.filter((symbol) => !FROM_TORCH_CUDA.test(symbol))).toEqual([]);
  expect(missing).toEqual(expect.arrayContaining(['c10::cuda::device_count()']));  // its CUDA branches are the ones compiled
}, 300_000);

test('the link check finds what a CUDA build would not link: a kernel whose object is missing, an OpenMP call, a function defined nowhere', async () => {
  const check = await cudaBuildCheck;
  const objects = await kernelObjects();
  const withoutMerge = objects.filter((o) => !o.endsWith('attention_merge.cu.o'));
  expect(cudaCheck.unresolved(check, 'tq_cli', withoutMerge).filter((s) => !FROM_TORCH_CUDA.test(s)))
    .toEqual([expect.stringContaining('tq::cuda::launch_attention_merge(')]);
  // A CUDA build links no OpenMP (its libtorch bundles its own, privately) and no oneDNN.
  const probe = path.join(scratch, 'link_probe.cpp');
  fs.writeFileSync(probe, '#include <omp.h>\nnamespace tq { void defined_nowhere(); }\nvoid probe(int n) { omp_set_num_threads(n); tq::defined_nowhere(); }\n');
  execFileSync('g++', ['-c', '-O0', ...check.flags, probe, '-o', `${probe}.o`]);
  expect(cudaCheck.unresolved(check, 'tq_cli', [...objects, `${probe}.o`]).filter((s) => !FROM_TORCH_CUDA.test(s)).sort())
    .toEqual(['omp_set_num_threads', 'tq::defined_nowhere()']);
}, 300_000);

test('a CUDA build calls no OpenMP or oneDNN: no object leaves a symbol of either undefined (some libtorch wheels export oneDNN\'s)', async () => {
  const check = await cudaBuildCheck;
  const undefinedIn = (object: string) => execFileSync('nm', ['-u', '-C', object], { encoding: 'utf8' }).split('\n');
  const foreign = check.units.flatMap((u) => undefinedIn(u.object).filter((symbol) => /\b(omp_|GOMP_|kmp_|dnnl)/.test(symbol)).map((s) => `${path.basename(u.file)}: ${s.trim()}`));
  expect(foreign).toEqual([]);
}, 300_000);

test("the check's result is taken only while nothing it read has changed: a header a unit includes, newer than its object, makes it stale (compiled again)", async () => {
  const check = await cudaBuildCheck;
  const header = path.join(csrc, 'engine', 'intra_op_threads.h');
  expect(check.dependencies).toContain(header);
  const unit = check.units.find((u) => u.members.includes('csrc/engine/intra_op_threads.cpp'))!;
  expect(cudaCheck.fresh()).toBeDefined();
  // As though the header had been edited after the unit's object was made.
  const made = fs.statSync(unit.object).mtime;
  try {
    fs.utimesSync(unit.object, made, new Date(fs.statSync(header).mtimeMs - 1000));
    expect(cudaCheck.fresh()).toBeUndefined();
  } finally {
    fs.utimesSync(unit.object, made, made);
  }
  expect(cudaCheck.fresh()).toBeDefined();
});

(torch2Wheel ? test : test.skip)(`the TORCH_VERSION_MAJOR >= 2 branches are among what compiled (${torch2Wheel ? path.basename(torch2Wheel) : 'no PyTorch 2.x wheel here: NOT compiled'})`, async () => {
  const check = await cudaBuildCheck;
  expect(check.sources).toEqual(
    expect.arrayContaining(['csrc/runner/step_graphs.cpp', 'csrc/kernels/aten/aten_layer_kernels.cpp', 'csrc/kernels/cascade/flash_attention.cpp']));
  // The preprocessed source calls FlashAttention-2 and the memory-efficient kernel: the 2.x branch is the one compiled.
  const flash = execFileSync('g++', [...check.flags, '-E', path.join(csrc, 'kernels', 'cascade', 'flash_attention.cpp')], { encoding: 'utf8', maxBuffer: 1 << 28 });
  expect(flash).toMatch(/at::_flash_attention_forward\(q, k, v/);
  expect(flash).toMatch(/at::_efficient_attention_forward\(/);
}, 300_000);
