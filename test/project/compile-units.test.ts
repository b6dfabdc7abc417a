/**
 * The translation units the builds compile (scripts/compile_units.py): a folder's sources together, except where
 * code is compiled for chosen instruction sets, whose arithmetic could then change with what is compiled beside it.
 * The answers themselves are held by the golden answers at every kernel level (engine/golden.test.ts).
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { compileUnitsScript, unitMembers, withCompileUnits } from '../helpers/compile-units';
import { csrc, filesUnder, firstReaching } from '../helpers/source-tree';

const root = path.resolve(__dirname, '..', '..');
/** The sources the script compiles file by file (its FILE_BY_FILE, relative to csrc/), read from it. */
const fileByFile = new Set(Array.from(/^FILE_BY_FILE = \{([^}]*)\}/m.exec(fs.readFileSync(compileUnitsScript, 'utf8'))![1].matchAll(/'([^']+)'/g), (m) => m[1]));

/** Every .cpp under csrc/, relative to the root. */
const cppSources = () => filesUnder(csrc, /\.cpp$/).map((f) => path.relative(root, f));

const CHOOSES_ISA = /__attribute__\s*\(\(\s*target\s*\(|#\s*pragma\s+GCC\s+target/;

/** The first file (the source, or a project header it reaches) that compiles code for a chosen instruction set, or null. */
function isaCodeIn(file: string): string | null {
  const found = firstReaching(path.join(root, file), CHOOSES_ISA);
  return found && path.relative(root, found);
}

test('every source is compiled once: in its folder\'s unit, or alone', () => {
  withCompileUnits(['csrc'], (units, alone) => {
    expect(units.length).toBeGreaterThan(8);
    expect([...units.flatMap(unitMembers), ...alone].sort()).toEqual(cppSources().sort());
    for (const unit of units) expect(new Set(unitMembers(unit).map((m) => path.dirname(m))).size).toBe(1);
    expect(units.flatMap(unitMembers).filter((m) => fileByFile.has(path.relative('csrc', m)))).toEqual([]);
  });
});

test('no source compiled in a unit reaches code for a chosen instruction set (those compile file by file)', () => {
  expect([...fileByFile].filter((f) => !fs.existsSync(path.join(root, 'csrc', f)))).toEqual([]);
  const inUnits = cppSources().filter((f) => !fileByFile.has(path.relative('csrc', f)));
  expect(inUnits).toContain('csrc/engine/engine.cpp');
  const offending = inUnits.map((f) => [f, isaCodeIn(f)]).filter(([, isa]) => isa !== null);
  expect(offending).toEqual([]);
  // The check sees such code where it is.
  expect(isaCodeIn('csrc/kernels/cpu/gemm/gemm_vnni.cpp')).toBe('csrc/kernels/cpu/gemm/gemm_vnni.cpp');
});

test('a unit keeps each source\'s pragmas and macros to itself, and is not written again unchanged', () => {
  withCompileUnits(['csrc/kernels/fused', 'csrc/common'], ([unit], alone, out) => {
    const text = fs.readFileSync(unit, 'utf8');
    // fused_layer_kernels.cpp defines TQ_ROWS; csrc/common/ has one source, compiled as it is.
    expect(text).toMatch(/#pragma GCC push_options\n#include "[^"]*fused_layer_kernels\.cpp"\n#pragma GCC pop_options\n#undef TQ_ROWS\n/);
    expect(alone).toEqual(['csrc/common/fixed_math.cpp']);
    const minuteAgo = new Date(Math.floor(Date.now() / 1000) * 1000 - 60_000);
    fs.utimesSync(unit, minuteAgo, minuteAgo);
    execFileSync('python3', [compileUnitsScript, '--out', out, 'csrc/kernels/fused'], { cwd: root });
    expect(fs.statSync(unit).mtimeMs).toBe(minuteAgo.getTime());
  });
});
