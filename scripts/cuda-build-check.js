#!/usr/bin/env node
/**
 * A CUDA build's C++ (TQ_CUDA=1: the device code paths; TQ_ONEDNN=0: a CUDA libtorch brings its own oneDNN privately),
 * compiled against the headers of the libtorch a GPU machine has (scripts/torch2-pch.js: a PyTorch 2.x wheel's, ATen's
 * precompiled), in the units a CUDA build compiles (scripts/compile_units.py), each to an object: the engine library's
 * folders as CMakeLists.txt globs them, tq_cli's, and the native checks the GPU window builds. So that the build is
 * also linked on paper: test/kernels/cuda.test.ts reads every symbol the objects of a program leave undefined (with
 * the CUDA kernels' objects, build/cuda-sm90) and finds each among the objects, the libraries a CUDA build links that
 * are here (that libtorch's CPU libraries, the CUDA runtime, the C and C++ runtimes: their symbols listed at make
 * time), or libtorch_cuda's namespaces, the one library no wheel here carries. A call compiled only into a CUDA build,
 * to a function nothing there defines or to a library it does not link, fails at the GPU machine's link and nowhere
 * else: `omp_set_num_threads` once cost a window (bench/gpu/results/h200-2026-11-30-build-failed).
 *
 * Written into build/cuda-build-check/: the units, their objects and dependency files, the libraries' symbols, and
 * check.json last. A unit is compiled again where its object is missing or older than a file it read, and all of them
 * where the plan, the flags or the wheel changed. The set-up runs it; the test runs it again where it is stale.
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
const outDir = path.join(root, 'build', 'cuda-build-check');
const resultFile = path.join(outDir, 'check.json');
const librariesFile = path.join(outDir, 'libraries.txt');

// CMakeLists.txt's tq_core (its GLOB_RECURSE folders) and tq_cli.
const CORE_FOLDERS = ['common', 'model', 'cache', 'batch', 'kernels', 'runner', 'engine', 'vision'].map((f) => path.join('csrc', f));
const CLI_FOLDER = path.join('csrc', 'cli');
// The native checks bench/gpu/window.py builds beside tq_cli (the addon's own sources have no CUDA branch).
const WINDOW_CHECKS = ['cascade_check', 'row_kernels_device_check'];

/** What is compiled: every unit, with its object and dependency file, and each program's own units (the library's are every program's). */
function plan() {
  const { units, alone } = writeCompileUnits([...CORE_FOLDERS, CLI_FOLDER], path.join(outDir, 'units'));
  const checks = WINDOW_CHECKS.map((c) => path.join(root, 'test', 'native', `${c}.cpp`));
  const all = [...units, ...alone.map((f) => path.resolve(root, f)), ...checks].map((file, i) => {
    const members = units.includes(file) ? unitMembers(file) : [path.relative(root, file)];
    const base = path.join(outDir, 'objects', `${path.basename(file)}.${i}`);
    return { file, members, object: `${base}.o`, depfile: `${base}.d` };
  });
  const ownedBy = (prefix) => all.filter((u) => u.members.every((m) => m.startsWith(prefix))).map((u) => u.object);
  const programs = { tq_cli: ownedBy(CLI_FOLDER + path.sep) };
  for (const c of WINDOW_CHECKS) programs[c] = ownedBy(path.join('test', 'native', `${c}.cpp`));
  const programObjects = new Set(Object.values(programs).flat());
  return { units: all, library: all.map((u) => u.object).filter((o) => !programObjects.has(o)), programs, sources: all.flatMap((u) => u.members) };
}

/** A unit's compile to an object at -O0: its symbols are the calls the source makes; code generation is the cost over a syntax check. */
function unitArgs(layout, unit) {
  return ['-include', layout.pch, '-Winvalid-pch', '-Wno-psabi', '-c', '-O0', '-o', unit.object, '-MD', '-MF', unit.depfile, '-MT', 'unit', ...layout.flags, unit.file];
}

/** The files a depfile names. */
function dependencies(depfile) {
  return fs.readFileSync(depfile, 'utf8').replace(/\\\n/g, ' ').replace(/^[^:]*:/, '').trim().split(/\s+/).filter(Boolean).map((f) => path.resolve(root, f));
}

/** What the result was made of: the plan and the flags (the wheel's stamp among them). */
function stampOf(p, layout) {
  return JSON.stringify({ units: p.units.map((u) => [path.relative(root, u.file), u.members]), flags: layout.flags, wheel: layout.wheel ?? null });
}

const mtime = (f) => (fs.existsSync(f) ? fs.statSync(f).mtimeMs : -Infinity);
/** A unit whose object is missing or older than a file it read last time. */
const staleUnit = (unit, read) => !read || mtime(unit.object) < Math.max(...read.map(mtime)) || read.some((f) => !fs.existsSync(f));

/** The last result, where nothing it was made of has changed since: the plan, the flags, and every file a unit read. */
function fresh() {
  const layout = torch2Pch.fresh();
  if (!layout || !fs.existsSync(resultFile) || !fs.existsSync(librariesFile)) return undefined;
  const result = JSON.parse(fs.readFileSync(resultFile, 'utf8'));
  const p = plan();
  if (result.stamp !== stampOf(p, layout)) return undefined;
  return p.units.some((u) => staleUnit(u, result.read[u.object])) ? undefined : checked(p, layout, result.read);
}

/** The plan with the flags, and every file its units read. */
function checked(p, layout, read) {
  return { ...p, flags: layout.flags, dependencies: [...new Set(Object.values(read).flat())].sort() };
}

/** The symbols each library defines for others to link, one a line: `nm -D` of a shared library, `nm` of a static one. */
function definedBy(library) {
  const dynamic = !library.endsWith('.a');
  // An archive's members without symbols are reported on stderr: not this listing's concern.
  const text = execFileSync('nm', [...(dynamic ? ['-D'] : []), '--defined-only', '-P', library], { encoding: 'utf8', maxBuffer: 1 << 28, stdio: ['ignore', 'pipe', 'ignore'] });
  return text.split('\n').filter((l) => / [A-Zuiw] /.test(l)).map((l) => l.split(' ')[0].replace(/@.*/, ''));
}

/**
 * The libraries a CUDA build links that this machine has: the libtorch whose headers the units read (the wheel's CPU
 * libraries, unpacked for the listing only; else Debian's), the CUDA runtime next to the toolkit's headers, and the C
 * and C++ runtimes as g++ links them. Not libtorch_cuda or libc10_cuda (no wheel here has them), nor OpenMP or oneDNN
 * (a CUDA build links neither).
 */
function listLibrarySymbols(layout) {
  const gccFile = (name) => execFileSync('g++', [`-print-file-name=${name}`], { encoding: 'utf8' }).trim();
  const torchLibs = ['libtorch_cpu.so', 'libc10.so', 'libtorch.so'];
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-torch-libs-'));
  try {
    let torch = torchLibs.map(gccFile);
    if (layout.wheel) {
      execFileSync('unzip', ['-q', '-o', layout.wheel, ...torchLibs.map((l) => `torch/lib/${l}`), '-d', scratch]);
      torch = torchLibs.map((l) => path.join(scratch, 'torch', 'lib', l));
    }
    const runtimes = ['libstdc++.so', 'libc.so.6', 'libm.so.6', 'libgcc_s.so.1', 'ld-linux-x86-64.so.2', 'libc_nonshared.a', 'libgcc.a'].map(gccFile);
    const cudart = path.join(torch2Pch.cudaInclude(), '..', 'lib64', 'libcudart.so');
    const symbols = new Set([...torch, ...runtimes, cudart].flatMap(definedBy));
    fs.writeFileSync(librariesFile, [...symbols].sort().join('\n') + '\n');
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
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
 * Compiles the units that are stale (every one where the plan, the flags or the wheel changed; the headers made first
 * where the set-up's are stale) and lists the libraries' symbols where the wheel changed; `run(file, args)` runs a
 * compiler and resolves when it ends (the test's queue). Resolves to what fresh() gives; rejects with the first
 * compiler error.
 */
async function make(run = queued(os.cpus().length)) {
  const layout = torch2Pch.fresh() ?? (await torch2Pch.make(path.join(root, 'build', 'torch2-pch'), run));
  fs.mkdirSync(path.join(outDir, 'objects'), { recursive: true });
  const p = plan();
  const stamp = stampOf(p, layout);
  const last = fs.existsSync(resultFile) ? JSON.parse(fs.readFileSync(resultFile, 'utf8')) : undefined;
  const kept = last?.stamp === stamp ? last.read : {};
  fs.rmSync(resultFile, { force: true });
  await Promise.all(p.units.filter((u) => staleUnit(u, kept[u.object])).map((u) => run('g++', unitArgs(layout, u))));
  if (last?.wheel !== (layout.wheel ?? null) || !fs.existsSync(librariesFile)) listLibrarySymbols(layout);
  const read = Object.fromEntries(p.units.map((u) => [u.object, dependencies(u.depfile)]));
  fs.writeFileSync(resultFile, JSON.stringify({ stamp, wheel: layout.wheel ?? null, read }));
  return checked(p, layout, read);
}

/** An object's global symbols: those it defines and those it leaves undefined (weak references need no definition). Read once per object as it is. */
const symbolsRead = new Map();
function symbolsOf(object) {
  const key = `${object}@${mtime(object)}`;
  if (symbolsRead.has(key)) return symbolsRead.get(key);
  const defined = [], undefinedHere = [];
  for (const line of execFileSync('nm', ['-P', object], { encoding: 'utf8', maxBuffer: 1 << 26 }).split('\n')) {
    const [name, type] = line.split(' ');
    if (type === 'U') undefinedHere.push(name);
    else if (/^[A-TV-Zui]$/.test(type ?? '')) defined.push(name);
  }
  symbolsRead.set(key, { defined, undefinedHere });
  return symbolsRead.get(key);
}

// Made by the linker itself (the GOT, crtbegin's handle for static destructors).
const LINKER_MADE = new Set(['_GLOBAL_OFFSET_TABLE_', '__dso_handle']);

/**
 * The symbols a program's objects (with the library's and `extra`: the CUDA kernels', a probe's) leave undefined that
 * no object and no listed library defines, demangled: what the GPU machine's link must find in libtorch_cuda or fail.
 */
function unresolved(check, program, extra = []) {
  const libraries = new Set(fs.readFileSync(librariesFile, 'utf8').split('\n'));
  const defined = new Set(), wanted = new Set();
  for (const object of [...check.library, ...check.programs[program], ...extra]) {
    const s = symbolsOf(object);
    s.defined.forEach((name) => defined.add(name));
    s.undefinedHere.forEach((name) => wanted.add(name));
  }
  const missing = [...wanted].filter((name) => !defined.has(name) && !libraries.has(name) && !LINKER_MADE.has(name)).sort();
  return missing.length ? execFileSync('c++filt', { input: missing.join('\n'), encoding: 'utf8' }).trim().split('\n') : [];
}

module.exports = { fresh, make, queued, unresolved };

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
