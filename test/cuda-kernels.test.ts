/**
 * The CUDA kernels without a GPU: every .cu under csrc/kernels/cuda compiles with the installed nvcc
 * for sm_90 (the H100), alone and without torch headers, so a broken kernel fails CI. And the readout
 * arithmetic they share with the CPU readout (csrc/kernels/label_readout_math.h) is compiled by the
 * host compiler exactly as written: no fused multiply-add where the kernel rounds twice.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const root = path.resolve(__dirname, '..');
const csrc = path.join(root, 'csrc');
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-cuda-'));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

function nvcc(): string {
  for (const candidate of [process.env.NVCC, '/usr/local/bin/nvcc', '/usr/local/cuda/bin/nvcc', '/usr/bin/nvcc'])
    if (candidate && fs.existsSync(candidate)) return candidate;
  throw new Error('nvcc not found (set NVCC): CI compiles the CUDA kernels for sm_90');
}

const kernels = fs.readdirSync(path.join(csrc, 'kernels', 'cuda')).filter((f) => f.endsWith('.cu'));

test('there are CUDA kernels to compile', () => {
  expect(kernels).toContain('label_readout.cu');
});

test.each(kernels)('%s compiles for sm_90 with nvcc, without torch', (file) => {
  const out = path.join(scratch, `${file}.o`);
  execFileSync(nvcc(), ['-std=c++17', '-O3', '-arch=sm_90', '-Werror', 'all-warnings', `-I${csrc}`, '-c', path.join(csrc, 'kernels', 'cuda', file), '-o', out], { stdio: 'pipe' });
  expect(fs.statSync(out).size).toBeGreaterThan(0);
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
