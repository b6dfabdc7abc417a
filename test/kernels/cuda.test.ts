/**
 * The CUDA kernels without a GPU: every .cu under csrc/kernels/cuda compiles with the installed nvcc
 * for sm_90 (the H100), alone and without torch headers, so a broken kernel fails CI. And the readout
 * arithmetic they share with the CPU readout (csrc/kernels/label_readout_math.h) is compiled by the
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
 * The C++ of a CUDA build (TQ_CUDA=1: the device code paths; TQ_ONEDNN=0: a CUDA libtorch brings its
 * own oneDNN privately) compiles, checked against this machine's libtorch headers and CUDA headers.
 * Debian's libtorch ships c10/cuda headers but not the one CMake generates for a CUDA build
 * (c10/cuda/impl/cuda_cmake_macros.h): the check writes it, as a CUDA build would.
 */
const cudaBuildSources = execFileSync('grep', ['-rl', '--include=*.cpp', '-e', 'TQ_CUDA', '-e', 'TQ_ONEDNN', csrc], { encoding: 'utf8' }).trim().split('\n');
const cudaBuildCheck = (async () => {
  const cudaInclude = ['/usr/local/cuda/include', '/usr/local/cuda-13.0/include'].find((d) => fs.existsSync(path.join(d, 'cuda_runtime_api.h')));
  if (!cudaInclude) throw new Error('CUDA headers (cuda_runtime_api.h) not found next to nvcc');
  const generated = path.join(scratch, 'include');
  fs.mkdirSync(path.join(generated, 'c10', 'cuda', 'impl'), { recursive: true });
  fs.writeFileSync(path.join(generated, 'c10', 'cuda', 'impl', 'cuda_cmake_macros.h'), '#define C10_CUDA_BUILD_SHARED_LIBS\n');
  const flags = ['-std=gnu++17', '-Werror', '-Wall', `-I${csrc}`, '-I/usr/include/torch/csrc/api/include', `-I${cudaInclude}`, `-I${generated}`, '-DTQ_CUDA=1', '-DTQ_ONEDNN=0'];
  // ATen's headers precompiled once with the same flags and included first in every source: each check then reads
  // them instead of parsing them again (53 s -> 35 s for 11 sources on 2 cores). The forced include names a link to
  // the header with the .gch beside it; the sources' own `#include <ATen/ATen.h>` then finds it read (#pragma once).
  const pch = path.join(scratch, 'pch');
  fs.mkdirSync(pch, { recursive: true });
  fs.symlinkSync('/usr/include/ATen/ATen.h', path.join(pch, 'ATen.h'));
  // (Not -Werror there: GCC warns of the header's own `#pragma once` when it is the file compiled.)
  await run('g++', [...flags.filter((f) => f !== '-Werror'), '-x', 'c++-header', '/usr/include/ATen/ATen.h', '-o', path.join(pch, 'ATen.h.gch')]);
  await Promise.all(cudaBuildSources.map((file) => run('g++', ['-include', path.join(pch, 'ATen.h'), '-Winvalid-pch', '-fsyntax-only', ...flags, file])));
})();
cudaBuildCheck.catch(() => undefined);

test('the sources with CUDA or oneDNN branches compile as a CUDA build (TQ_CUDA=1, TQ_ONEDNN=0)', async () => {
  expect(cudaBuildSources.length).toBeGreaterThanOrEqual(4);
  await cudaBuildCheck;
}, 300_000);
