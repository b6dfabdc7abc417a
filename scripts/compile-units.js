/**
 * scripts/compile_units.py from Node: the units it writes, and what each includes. The CUDA build's check
 * (scripts/cuda-build-check.js) and the tests (test/helpers/compile-units.ts) read the units through these.
 */
const { execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..');
const compileUnitsScript = path.join(root, 'scripts', 'compile_units.py');

/** The sources a unit includes, relative to the root. */
function unitMembers(unit) {
  return Array.from(fs.readFileSync(unit, 'utf8').matchAll(/^#include "([^"]+)"$/gm), (m) => path.relative(root, path.resolve(path.dirname(unit), m[1])));
}

/** Runs the script on `args` (sources and folders), its units written under `out`: the units, and the sources compiled alone. */
function writeCompileUnits(args, out) {
  const printed = execFileSync('python3', [compileUnitsScript, '--out', out, ...args], { cwd: root, encoding: 'utf8' }).trim().split('\n');
  return { units: printed.filter((p) => p.startsWith(out)), alone: printed.filter((p) => !p.startsWith(out)) };
}

module.exports = { compileUnitsScript, unitMembers, writeCompileUnits };
