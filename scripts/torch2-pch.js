#!/usr/bin/env node
/**
 * The headers a CUDA build's C++ is checked against (scripts/cuda-build-check.js): a PyTorch 2.x wheel's (TQ_TORCH2_WHEEL,
 * else the newest /opt/wheels/torch-2.*.whl; Debian's 1.13 headers where there is none) and the CUDA toolkit's, with
 * ATen's header precompiled once (about 15 s on 2 cores: each checked source then reads it instead of parsing it).
 * Made at set-up into build/torch2-pch/, stamped with what made it (the wheel, its size and time, the flags); the check
 * uses it while the stamp matches and otherwise makes it again there.
 *
 *   node scripts/torch2-pch.js      (scripts/setup.sh runs it)
 */
const { execFile, execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..');
const prebuiltDir = path.join(root, 'build', 'torch2-pch');

/** The PyTorch 2.x wheel whose headers stand for a GPU machine's libtorch, or undefined. */
function findWheel() {
  const wheels = fs.existsSync('/opt/wheels')
    ? fs.readdirSync('/opt/wheels').filter((f) => /^torch-2\..*\.whl$/.test(f)).sort().reverse().map((f) => path.join('/opt/wheels', f))
    : [];
  return [process.env.TQ_TORCH2_WHEEL, ...wheels].find((w) => !!w && fs.existsSync(w));
}

/** The CUDA toolkit's include folder (cuda_runtime_api.h), or undefined. */
function cudaInclude() {
  return ['/usr/local/cuda/include', '/usr/local/cuda-13.0/include'].find((d) => fs.existsSync(path.join(d, 'cuda_runtime_api.h')));
}

/** The include folders and flags of the check, made under `dir`: the wheel's headers unpacked there, or Debian's. */
function layout(dir, wheel) {
  const include = wheel ? path.join(dir, 'torch2', 'torch', 'include') : '/usr/include';
  const includes = [include, path.join(include, 'torch', 'csrc', 'api', 'include')];
  const generated = path.join(dir, 'include');
  // -isystem: warnings are the sources' own (the 2.x headers use C++20 extensions that a C++17 build warns of).
  const flags = ['-std=gnu++17', '-Werror', '-Wall', `-I${path.join(root, 'csrc')}`, ...includes.flatMap((d) => ['-isystem', d]),
    '-isystem', cudaInclude(), `-I${generated}`, '-DTQ_CUDA=1', '-DTQ_ONEDNN=0'];
  return { wheel, includes, generated, flags, pch: path.join(dir, 'pch', 'ATen.h') };
}

/** What made a build: the wheel as it is on disk, and the flags. */
function stampOf(l) {
  const stat = l.wheel ? fs.statSync(l.wheel) : undefined;
  return JSON.stringify({ wheel: l.wheel ?? null, size: stat?.size ?? null, mtime: stat?.mtimeMs ?? null, flags: l.flags });
}

/**
 * Unpacks the headers into `dir`, writes the header a CUDA build generates (c10/cuda/impl/cuda_cmake_macros.h, which
 * the wheel lacks) and precompiles ATen's header with the check's flags; `run(file, args)` runs a compiler and resolves
 * when it ends (the test's queue; execFile here). Resolves to the layout, stamped.
 */
async function make(dir, run = runFile) {
  if (!cudaInclude()) throw new Error('CUDA headers (cuda_runtime_api.h) not found next to nvcc');
  const l = layout(dir, findWheel());
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  if (l.wheel) execFileSync('unzip', ['-q', '-o', l.wheel, 'torch/include/*', '-d', path.join(dir, 'torch2')]);
  fs.mkdirSync(path.join(l.generated, 'c10', 'cuda', 'impl'), { recursive: true });
  fs.writeFileSync(path.join(l.generated, 'c10', 'cuda', 'impl', 'cuda_cmake_macros.h'), '#define C10_CUDA_BUILD_SHARED_LIBS\n');
  // The forced include names a link to the header with the .gch beside it; the sources' own `#include <ATen/ATen.h>`
  // then finds it read (#pragma once). Not -Werror here: GCC warns of the header's own `#pragma once` when it is
  // the file compiled.
  fs.mkdirSync(path.dirname(l.pch), { recursive: true });
  fs.symlinkSync(path.join(l.includes[0], 'ATen', 'ATen.h'), l.pch);
  await run('g++', [...l.flags.filter((f) => f !== '-Werror'), '-x', 'c++-header', path.join(l.includes[0], 'ATen', 'ATen.h'), '-o', `${l.pch}.gch`]);
  fs.writeFileSync(path.join(dir, 'stamp'), stampOf(l));
  return l;
}

function runFile(file, args) {
  return new Promise((resolve, reject) => execFile(file, args, (error, _out, stderr) => (error ? reject(new Error(stderr)) : resolve())));
}

/** The set-up's build if its stamp matches the wheel and flags as they are now, else undefined. */
function fresh() {
  const stamp = path.join(prebuiltDir, 'stamp');
  if (!fs.existsSync(stamp) || !cudaInclude()) return undefined;
  const l = layout(prebuiltDir, findWheel());
  return fs.readFileSync(stamp, 'utf8') === stampOf(l) && fs.existsSync(`${l.pch}.gch`) ? l : undefined;
}

module.exports = { findWheel, cudaInclude, make, fresh };

if (require.main === module) {
  if (!cudaInclude()) {
    console.log('torch2-pch: no CUDA headers here; the check will say so');
    process.exit(0);
  }
  make(prebuiltDir).catch((e) => {
    console.error(`torch2-pch: ${e.message}`);
    process.exit(1);
  });
}
