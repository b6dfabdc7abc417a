/** scripts/compile_units.py, run into a scratch folder: what the builds compile, unit by unit and source by source. */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

// eslint-disable-next-line @typescript-eslint/no-var-requires
const units = require(path.join(__dirname, '..', '..', 'scripts', 'compile-units.js')) as {
  compileUnitsScript: string;
  /** The sources a unit includes, relative to the root. */
  unitMembers(unit: string): string[];
  /** Runs the script on `args` (sources and folders, relative to the root), its units written under `out`: the units, and the sources compiled alone. */
  writeCompileUnits(args: string[], out: string): { units: string[]; alone: string[] };
};
export const { compileUnitsScript, unitMembers, writeCompileUnits } = units;

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
