/**
 * The build files name only what exists, and the GPU machine's CMake build (no oneDNN library, while a CUDA torch's
 * include folder carries oneDNN headers of another major version) configures and compiles here. A file moved without
 * its build line once broke every GPU build while CI stayed green: these checks fail first.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { unitMembers } from '../helpers/compile-units';

const root = path.resolve(__dirname, '..', '..');
const cmakeLists = fs.readFileSync(path.join(root, 'CMakeLists.txt'), 'utf8');

// Paths under a variable CMake computes as it configures (node-addon-api's folder, asked of node): not checked here.
const computedAtConfigure = new Set(['NODE_ADDON_API_DIR']);

/** Every path CMakeLists.txt names under ${CMAKE_SOURCE_DIR}, a foreach's ${var} expanded over its list (a list set() names, too). */
function cmakePaths(): string[] {
  const lists = new Map<string, string[]>();
  for (const m of cmakeLists.matchAll(/^set\((\w+)\s+([^)$]*)\)/gm)) lists.set(m[1], m[2].trim().split(/\s+/));
  const loops = new Map<string, string[]>();
  for (const m of cmakeLists.matchAll(/foreach\((\w+)\s+([^)]*)\)/g))
    loops.set(m[1], m[2].trim().split(/\s+/).flatMap((v) => lists.get(/^\$\{(\w+)\}$/.exec(v)?.[1] ?? '') ?? [v]));
  return Array.from(cmakeLists.matchAll(/\$\{CMAKE_SOURCE_DIR\}\/([^\s)]+)/g), (m) => m[1]).flatMap((named) => {
    const variable = /\$\{(\w+)\}/.exec(named);
    if (!variable) return [named];
    if (computedAtConfigure.has(variable[1])) return [];
    const values = loops.get(variable[1]);
    if (!values) throw new Error(`CMakeLists.txt names ${named}, whose \${${variable[1]}} this check cannot expand`);
    return values.map((v) => named.replace(variable[0], v));
  });
}

test('every path CMakeLists.txt names exists, and each glob matches files', () => {
  const named = cmakePaths();
  expect(named).toEqual(expect.arrayContaining(['csrc/cli/main.cpp', 'test/native/gemm_check.cpp', 'csrc/kernels/*.cpp']));
  const missing = named.filter((p) => {
    if (!p.includes('*')) return !fs.existsSync(path.join(root, p));
    const dir = path.join(root, path.dirname(p));
    const suffix = path.basename(p).replace('*', '');
    return !fs.existsSync(dir) || !fs.readdirSync(dir).some((f) => f.endsWith(suffix));
  });
  expect(missing).toEqual([]);
});

test('every source and folder binding.gyp names exists', () => {
  const gyp = fs.readFileSync(path.join(root, 'binding.gyp'), 'utf8');
  const named = Array.from(gyp.matchAll(/(?<![\w/])((?:csrc|scripts)\/[\w./-]*\w)/g), (m) => m[1]);
  expect(named).toEqual(expect.arrayContaining(['scripts/compile_units.py', 'csrc/engine', 'csrc/host_addon/module.cpp']));
  expect(named.filter((p) => !fs.existsSync(path.join(root, p)))).toEqual([]);
});

/** What CMake adds to a command for the precompiled header (CMakeLists.txt's target_precompile_headers). */
const PCH_INCLUDE = /\s-Winvalid-pch\s+-include\s+\S+cmake_pch\.hxx/;

/** One compile command of compile_commands.json. */
interface CompileCommand { file: string; command: string; directory: string }

test('the CMake build configures and compiles with oneDNN off (-DTQ_WITH_ONEDNN=OFF), as the GPU machine builds it', () => {
  const build = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-cmake-no-onednn-'));
  try {
    // The flags bench/gpu/window.py gives a CUDA build, less CUDA (no CUDA libtorch here) and its generator (either);
    // and, as a CUDA build has it, no lean copy of libtorch_cpu (docs/build.md, "A lean libtorch_cpu"): the flag that
    // leaves it out is honoured.
    // In units, as every build compiles (CMakeLists.txt, scripts/compile_units.py).
    execFileSync('cmake', ['-S', root, '-B', build, '-DTQ_WITH_ONEDNN=OFF', '-DTQ_LEAN_TORCH=OFF', '-DCMAKE_BUILD_TYPE=Release', '-DCMAKE_EXPORT_COMPILE_COMMANDS=ON'],
      { stdio: 'pipe' });
    expect(fs.existsSync(path.join(build, 'lean-torch'))).toBe(false);
    const commands = JSON.parse(fs.readFileSync(path.join(build, 'compile_commands.json'), 'utf8')) as CompileCommand[];
    const compiled = (c: CompileCommand) => (c.file.startsWith(build) ? path.relative(build, c.file) : path.relative(root, c.file));
    const gemmUnit = path.join('units', 'kernels_cpu_gemm.cpp');
    expect(commands.map(compiled)).toEqual(expect.arrayContaining([gemmUnit, path.join('units', 'engine.cpp'), 'csrc/kernels/cpu/gemm/gemm_vnni.cpp']));
    expect(unitMembers(path.join(build, gemmUnit))).toContain('csrc/kernels/cpu/gemm/onednn.cpp');
    // ATen's precompiled header for the sources that reach torch; not for those that never do (a GEMM tile, a kernel
    // check: scripts/torch_free_sources.py), which would only pay for loading it.
    const usesPch = (file: string) => PCH_INCLUDE.test(commands.find((c) => compiled(c) === file)!.command);
    expect([path.join('units', 'engine.cpp'), 'csrc/kernels/cpu/gemm/gemm_vnni.cpp', 'test/native/gemm_check.cpp', 'test/native/cascade_check.cpp'].map(usesPch))
      .toEqual([true, false, false, true]);
    for (const c of commands) {
      expect(c.command).toContain('-DTQ_ONEDNN=0');
      expect(c.command).not.toMatch(/-ldnnl|libdnnl/);
    }
    // The file of oneDNN's calls, compiled alone by its unit's command: to nothing that names oneDNN (its whole body is
    // under TQ_ONEDNN, so no source list has to leave it out). The other sources with oneDNN branches are compiled with
    // TQ_ONEDNN=0 against a CUDA build's headers by kernels/cuda.test.ts. Less the precompiled ATen header, which only
    // this build would make and use (it is not made yet; read as text it would add seconds and nothing to the check).
    const unit = commands.find((c) => compiled(c) === gemmUnit)!;
    expect(unit.command).toMatch(PCH_INCLUDE);
    const command = unit.command.replace(PCH_INCLUDE, '').replace(unit.file, path.join(root, 'csrc', 'kernels', 'cpu', 'gemm', 'onednn.cpp'));
    const object = path.resolve(unit.directory, /\s-o\s+(\S+)/.exec(command)![1]);
    fs.mkdirSync(path.dirname(object), { recursive: true });
    execFileSync('sh', ['-c', command], { cwd: unit.directory, stdio: 'pipe' });
    const undefinedSymbols = execFileSync('nm', ['-C', '--undefined-only', object], { encoding: 'utf8' });
    expect(undefinedSymbols).not.toMatch(/dnnl/);
  } finally {
    fs.rmSync(build, { recursive: true, force: true });
  }
}, 300_000);
