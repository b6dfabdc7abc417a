/**
 * The CUDA kernels without a GPU: every .cu under csrc/kernels/cuda compiles with the installed nvcc
 * for sm_90 (the H100), alone and without torch headers, so a broken kernel fails CI. The build compiles them
 * (CMakeLists.txt: tq_cuda_sm90, in a CPU build where CMake finds nvcc); this brings that target up to date and reads
 * what it made. And the readout arithmetic they share with the CPU readout (csrc/kernels/math/label_readout_math.h)
 * is compiled by the host compiler exactly as written: no fused multiply-add where the kernel rounds twice.
 */
import { execFile, execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { unitMembers, writeCompileUnits } from '../helpers/compile-units';

const root = path.resolve(__dirname, '..', '..');
const csrc = path.join(root, 'csrc');
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-cuda-'));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

const kernels = fs.readdirSync(path.join(csrc, 'kernels', 'cuda')).filter((f) => f.endsWith('.cu'));

/** Runs commands as many at a time as there are cores: every compile of this file is queued as it loads, so they share the cores. */
const waiting: (() => void)[] = [];
let running = 0;
function run(file: string, args: string[]): Promise<string> {
  const start = () =>
    new Promise<string>((resolve, reject) => {
      running++;
      execFile(file, args, (error, stdout, stderr) => {
        running--;
        waiting.shift()?.();
        if (error) reject(new Error(`${args[args.length - 1]}:\n${stdout}${stderr}`));
        else resolve(stderr);
      });
    });
  const queued = running < os.cpus().length ? start() : new Promise<void>((go) => waiting.push(go)).then(start);
  queued.catch(() => undefined);  // reported by the test that awaits it
  return queued;
}

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
 * The C++ of a CUDA build (TQ_CUDA=1: the device code paths; TQ_ONEDNN=0: a CUDA libtorch brings its own oneDNN
 * privately) compiles, checked against the CUDA toolkit's headers and the headers of the libtorch a GPU machine has:
 * a PyTorch 2.x wheel's (TQ_TORCH2_WHEEL, else /opt/wheels/torch-2.*.whl; the CPU wheel carries the c10/cuda and
 * ATen/cuda headers too), so the code behind `TORCH_VERSION_MAJOR >= 2` (FlashAttention-2 and the memory-efficient
 * kernel, CUDA graph capture, the ATen kernels' 2.x calls) is compiled as the GPU machine's libtorch 2.11 compiles it.
 * Where no wheel is on the machine, Debian's 1.13 headers stand in (those branches are then not compiled) and the
 * 2.x test is skipped, saying so. A CUDA build's headers lack the one CMake generates (c10/cuda/impl/cuda_cmake_macros.h):
 * the check writes it, as a CUDA build would. The set-up unpacks the headers and precompiles ATen's (scripts/torch2-pch.js);
 * where the wheel or the flags have changed since, the check does it first.
 */
// eslint-disable-next-line @typescript-eslint/no-var-requires
const torch2Pch = require(path.join(root, 'scripts', 'torch2-pch.js')) as {
  findWheel(): string | undefined;
  fresh(): Layout | undefined;
  make(dir: string, run: (file: string, args: string[]) => Promise<void>): Promise<Layout>;
};
interface Layout { wheel?: string; flags: string[]; pch: string }
const torch2Wheel = torch2Pch.findWheel();
if (!torch2Wheel) console.warn('No PyTorch 2.x wheel (TQ_TORCH2_WHEEL, /opt/wheels/torch-2.*.whl): the TORCH_VERSION_MAJOR >= 2 sources were NOT compiled');
const sourcesNaming = (...words: string[]) =>
  execFileSync('grep', ['-rl', '--include=*.cpp', ...words.flatMap((w) => ['-e', w]), csrc], { encoding: 'utf8' }).trim().split('\n');
const torch2Sources = sourcesNaming('TORCH_VERSION_MAJOR');
// A CUDA build links neither OpenMP nor oneDNN of its own (CMakeLists.txt): a call to either that its sources keep
// compiles, and fails only at the GPU machine's link (`omp_set_num_threads`, bench/gpu/results/h200-2026-11-30-build-failed).
// Their units are compiled to objects here, and the objects' undefined symbols read.
const linkSources = sourcesNaming('omp.h', 'omp_', '_OPENMP', 'dnnl');
const cudaBuildSources = [...new Set([...sourcesNaming('TQ_CUDA', 'TQ_ONEDNN'), ...torch2Sources, ...linkSources])];
// What a CUDA build compiles them in: each folder's sources as one translation unit (CMakeLists.txt's tq_compile_units),
// written by the same script from their folders; a source it compiles alone is compiled alone here too.
const folders = [...new Set(cudaBuildSources.map((f) => path.dirname(f)))];
const { units } = writeCompileUnits(folders, path.join(scratch, 'units'));
const compiledIn = (source: string) => units.find((unit) => unitMembers(unit).includes(path.relative(root, source))) ?? source;
const cudaBuildUnits = [...new Set(cudaBuildSources.map(compiledIn))];
const linkUnits = [...new Set(linkSources.map(compiledIn))];
const objectOf = (unit: string) => path.join(scratch, `${path.basename(unit)}.${cudaBuildUnits.indexOf(unit)}.o`);
let cudaBuildFlags: string[] = [];
const cudaBuildCheck = (async () => {
  // The headers unpacked and ATen's precompiled (scripts/torch2-pch.js): the set-up's while current, else made here.
  const headers = torch2Pch.fresh() ?? (await torch2Pch.make(path.join(scratch, 'torch2-pch'), (file, args) => run(file, args).then(() => undefined)));
  cudaBuildFlags = headers.flags;
  // -O0: the undefined symbols are the calls the source makes; code generation is the cost over a syntax check.
  const output = (unit: string) => (linkUnits.includes(unit) ? ['-c', '-O0', '-o', objectOf(unit)] : ['-fsyntax-only']);
  await Promise.all(cudaBuildUnits.map((file) => run('g++', ['-include', headers.pch, '-Winvalid-pch', ...output(file), ...headers.flags, file])));
})();
cudaBuildCheck.catch(() => undefined);

test(`the sources with CUDA or oneDNN branches compile as a CUDA build (TQ_CUDA=1, TQ_ONEDNN=0) against ${torch2Wheel ? path.basename(torch2Wheel) : "Debian's libtorch 1.13"}'s headers, in its units`, async () => {
  expect(cudaBuildSources.length).toBeGreaterThanOrEqual(4);
  expect(cudaBuildSources).toEqual(expect.arrayContaining(torch2Sources));
  // Each in the unit of its folder: fewer compiles than sources, every source in one of them.
  expect(cudaBuildUnits.length).toBeLessThan(cudaBuildSources.length);
  expect(cudaBuildUnits.flatMap((u) => (units.includes(u) ? unitMembers(u) : [path.relative(root, u)]))).toEqual(
    expect.arrayContaining(cudaBuildSources.map((f) => path.relative(root, f))));
  await cudaBuildCheck;
}, 300_000);

test('a CUDA build calls no OpenMP or oneDNN: its objects leave no symbol of either undefined (the build links neither)', async () => {
  expect(linkSources.map((f) => path.relative(csrc, f))).toEqual(expect.arrayContaining(['engine/intra_op_threads.cpp', 'kernels/cpu/gemm/onednn.cpp']));
  await cudaBuildCheck;
  const undefinedIn = (unit: string) => execFileSync('nm', ['-u', '-C', objectOf(unit)], { encoding: 'utf8' }).split('\n');
  const foreign = linkUnits.flatMap((unit) => undefinedIn(unit).filter((symbol) => /\b(omp_|GOMP_|kmp_|dnnl)/.test(symbol)).map((s) => `${path.basename(unit)}: ${s.trim()}`));
  expect(foreign).toEqual([]);
  // The check can fail: an OpenMP call compiled with the CUDA build's flags leaves its symbol undefined.
  const probe = path.join(scratch, 'omp_probe.cpp');
  fs.writeFileSync(probe, '#include <omp.h>\nvoid set(int n) { omp_set_num_threads(n); }\n');
  execFileSync('g++', ['-c', '-O0', ...cudaBuildFlags, probe, '-o', `${probe}.o`]);
  expect(execFileSync('nm', ['-u', `${probe}.o`], { encoding: 'utf8' })).toMatch(/omp_set_num_threads/);
}, 300_000);

(torch2Wheel ? test : test.skip)(`the TORCH_VERSION_MAJOR >= 2 branches are among what compiled (${torch2Wheel ? path.basename(torch2Wheel) : 'no PyTorch 2.x wheel here: NOT compiled'})`, async () => {
  await cudaBuildCheck;
  expect(torch2Sources.map((f) => path.relative(csrc, f)).sort()).toEqual(
    expect.arrayContaining(['runner/step_graphs.cpp', 'kernels/aten/aten_layer_kernels.cpp', 'kernels/cascade/flash_attention.cpp']));
  // The preprocessed source calls FlashAttention-2 and the memory-efficient kernel: the 2.x branch is the one compiled.
  const flash = execFileSync('g++', [...cudaBuildFlags, '-E', path.join(csrc, 'kernels', 'cascade', 'flash_attention.cpp')], { encoding: 'utf8', maxBuffer: 1 << 28 });
  expect(flash).toMatch(/at::_flash_attention_forward\(q, k, v/);
  expect(flash).toMatch(/at::_efficient_attention_forward\(/);
}, 300_000);
