/**
 * Imports point down (docs/architecture.md, "Layers"): a module of src/ may import its own folder
 * and the folders of lower layers, never a higher one nor another folder of its own layer. Inside
 * src/server/ the rooms are ordered the same way. The engine's C++ (csrc/) likewise, by its
 * #includes, where kernels/ is entered only at its entry points. Read from the sources, so a new
 * import or include that points up fails here with its file and line; so does a circle of files
 * importing each other within a folder.
 */
import * as fs from 'fs';
import * as path from 'path';

const src = path.resolve(__dirname, '..', '..', 'src');

/** Lowest first (types/: declarations for untyped packages). Folders on one line are peers: neither imports the other. */
export const LAYERS: string[][] = [
  ['types', 'common'],
  ['testmodels'],
  ['engine', 'tokenizer'],
  ['rendering'],
  ['config'],
  ['wire'],
  ['images'],
  ['answering'],
  ['tasks'],
  ['server', 'cli'],
  ['index.ts', 'tqserve.ts'],
];

/** The rooms of src/server/, lowest first; its files outside them (app.ts, main.ts, start-engines.ts, load-service.ts) are above them all. */
export const SERVER_ROOMS = ['engine-process', 'http', 'ops', 'service', 'routes', 'playground'];

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sourceFiles(p) : e.name.endsWith('.ts') ? [p] : [];
  });
}

/** [layer rank, room rank] of a file under src/. */
function place(file: string): { folder: string; rank: number; room: number } {
  const [top, sub] = path.relative(src, file).split(path.sep);
  const rank = LAYERS.findIndex((layer) => layer.includes(top));
  if (rank < 0) throw new Error(`${path.relative(src, file)}: src/${top} is in no layer of test/project/layers.test.ts`);
  const room = top === 'server' ? (SERVER_ROOMS.includes(sub) ? SERVER_ROOMS.indexOf(sub) : SERVER_ROOMS.length) : 0;
  return { folder: top, rank, room };
}

/** Every relative import of `file` that points up a layer (or across to a peer), as "file:line -> target". */
export function upwardImports(file: string, text: string): string[] {
  const from = place(file);
  const found: string[] = [];
  text.split('\n').forEach((line, i) => {
    for (const m of line.matchAll(/(?:from|import|require)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)) {
      const target = path.resolve(path.dirname(file), m[1]);
      if (path.relative(src, target).startsWith('..')) continue; // ../package.json: outside the layers
      const to = place(fs.existsSync(target) && fs.statSync(target).isDirectory() ? path.join(target, 'index.ts') : `${target}.ts`);
      const up = from.folder === to.folder ? to.room > from.room : to.rank >= from.rank;
      if (up) found.push(`${path.relative(src, file)}:${i + 1} -> ${path.relative(src, target)}`);
    }
  });
  return found;
}

test('every import in src/ points down a layer', () => {
  expect(sourceFiles(src).flatMap((f) => upwardImports(f, fs.readFileSync(f, 'utf8')))).toEqual([]);
});

test('the check sees an import up a layer, across to a peer, and up a room of the server', () => {
  const at = (rel: string) => path.join(src, rel);
  expect(upwardImports(at('images/collect.ts'), "import { serve } from '../server/main';")).toEqual(['images/collect.ts:1 -> server/main']);
  expect(upwardImports(at('engine/engine.ts'), "import { Tokenizer } from '../tokenizer/tokenizer';")).toHaveLength(1);
  expect(upwardImports(at('server/http/body.ts'), "import { Logger } from '../ops/logger';")).toHaveLength(1);
  expect(upwardImports(at('server/routes/answer.ts'), "import { Logger } from '../ops/logger';\nimport { x } from '../../rendering/renderer';")).toEqual([]);
});

/** The src/ files `text` imports (relative imports, `import type` included), as paths. */
function importedFiles(file: string, text: string): string[] {
  return [...text.matchAll(/(?:from|import|require)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)]
    .map((m) => path.resolve(path.dirname(file), m[1]))
    .map((t) => (fs.existsSync(t) && fs.statSync(t).isDirectory() ? path.join(t, 'index.ts') : `${t}.ts`))
    .filter((t) => fs.existsSync(t));
}

/** Every circle of imports among files (a file importing, through others, itself), each listed once from its first file in sorted order. */
export function fileCircles(graph: Map<string, string[]>): string[][] {
  const circles: string[][] = [];
  const done = new Set<string>();
  const walk = (file: string, trail: string[]) => {
    const at = trail.indexOf(file);
    if (at >= 0) {
      const circle = trail.slice(at);
      if (circle[0] === [...circle].sort()[0]) circles.push(circle);
      return;
    }
    if (done.has(file)) return;
    for (const next of graph.get(file) ?? []) walk(next, [...trail, file]);
  };
  for (const file of [...graph.keys()].sort()) {
    walk(file, []);
    done.add(file);
  }
  return circles;
}

test('no file of src/ imports itself through others', () => {
  const graph = new Map(sourceFiles(src).map((f) => [path.relative(src, f), importedFiles(f, fs.readFileSync(f, 'utf8')).map((t) => path.relative(src, t))]));
  expect(fileCircles(graph)).toEqual([]);
});

test('the circle check sees a circle of two files and one of three, and passes a chain', () => {
  const graph = (edges: [string, string][]) => {
    const g = new Map<string, string[]>();
    for (const [a, b] of edges) g.set(a, [...(g.get(a) ?? []), b]);
    return g;
  };
  expect(fileCircles(graph([['fit/fit-task.ts', 'fit/part-reasons.ts'], ['fit/part-reasons.ts', 'fit/fit-task.ts']]))).toEqual([['fit/fit-task.ts', 'fit/part-reasons.ts']]);
  expect(fileCircles(graph([['a', 'b'], ['b', 'c'], ['c', 'a'], ['c', 'd']]))).toEqual([['a', 'b', 'c']]);
  expect(fileCircles(graph([['a', 'b'], ['b', 'c'], ['a', 'c']]))).toEqual([]);
});

const csrc = path.resolve(__dirname, '..', '..', 'csrc');

/** csrc/ folders, lowest first (docs/architecture.md, "Layers"); folders on one line are peers. */
export const NATIVE_LAYERS: string[][] = [['common'], ['batch'], ['kernels'], ['cache'], ['model'], ['vision'], ['runner'], ['engine'], ['addon', 'cli', 'host_addon']];

/**
 * The kernel headers other folders may include: the interface the transformer is written in, the
 * weights' quantization modes, the stack the engine builds (kernels/kernel_stack.h: which
 * implementation runs, and the CPU kernels' levels and abilities), and the readout's arithmetic and
 * CUDA kernel (with the launch check every CUDA launch goes through), and the upload of host arrays that
 * does not wait for the device (the runner's step inputs, the readout's). The rest of kernels/ is the
 * implementations' own, and cli/'s microbenchmarks'.
 */
export const KERNEL_ENTRY_POINTS = [
  'kernels/layer_kernels.h',
  'kernels/host_upload.h',
  'kernels/quantization.h',
  'kernels/kernel_stack.h',
  'kernels/math/label_readout_math.h',
  'kernels/cuda/label_readout.h',
  'kernels/cuda/launch_check.h',
];

function nativeFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? nativeFiles(p) : /\.(h|cpp|cu|cuh)$/.test(e.name) ? [p] : [];
  });
}

/** Every #include of `file` (under csrc/) that points up a layer, across to a peer, or into a kernel implementation, as "file:line -> header". */
export function upwardIncludes(file: string, text: string): string[] {
  const rel = path.relative(csrc, file);
  const from = rel.split(path.sep)[0];
  const rank = (folder: string) => NATIVE_LAYERS.findIndex((layer) => layer.includes(folder));
  if (rank(from) < 0) throw new Error(`${rel}: csrc/${from} is in no layer of test/project/layers.test.ts`);
  const found: string[] = [];
  text.split('\n').forEach((line, i) => {
    const m = /^\s*#\s*include\s+"([^"]+)"/.exec(line);
    if (!m || !m[1].includes('/')) return;  // a header beside the file, or a library's
    const to = m[1].split('/')[0];
    if (rank(to) < 0) return;
    const up = to === from ? false : rank(to) >= rank(from);
    const intoKernels = to === 'kernels' && from !== 'kernels' && from !== 'cli' && !KERNEL_ENTRY_POINTS.includes(m[1]);
    if (up || intoKernels) found.push(`${rel}:${i + 1} -> ${m[1]}`);
  });
  return found;
}

test('every #include in csrc/ points down a layer, and into kernels/ only at an entry point', () => {
  expect(nativeFiles(csrc).flatMap((f) => upwardIncludes(f, fs.readFileSync(f, 'utf8')))).toEqual([]);
});

test('the check sees an include up a layer, across to a peer, and into a kernel implementation', () => {
  const at = (rel: string) => path.join(csrc, rel);
  expect(upwardIncludes(at('batch/step_plan.h'), '#include "vision/image_prompt.h"')).toEqual(['batch/step_plan.h:1 -> vision/image_prompt.h']);
  expect(upwardIncludes(at('addon/addon.cpp'), '#include "cli/microbench.h"')).toHaveLength(1);
  expect(upwardIncludes(at('engine/engine.cpp'), '#include "kernels/cpu/attention/attention.h"')).toHaveLength(1);
  expect(upwardIncludes(at('engine/engine.cpp'), '#include "kernels/cpu/cpu_layer_kernels.h"')).toHaveLength(1);
  expect(upwardIncludes(at('engine/engine.cpp'), '#include "kernels/kernel_stack.h"\n#include "model/transformer.h"\n#include <ATen/ATen.h>')).toEqual([]);
  expect(upwardIncludes(at('cli/microbench.cpp'), '#include "kernels/cpu/gemm/packed_linear.h"')).toEqual([]);
});

/**
 * kernels/cpu/ is in rooms (docs/architecture.md, "Layout"): attention/, gemm/ (int8 and AMX among
 * them) and rows/ (the row-wise kernels); at its root only the entry points the stack is built from,
 * the level they run at, and the bf16 rounding every room shares. The host/device arithmetic headers
 * live in kernels/math/.
 */
test('kernels/cpu/ holds its rooms and its entry points only, and kernels/ no loose arithmetic header', () => {
  const cpu = path.join(csrc, 'kernels', 'cpu');
  const rootFiles = fs.readdirSync(cpu, { withFileTypes: true }).filter((e) => e.isFile()).map((e) => e.name.replace(/\.(h|cpp)$/, ''));
  expect([...new Set(rootFiles)].sort()).toEqual(['bf16', 'cpu_layer_kernels', 'isa', 'level_choice']);
  const rooms = fs.readdirSync(cpu, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
  expect(rooms.sort()).toEqual(['attention', 'gemm', 'rows']);
  expect(fs.readdirSync(path.join(csrc, 'kernels')).filter((n) => /_math\.h$|_args\.h$/.test(n))).toEqual([]);
});

test('no file of csrc/engine/ (the façade) or csrc/runner/ (what prepares and runs steps) is over 250 lines', () => {
  const long = ['engine', 'runner'].flatMap((room) => nativeFiles(path.join(csrc, room)))
    .map((f) => [path.relative(csrc, f), fs.readFileSync(f, 'utf8').split('\n').length - 1] as const)
    .filter(([, lines]) => lines > 250);
  expect(long).toEqual([]);
});

/**
 * test/ mirrors the code (docs/testing.md, "Where the tests live"): each test sits in a folder named
 * after the src/ or csrc/ folder whose behaviour it checks (test/server/, test/engine/, test/kernels/,
 * ...), or in test/project/ for checks of the repository itself; none at test/'s top.
 */
test('every test file sits in a folder named after a folder of src/ or csrc/, or in test/project/', () => {
  const tests = path.resolve(__dirname, '..');
  const codeFolders = new Set([...fs.readdirSync(src), ...fs.readdirSync(csrc), 'project']);
  const misplaced = fs
    .readdirSync(tests, { recursive: true, encoding: 'utf8' })
    .filter((rel) => rel.endsWith('.test.ts'))
    .filter((rel) => !rel.includes(path.sep) || !codeFolders.has(rel.split(path.sep)[0]));
  expect(misplaced).toEqual([]);
});
