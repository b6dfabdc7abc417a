/**
 * Before any test: starts the node-gyp build in the background (helpers/gyp-build.ts), compiles
 * the server to dist/ as `npm run build` does (the tests run the `tqserve` command as users do; incremental, so a
 * second run compiles only what changed), type-checks the tests and benchmarks (ts-jest only transpiles them),
 * and generates the tiny test models (deterministic; reused when unchanged) and their TorchScript exports.
 */
import { execFile } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { generateTestModel } from '../src/testmodels/generate';
import { tinyModelNames, visionModelNames } from '../src/testmodels/specs';
import { GYP_BUILD_ENV, gypTestFile, startGypBuild } from './helpers/gyp-build';
import { debianPython, pythonEnv, referenceDir, torchscriptModel, torchscriptModelNames } from './helpers/models';

const root = path.resolve(__dirname, '..');
const tsc = require.resolve('typescript/bin/tsc');

function run(file: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<void> {
  return new Promise((resolve, reject) =>
    execFile(file, args, { cwd: root, encoding: 'utf8', env }, (error, stdout, stderr) => (error ? reject(new Error(`${args.join(' ')}:\n${stdout}${stderr}`)) : resolve())),
  );
}

export default async function globalSetup(globalConfig: { testPathPattern?: string }): Promise<void> {
  // Two test files at a time oversubscribe two cores, and threads that spin while they wait hold the cores the work
  // needs (bench/README.md, "Set-up and suite time"): OpenBLAS (ATen's CPU GEMMs: the ATen kernels' checks, the float64
  // reference, the native checks) on one thread, its pool spun between calls; OpenMP's threads (the engines' kernels)
  // spin 1,000 turns at a barrier before they sleep, not 300,000, which suit a machine of their own. The workers and
  // every process they start inherit both. No answer depends on either (the engine's own kernels give the same bits
  // at any thread count; ATen's are checked within a bound).
  process.env.OPENBLAS_NUM_THREADS ??= '1';
  process.env.GOMP_SPINCOUNT ??= '1000';
  // The suite starts about a hundred servers, engine processes and tq_cli runs, each filling its heap with small
  // allocations (a tokenizer.json's vocabulary and merges, libtorch's start, the weights) a 4 KiB page fault at a time,
  // and under the VMs these machines are, each fault is a trap to the hypervisor. glibc's malloc asking for transparent
  // huge pages (where the kernel gives them on request) faults once per 2 MiB instead: bench/README.md, "Set-up and
  // suite time", has what it saves. It places memory, nothing more: no answer depends on it.
  process.env.GLIBC_TUNABLES ??= 'glibc.malloc.hugetlb=1';
  // The node-gyp build, in the background from now on, if its test is among those selected.
  const pattern = globalConfig.testPathPattern ?? '';
  if (!pattern || new RegExp(pattern, 'i').test(gypTestFile)) process.env[GYP_BUILD_ENV] = startGypBuild();
  const compiled = Promise.all([
    // As `npm run build` does; run as `node dist/tqserve.js`: no exec bit needed.
    run(process.execPath, [tsc, '-p', 'tsconfig.build.json']).then(() => run(process.execPath, [path.join(root, 'scripts', 'make-validators.js')])),
    run(process.execPath, [tsc, '-p', 'tsconfig.json', '--noEmit']),
  ]);
  compiled.catch(() => undefined); // awaited below, after the models
  // The TorchScript exports (a Python process each) first, running while the other models are generated.
  const exported = torchscriptModelNames.map((name) => {
    const dir = generateTestModel(name);
    const pt = torchscriptModel(name);
    const stamp = path.join(dir, 'tqserve-testmodel.json');
    const current = fs.existsSync(pt) && fs.statSync(pt).mtimeMs >= fs.statSync(stamp).mtimeMs;
    return current ? Promise.resolve() : run(debianPython, [path.join(referenceDir, 'export_torchscript.py'), dir, pt], pythonEnv());
  });
  exported.forEach((e) => e.catch(() => undefined)); // awaited below
  for (const name of visionModelNames) generateTestModel(name);
  for (const name of tinyModelNames) generateTestModel(name);
  await Promise.all(exported);
  await compiled;
}
