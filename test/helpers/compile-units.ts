/** scripts/compile_units.py, run into a scratch folder: what the builds compile, unit by unit and source by source. */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const root = path.resolve(__dirname, '..', '..');
export const compileUnitsScript = path.join(root, 'scripts', 'compile_units.py');

/** The sources a unit includes, relative to the root. */
export function unitMembers(unit: string): string[] {
  return Array.from(fs.readFileSync(unit, 'utf8').matchAll(/^#include "([^"]+)"$/gm), (m) => path.relative(root, path.resolve(path.dirname(unit), m[1])));
}

/** Runs the script on `args` (sources and folders, relative to the root), its units written under `out`: the units, and the sources compiled alone. */
export function writeCompileUnits(args: string[], out: string): { units: string[]; alone: string[] } {
  const printed = execFileSync('python3', [compileUnitsScript, '--out', out, ...args], { cwd: root, encoding: 'utf8' }).trim().split('\n');
  return { units: printed.filter((p) => p.startsWith(out)), alone: printed.filter((p) => !p.startsWith(out)) };
}

/** writeCompileUnits into a scratch folder `out`; `inspect` gets the units written and the sources compiled alone. The folder is removed after. */
export function withCompileUnits<T>(args: string[], inspect: (units: string[], alone: string[], out: string) => T): T {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-units-'));
  try {
    const { units, alone } = writeCompileUnits(args, out);
    return inspect(units, alone, out);
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
}
