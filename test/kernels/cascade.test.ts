/**
 * The cascade attention's plan, reference and merge (csrc/batch/cascade_plan.h, csrc/kernels/cascade/), with
 * test/native/cascade_check.cpp linked against the engine library the build made (build/libtq_core.a): on 400
 * random segment trees (cached prefixes, shared segments, several states, steps of every size, read-outs at any
 * token, with and without a sliding window, with and without soft-capping), the visibility each step's plan
 * encodes is the engine's one rule element for element; no level is empty; the merged reference equals float64
 * attention; the ATen form equals the reference; and a row that sees no key in a level is merged without its
 * log-sum-exp being read. The CUDA merge kernel is compiled by cuda.test.ts with the other .cu files.
 */
import { execFile } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const root = path.resolve(__dirname, '..', '..');
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-cascade-'));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

function run(file: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(file, args, { maxBuffer: 16 << 20 }, (error, stdout, stderr) => (error ? reject(new Error(`${file}:\n${stderr}`)) : resolve(stdout))),
  );
}

let parts: Record<string, any>;
beforeAll(async () => {
  const library = path.join(root, 'build', 'libtq_core.a');
  if (!fs.existsSync(library)) throw new Error(`${library} is not built; run: npm run build:addon`);
  const exe = path.join(scratch, 'cascade_check');
  await run('g++', ['-std=c++17', '-O2', `-I${path.join(root, 'csrc')}`, '-I/usr/include/torch/csrc/api/include',
    path.join(root, 'test', 'native', 'cascade_check.cpp'), library, '-ltorch', '-ltorch_cpu', '-lc10', '-ldnnl', '-fopenmp', '-o', exe]);
  const lines = (await run(exe, [])).trim().split('\n').map((l) => JSON.parse(l));
  parts = Object.fromEntries(lines.map((l) => [l.part, l]));
}, 180_000);

test('every step of 400 random segment trees: the plan sees what the visibility rule sees, each key once, no level empty', () => {
  const p = parts.plans;
  expect(p.layouts).toBeGreaterThan(1500);
  expect(p.mismatched).toBe(0);
  expect(p.emptyLevels).toBe(0);
  expect(p.keylessEntries).toBe(0);
  // The window cut the state level in some of them, and some rows were in several levels.
  expect(p.windowedLevels).toBeGreaterThan(0);
  expect(p.maxLevels).toBeGreaterThan(2);
});

test('the merged reference equals float64 attention, and the ATen form the reference (fp32, 1e-5)', () => {
  expect(parts.plans.compared).toBeGreaterThan(300);
  expect(parts.plans.worstReference).toBeLessThanOrEqual(1e-5);
  expect(parts.plans.worstAten).toBeLessThanOrEqual(1e-5);
});

test('a row that sees no key in a level is merged from its other level, whatever that level left in its log-sum-exp', () => {
  expect(parts.keyless).toEqual({ part: 'keyless', entriesOfRow0: 1, poisonIgnored: true, row0IsOtherLevel: true });
});
