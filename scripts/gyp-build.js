#!/usr/bin/env node
/**
 * The node-gyp build of binding.gyp (the documented alternative build), made once at set-up into build-gyp/ (a copy of
 * binding.gyp, package.json and csrc/), stamped with a hash of those sources. test/project/binding-gyp.test.ts uses it
 * while the sources are unchanged, and otherwise builds again in the background (test/helpers/gyp-build.ts): a build
 * of every engine source at -O3 (two to three minutes on 2 cores) belongs to the set-up, not to the suite's time.
 *
 *   node scripts/gyp-build.js      (scripts/setup.sh runs it)
 */
const { execFileSync } = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');

const root = path.resolve(__dirname, '..');
const prebuiltDir = path.join(root, 'build-gyp');

/** What a node-gyp build reads of the tree: binding.gyp, package.json and every file under csrc/, hashed in path order. */
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
  for (const f of [path.join(root, 'binding.gyp'), path.join(root, 'package.json'), ...files]) {
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
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'));
}

/** The node-gyp command line, run in a staged folder. */
function gypCommand() {
  return [process.execPath, require.resolve('node-gyp/bin/node-gyp.js', { paths: [root] }), 'rebuild', '--nodedir=/usr', '-j', String(os.cpus().length)];
}

/** The prebuilt addon's folder if its stamp matches the sources as they are now, else null. */
function freshPrebuilt() {
  const stamp = path.join(prebuiltDir, 'sources.sha256');
  if (!fs.existsSync(stamp) || !fs.existsSync(path.join(prebuiltDir, 'status'))) return null;
  return fs.readFileSync(stamp, 'utf8').trim() === sourceHash() ? prebuiltDir : null;
}

module.exports = { prebuiltDir, sourceHash, stage, gypCommand, freshPrebuilt };

if (require.main === module) {
  const hash = sourceHash();
  stage(prebuiltDir);
  const [node, ...args] = gypCommand();
  execFileSync(node, args, { cwd: prebuiltDir, stdio: 'inherit' });
  fs.writeFileSync(path.join(prebuiltDir, 'status'), '0');
  fs.writeFileSync(path.join(prebuiltDir, 'sources.sha256'), hash);
}
