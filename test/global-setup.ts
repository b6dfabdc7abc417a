/**
 * Before any test: starts the node-gyp build in the background (helpers/gyp-build.ts), compiles
 * the server to dist/ (the tests run the `tqserve` command as users do; incremental, so a second run
 * compiles only what changed), type-checks the tests and benchmarks (ts-jest only transpiles them),
 * and generates the tiny test models (deterministic; reused when unchanged) and their TorchScript exports.
 */
import { execFile, execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { generateTestModel } from '../src/testmodels/generate';
import { tinyModelNames, visionModelNames } from '../src/testmodels/specs';
import { GYP_BUILD_ENV, gypTestFile, startGypBuild } from './helpers/gyp-build';
import { debianPython, referenceDir, torchscriptModel, torchscriptModelNames } from './helpers/models';

const root = path.resolve(__dirname, '..');
const tsc = require.resolve('typescript/bin/tsc');

function run(file: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) =>
    execFile(file, args, { cwd: root, encoding: 'utf8' }, (error, stdout, stderr) => (error ? reject(new Error(`${args.join(' ')}:\n${stdout}${stderr}`)) : resolve())),
  );
}

export default async function globalSetup(globalConfig: { testPathPattern?: string }): Promise<void> {
  // OpenBLAS (ATen's CPU GEMMs: the ATen kernels' checks, the float64 reference, the native checks) keeps a pool of its
  // own threads that spin in sched_yield between calls: beside OpenMP's and another test file's, on two cores, a quarter
  // of such a file's CPU time went to that spinning. One thread here; the workers and every process they start inherit it.
  // No answer depends on it (the engine's own kernels do not call OpenBLAS; ATen's are checked within a bound).
  process.env.OPENBLAS_NUM_THREADS ??= '1';
  // OpenMP's threads (the engines' kernels) spin 300,000 turns at each barrier before they sleep: made for a machine of
  // their own, where the thread waited for is running. Two test files at a time oversubscribe two cores, and a spinning
  // thread holds the core its partner needs: the invariance suite beside the CUDA compile check took 58 s instead of 16
  // (1,000 turns: 27 s; alone, 19 s against 17). Nor does any answer depend on it.
  process.env.GOMP_SPINCOUNT ??= '1000';
  // The node-gyp build, in the background from now on, if its test is among those selected.
  const pattern = globalConfig.testPathPattern ?? '';
  if (!pattern || new RegExp(pattern, 'i').test(gypTestFile)) process.env[GYP_BUILD_ENV] = startGypBuild();
  const compiled = Promise.all([
    run(process.execPath, [tsc, '-p', 'tsconfig.build.json']), // run as `node dist/tqserve.js`: no exec bit needed
    run(process.execPath, [tsc, '-p', 'tsconfig.json', '--noEmit']),
  ]);
  compiled.catch(() => undefined); // awaited below, after the models
  for (const name of visionModelNames) generateTestModel(name);
  for (const name of tinyModelNames) generateTestModel(name);
  for (const name of torchscriptModelNames) {
    const dir = generateTestModel(name);
    const pt = torchscriptModel(name);
    const stamp = path.join(dir, 'tqserve-testmodel.json');
    if (!fs.existsSync(pt) || fs.statSync(pt).mtimeMs < fs.statSync(stamp).mtimeMs) {
      execFileSync(debianPython, [path.join(referenceDir, 'export_torchscript.py'), dir, pt], { stdio: 'ignore' });
    }
  }
  await compiled;
}
