#!/usr/bin/env node
/**
 * The node-gyp build of binding.gyp (the documented alternative build), made once at set-up into build-gyp/ (a copy of
 * binding.gyp, package.json, scripts/compile_units.py and csrc/), stamped with a hash of those sources.
 * test/project/binding-gyp.test.ts uses it while the sources are unchanged, and otherwise builds again in the background
 * (test/helpers/gyp-build.ts).
 *
 * node-gyp configures and builds as a user's `node-gyp rebuild` does, with one addition: the engine's sources are
 * compiled against ATen's header precompiled once with node-gyp's own flags for them (read from the Makefile it
 * generated), as CMakeLists.txt does; a header the compiler cannot use is an error (-Werror=invalid-pch), not a silent
 * return to the slow build. bench/README.md, "Set-up and suite time", has the times.
 *
 *   node scripts/gyp-build.js                (scripts/setup.sh runs it: into build-gyp/)
 *   node scripts/gyp-build.js --staged DIR   (a folder stage() filled: builds there)
 */
const { execFileSync, spawnSync } = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');

const root = path.resolve(__dirname, '..');
const prebuiltDir = path.join(root, 'build-gyp');

/** binding.gyp's sources are the translation units this writes as gyp reads the file. */
const unitsScript = path.join(root, 'scripts', 'compile_units.py');

/** What a node-gyp build reads of the tree, and how this script builds it: binding.gyp, package.json, this file, scripts/compile_units.py and every file under csrc/, hashed in path order. */
function sourceHash() {
  const files = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else files.push(p);
    }
  };
  walk(path.join(root, 'csrc'));
  files.sort();
  const hash = crypto.createHash('sha256');
  for (const f of [path.join(root, 'binding.gyp'), path.join(root, 'package.json'), __filename, unitsScript, ...files]) {
    hash.update(path.relative(root, f));
    hash.update(fs.readFileSync(f));
  }
  return hash.digest('hex');
}

/** Copies what node-gyp needs into `dir` (emptied first). */
function stage(dir) {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  for (const f of ['binding.gyp', 'package.json']) fs.copyFileSync(path.join(root, f), path.join(dir, f));
  fs.cpSync(path.join(root, 'csrc'), path.join(dir, 'csrc'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'scripts'));
  fs.copyFileSync(unitsScript, path.join(dir, 'scripts', path.basename(unitsScript)));
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'));
}

/**
 * node-gyp, run in a staged folder. What it and the compilers say (stderr: node-gyp's flags include -Wall -Wextra) goes
 * to the terminal, and into compile.log there, which test/project/binding-gyp.test.ts holds free of warnings: a
 * newcomer's set-up prints none.
 */
function nodeGyp(dir, args) {
  const gyp = require.resolve('node-gyp/bin/node-gyp.js', { paths: [root] });
  const run = spawnSync(process.execPath, [gyp, ...args, '--nodedir=/usr'], { cwd: dir, stdio: ['ignore', 'inherit', 'pipe'], maxBuffer: 1 << 28 });
  if (run.stderr) {
    fs.appendFileSync(path.join(dir, 'compile.log'), run.stderr);
    process.stderr.write(run.stderr);
  }
  if (run.error) throw run.error;
  if (run.status !== 0) throw new Error(`node-gyp ${args.join(' ')} exited with ${run.status}`);
}

/** A variable of the Makefile node-gyp wrote for a target (`NAME := \` then one value a line), as arguments. */
function makeVariable(makefile, name) {
  const lines = makefile.split('\n');
  const start = lines.findIndex((l) => l.startsWith(`${name} :=`));
  if (start < 0) throw new Error(`node-gyp's Makefile has no ${name}`);
  const values = [];
  for (let i = start + 1; i < lines.length && lines[i].startsWith('\t'); i++) values.push(lines[i].trim().replace(/ \\$/, '').replace(/^'(.*)'$/, '$1'));
  return values;
}

/** ATen's header compiled as the engine's sources will be (run from build/, where $(srcdir) is ..); the header to -include. */
function precompileAten(dir) {
  const build = path.join(dir, 'build');
  const makefile = fs.readFileSync(path.join(build, 'tqserve_engine.target.mk'), 'utf8');
  const flags = ['DEFS_Release', 'INCS_Release', 'CFLAGS_Release', 'CFLAGS_CC_Release'].flatMap((v) => makeVariable(makefile, v)).map((f) => f.replace('$(srcdir)', '..'));
  const header = path.join(build, 'pch', 'ATen.h');
  fs.mkdirSync(path.dirname(header), { recursive: true });
  fs.writeFileSync(header, '#include <ATen/ATen.h>\n');
  execFileSync(process.env.CXX || 'g++', [...flags, '-x', 'c++-header', header, '-o', `${header}.gch`], { cwd: build, stdio: 'inherit' });
  return header;
}

/**
 * Gives ATen's precompiled header to the engine's sources that reach torch, as CMakeLists.txt does: one line per object
 * appended to the target's Makefile (a target-specific addition to its compile flags). A source that never includes
 * torch (scripts/torch_free_sources.py) would only pay for loading the header.
 */
function includeAtenWhereUsed(dir, header) {
  const makefile = path.join(dir, 'build', 'tqserve_engine.target.mk');
  const objects = makeVariable(fs.readFileSync(makefile, 'utf8'), 'OBJS');
  const sources = objects.map((o) => o.replace(/^\$\(obj\)\.target\/\$\(TARGET\)\//, '').replace(/\.o$/, '.cpp'));
  const free = new Set(execFileSync('python3', [path.join(root, 'scripts', 'torch_free_sources.py'), ...sources], { cwd: dir, encoding: 'utf8' })
    .split('\n').filter(Boolean));
  const lines = objects.filter((o, i) => !free.has(sources[i])).map((o) => `${o}: GYP_CXXFLAGS += -include ${header} -Werror=invalid-pch`);
  fs.appendFileSync(makefile, `\n# scripts/gyp-build.js: ATen's precompiled header for the sources that reach torch\n${lines.join('\n')}\n`);
}

/** The whole build in a staged folder: configure, ATen's header, the engine's addon with it where used, the server's without. */
function buildStaged(dir) {
  const jobs = ['--jobs', String(os.cpus().length)];
  nodeGyp(dir, ['configure']);
  includeAtenWhereUsed(dir, precompileAten(dir));
  nodeGyp(dir, ['build', 'tqserve_engine', ...jobs]);
  nodeGyp(dir, ['build', 'tqserve_host', ...jobs]);
}

/** The command that builds a staged folder (the background build's). */
function gypCommand(dir) {
  return [process.execPath, __filename, '--staged', dir];
}

/** The prebuilt addon's folder if its stamp matches the sources as they are now, else null. */
function freshPrebuilt() {
  const stamp = path.join(prebuiltDir, 'sources.sha256');
  if (!fs.existsSync(stamp) || !fs.existsSync(path.join(prebuiltDir, 'status'))) return null;
  return fs.readFileSync(stamp, 'utf8').trim() === sourceHash() ? prebuiltDir : null;
}

module.exports = { prebuiltDir, sourceHash, stage, gypCommand, freshPrebuilt };

if (require.main === module) {
  if (process.argv[2] === '--staged') {
    buildStaged(path.resolve(process.argv[3]));
  } else {
    const hash = sourceHash();
    stage(prebuiltDir);
    buildStaged(prebuiltDir);
    fs.writeFileSync(path.join(prebuiltDir, 'status'), '0');
    fs.writeFileSync(path.join(prebuiltDir, 'sources.sha256'), hash);
  }
}
