/**
 * The CUDA kernels without a GPU: every .cu under csrc/kernels/cuda compiles with the installed nvcc
 * for sm_90 (the H100), alone and without torch headers, so a broken kernel fails CI. And the readout
 * arithmetic they share with the CPU readout (csrc/kernels/math/label_readout_math.h) is compiled by the
 * host compiler exactly as written: no fused multiply-add where the kernel rounds twice.
 */
import { execFile, execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const root = path.resolve(__dirname, '..', '..');
const csrc = path.join(root, 'csrc');
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-cuda-'));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

function nvcc(): string {
  for (const candidate of [process.env.NVCC, '/usr/local/bin/nvcc', '/usr/local/cuda/bin/nvcc', '/usr/bin/nvcc'])
    if (candidate && fs.existsSync(candidate)) return candidate;
  throw new Error('nvcc not found (set NVCC): CI compiles the CUDA kernels for sm_90');
}

const kernels = fs.readdirSync(path.join(csrc, 'kernels', 'cuda')).filter((f) => f.endsWith('.cu'));

/** Runs commands as many at a time as there are cores: every compile of this file is queued as it loads, so they share the cores. */
const waiting: (() => void)[] = [];
let running = 0;
function run(file: string, args: string[]): Promise<void> {
  const start = () =>
    new Promise<void>((resolve, reject) => {
      running++;
      execFile(file, args, (error, _stdout, stderr) => {
        running--;
        waiting.shift()?.();
        if (error) reject(new Error(`${args[args.length - 1]}:\n${stderr}`));
        else resolve();
      });
    });
  const queued = running < os.cpus().length ? start() : new Promise<void>((go) => waiting.push(go)).then(start);
  queued.catch(() => undefined);  // reported by the test that awaits it
  return queued;
}

const nvccBuilds = new Map(
  kernels.map((file) => [file, Promise.resolve().then(() =>
    run(nvcc(), ['-std=c++17', '-O3', '-arch=sm_90', '-Werror', 'all-warnings', `-I${csrc}`, '-c', path.join(csrc, 'kernels', 'cuda', file), '-o', path.join(scratch, `${file}.o`)]))]),
);
for (const built of nvccBuilds.values()) built.catch(() => undefined);

test('there are CUDA kernels to compile', () => {
  expect(kernels).toContain('label_readout.cu');
});

test.each(kernels)('%s compiles for sm_90 with nvcc, without torch', async (file) => {
  await nvccBuilds.get(file);
  expect(fs.statSync(path.join(scratch, `${file}.o`)).size).toBeGreaterThan(0);
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
 * the check writes it, as a CUDA build would.
 */
const torch2Wheel = [process.env.TQ_TORCH2_WHEEL, ...(fs.existsSync('/opt/wheels') ? fs.readdirSync('/opt/wheels').filter((f) => /^torch-2\..*\.whl$/.test(f)).sort().reverse().map((f) => path.join('/opt/wheels', f)) : [])]
  .find((w): w is string => !!w && fs.existsSync(w));
if (!torch2Wheel) console.warn('No PyTorch 2.x wheel (TQ_TORCH2_WHEEL, /opt/wheels/torch-2.*.whl): the TORCH_VERSION_MAJOR >= 2 sources were NOT compiled');
const sourcesNaming = (...words: string[]) =>
  execFileSync('grep', ['-rl', '--include=*.cpp', ...words.flatMap((w) => ['-e', w]), csrc], { encoding: 'utf8' }).trim().split('\n');
const torch2Sources = sourcesNaming('TORCH_VERSION_MAJOR');
const cudaBuildSources = [...new Set([...sourcesNaming('TQ_CUDA', 'TQ_ONEDNN'), ...torch2Sources])];
/** The include folders of the libtorch the check compiles against: the 2.x wheel's (unpacked here) or Debian's. */
function torchIncludes(): string[] {
  if (!torch2Wheel) return ['/usr/include', '/usr/include/torch/csrc/api/include'];
  execFileSync('unzip', ['-q', '-o', torch2Wheel, 'torch/include/*', '-d', path.join(scratch, 'torch2')]);
  const include = path.join(scratch, 'torch2', 'torch', 'include');
  return [include, path.join(include, 'torch', 'csrc', 'api', 'include')];
}
let cudaBuildFlags: string[] = [];
const cudaBuildCheck = (async () => {
  const cudaInclude = ['/usr/local/cuda/include', '/usr/local/cuda-13.0/include'].find((d) => fs.existsSync(path.join(d, 'cuda_runtime_api.h')));
  if (!cudaInclude) throw new Error('CUDA headers (cuda_runtime_api.h) not found next to nvcc');
  const includes = torchIncludes();
  const generated = path.join(scratch, 'include');
  fs.mkdirSync(path.join(generated, 'c10', 'cuda', 'impl'), { recursive: true });
  fs.writeFileSync(path.join(generated, 'c10', 'cuda', 'impl', 'cuda_cmake_macros.h'), '#define C10_CUDA_BUILD_SHARED_LIBS\n');
  // -isystem: warnings are the sources' own (the 2.x headers use C++20 extensions that a C++17 build warns of).
  const flags = ['-std=gnu++17', '-Werror', '-Wall', `-I${csrc}`, ...includes.flatMap((d) => ['-isystem', d]), '-isystem', cudaInclude, `-I${generated}`,
    '-DTQ_CUDA=1', '-DTQ_ONEDNN=0'];
  cudaBuildFlags = flags;
  // ATen's headers precompiled once with the same flags and included first in every source: each check then reads
  // them instead of parsing them again. The forced include names a link to the header with the .gch beside it; the
  // sources' own `#include <ATen/ATen.h>` then finds it read (#pragma once).
  const pch = path.join(scratch, 'pch');
  fs.mkdirSync(pch, { recursive: true });
  fs.symlinkSync(path.join(includes[0], 'ATen', 'ATen.h'), path.join(pch, 'ATen.h'));
  // (Not -Werror there: GCC warns of the header's own `#pragma once` when it is the file compiled.)
  await run('g++', [...flags.filter((f) => f !== '-Werror'), '-x', 'c++-header', path.join(includes[0], 'ATen', 'ATen.h'), '-o', path.join(pch, 'ATen.h.gch')]);
  await Promise.all(cudaBuildSources.map((file) => run('g++', ['-include', path.join(pch, 'ATen.h'), '-Winvalid-pch', '-fsyntax-only', ...flags, file])));
})();
cudaBuildCheck.catch(() => undefined);

test(`the sources with CUDA or oneDNN branches compile as a CUDA build (TQ_CUDA=1, TQ_ONEDNN=0) against ${torch2Wheel ? path.basename(torch2Wheel) : "Debian's libtorch 1.13"}'s headers`, async () => {
  expect(cudaBuildSources.length).toBeGreaterThanOrEqual(4);
  expect(cudaBuildSources).toEqual(expect.arrayContaining(torch2Sources));
  await cudaBuildCheck;
}, 300_000);

(torch2Wheel ? test : test.skip)(`the TORCH_VERSION_MAJOR >= 2 branches are among what compiled (${torch2Wheel ? path.basename(torch2Wheel) : 'no PyTorch 2.x wheel here: NOT compiled'})`, async () => {
  await cudaBuildCheck;
  expect(torch2Sources.map((f) => path.relative(csrc, f)).sort()).toEqual(
    expect.arrayContaining(['engine/step_graphs.cpp', 'kernels/aten/aten_layer_kernels.cpp', 'kernels/cascade/flash_attention.cpp']));
  // The preprocessed source calls FlashAttention-2 and the memory-efficient kernel: the 2.x branch is the one compiled.
  const flash = execFileSync('g++', [...cudaBuildFlags, '-E', path.join(csrc, 'kernels', 'cascade', 'flash_attention.cpp')], { encoding: 'utf8', maxBuffer: 1 << 28 });
  expect(flash).toMatch(/at::_flash_attention_forward\(qs/);
  expect(flash).toMatch(/at::_efficient_attention_forward\(/);
}, 300_000);
