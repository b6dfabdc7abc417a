#!/usr/bin/env node
/**
 * The C++ of a CUDA build (TQ_CUDA=1: the device code paths; TQ_ONEDNN=0: a CUDA libtorch brings its own oneDNN
 * privately), compiled against the headers of the libtorch a GPU machine has (scripts/torch2-pch.js: a PyTorch 2.x
 * wheel's, ATen's precompiled), in the units a CUDA build compiles: each folder holding a source with a CUDA, oneDNN,
 * OpenMP or PyTorch 2.x branch, as one translation unit (scripts/compile_units.py; a source it compiles alone, alone).
 * A CUDA build links neither OpenMP nor oneDNN (CMakeLists.txt): a call to either that its sources keep compiles, and
 * fails only at the GPU machine's link (`omp_set_num_threads`: bench/gpu/results/h200-2026-11-30-build-failed), so the
 * units holding such calls are compiled to objects, whose undefined symbols test/kernels/cuda.test.ts reads; the
 * others are checked (-fsyntax-only).
 *
 * Written into build/cuda-build-check/: the units, the objects, each unit's dependencies, and check.json last, once
 * every unit compiled. The set-up runs it; the test runs it again where a source or a header any unit includes changed
 * since, or the plan did (sources, flags, the wheel).
 *
 *   node scripts/cuda-build-check.js      (scripts/setup.sh runs it, after scripts/torch2-pch.js)
 */
const { execFile, execFileSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const torch2Pch = require('./torch2-pch.js');
const { unitMembers, writeCompileUnits } = require('./compile-units.js');

const root = path.resolve(__dirname, '..');
const csrc = path.join(root, 'csrc');
const outDir = path.join(root, 'build', 'cuda-build-check');
const resultFile = path.join(outDir, 'check.json');

/** The C++ sources under csrc/ that name any of `words`. */
function sourcesNaming(...words) {
  return execFileSync('grep', ['-rl', '--include=*.cpp', ...words.flatMap((w) => ['-e', w]), csrc], { encoding: 'utf8' }).trim().split('\n').sort();
}

/** What is compiled and how: the sources, their units (written under build/cuda-build-check/units), and which are compiled to objects. */
function plan() {
  const torch2Sources = sourcesNaming('TORCH_VERSION_MAJOR');
  const linkSources = sourcesNaming('omp.h', 'omp_', '_OPENMP', 'dnnl');
  const sources = [...new Set([...sourcesNaming('TQ_CUDA', 'TQ_ONEDNN'), ...torch2Sources, ...linkSources])].sort();
  const folders = [...new Set(sources.map((f) => path.dirname(f)))];
  const written = writeCompileUnits(folders, path.join(outDir, 'units')).units;
  const compiledIn = (source) => written.find((unit) => unitMembers(unit).includes(path.relative(root, source))) ?? source;
  const units = [...new Set(sources.map(compiledIn))].map((file, i) => {
    const members = written.includes(file) ? unitMembers(file) : [path.relative(root, file)];
    const linked = linkSources.some((s) => members.includes(path.relative(root, s)));
    return { file, members, object: linked ? path.join(outDir, `${path.basename(file)}.${i}.o`) : null };
  });
  const rel = (files) => files.map((f) => path.relative(root, f));
  return { sources: rel(sources), torch2Sources: rel(torch2Sources), linkSources: rel(linkSources), units };
}

/** A unit's compile: -O0 where its object is read (the undefined symbols are the calls the source makes; code generation is the cost over a syntax check). */
function unitArgs(layout, unit, depfile) {
  const output = unit.object ? ['-c', '-O0', '-o', unit.object] : ['-fsyntax-only'];
  return ['-include', layout.pch, '-Winvalid-pch', ...output, '-MD', '-MF', depfile, '-MT', 'unit', ...layout.flags, unit.file];
}

const depfileOf = (unit) => path.join(outDir, `${path.basename(unit.file)}.d`);

/** The files a depfile names. */
function dependencies(depfile) {
  return fs.readFileSync(depfile, 'utf8').replace(/\\\n/g, ' ').replace(/^[^:]*:/, '').trim().split(/\s+/).filter(Boolean);
}

/** What the result was made of: the plan and the flags (the wheel's stamp among them). */
function stampOf(p, layout) {
  return JSON.stringify({ units: p.units.map((u) => [path.relative(root, u.file), u.members, !!u.object]), flags: layout.flags, wheel: layout.wheel ?? null });
}

/** The last result, where nothing it was made of has changed since: the plan, the flags, and every file a unit read. */
function fresh() {
  const layout = torch2Pch.fresh();
  if (!layout || !fs.existsSync(resultFile)) return undefined;
  const result = JSON.parse(fs.readFileSync(resultFile, 'utf8'));
  const p = plan();
  if (result.stamp !== stampOf(p, layout)) return undefined;
  const made = fs.statSync(resultFile).mtimeMs;
  const changed = result.dependencies.some((f) => !fs.existsSync(f) || fs.statSync(f).mtimeMs > made);
  const lost = p.units.some((u) => u.object && !fs.existsSync(u.object));
  return changed || lost ? undefined : { ...p, flags: layout.flags };
}

function runFile(file, args) {
  return new Promise((resolve, reject) =>
    execFile(file, args, { maxBuffer: 16 << 20 }, (error, stdout, stderr) => (error ? reject(new Error(`${args[args.length - 1]}:\n${stdout}${stderr}`)) : resolve())));
}

/** Runs commands `cores` at a time (a compile, or a build through Ninja, which prints its compilers' errors on stdout). */
function queued(cores) {
  const waiting = [];
  let running = 0;
  return (file, args) => {
    const start = () => {
      running++;
      return runFile(file, args).finally(() => {
        running--;
        waiting.shift()?.();
      });
    };
    return running < cores ? start() : new Promise((go) => waiting.push(go)).then(start);
  };
}

/**
 * Compiles every unit (the headers made first where the set-up's are stale); `run(file, args)` runs a compiler and
 * resolves when it ends (the test's queue). Resolves to the plan and the flags; rejects with the first compiler error.
 */
async function make(run = queued(os.cpus().length)) {
  const layout = torch2Pch.fresh() ?? (await torch2Pch.make(path.join(root, 'build', 'torch2-pch'), run));
  fs.mkdirSync(outDir, { recursive: true });
  fs.rmSync(resultFile, { force: true });
  const p = plan();
  await Promise.all(p.units.map((unit) => run('g++', unitArgs(layout, unit, depfileOf(unit)))));
  const read = [...new Set(p.units.flatMap((unit) => dependencies(depfileOf(unit))))].map((f) => path.resolve(root, f)).sort();
  fs.writeFileSync(resultFile, JSON.stringify({ stamp: stampOf(p, layout), dependencies: read }));
  return { ...p, flags: layout.flags };
}

module.exports = { fresh, make, queued };

if (require.main === module) {
  if (!torch2Pch.fresh()) {
    console.log('cuda-build-check: no headers of a CUDA build here (scripts/torch2-pch.js); the test will say so');
    process.exit(0);
  }
  if (fresh()) process.exit(0);  // compiled already, and nothing it read has changed since
  make().catch((e) => {
    console.error(`cuda-build-check: ${e.message}`);
    process.exit(1);
  });
}
