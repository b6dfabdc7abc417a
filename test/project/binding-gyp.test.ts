/**
 * binding.gyp is the documented alternative build: it must build the same
 * addon with node-gyp (in a scratch copy, so the cmake-js build is untouched,
 * and in the background while the other suites run: helpers/gyp-build.ts),
 * and that addon must answer exactly like the cmake-js one.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { Engine } from '../../src/engine/engine';
import { NativeEngine } from '../../src/engine/native';
import { unitMembers, withCompileUnits } from '../helpers/compile-units';
import { csrc, filesUnder } from '../helpers/source-tree';
import { finishedGypBuild, GYP_BUILD_ENV, removeGypBuild, startGypBuild } from '../helpers/gyp-build';
import { tinyModel } from '../helpers/models';

const root = path.resolve(__dirname, '..', '..');

/** Every .cpp under csrc/, relative to the root: what CMake's globs build into the addon (the CLI's and the server addon's own files aside). */
const addonSources = () => filesUnder(csrc, /\.cpp$/).map((f) => path.relative(root, f)).filter((f) => !/^csrc\/(cli|host_addon)\//.test(f));

// A file added to csrc/ but not compiled by node-gyp links into an addon with an undefined symbol, which kills the
// process that loads it: caught here, at once. binding.gyp's sources are the units scripts/compile_units.py writes.
test('binding.gyp compiles every source file the CMake build compiles into the addon', () => {
  const gyp = fs.readFileSync(path.join(root, 'binding.gyp'), 'utf8');
  const folders = /"<!@\(python3 scripts\/compile_units\.py --out build\/units ([^)"]+)\)"/.exec(gyp)![1].split(' ');
  const compiled = withCompileUnits(folders, (units, alone) => [...units.flatMap(unitMembers), ...alone]);
  expect(compiled.sort()).toEqual(addonSources().sort());
});

test('node-gyp builds the addons from binding.gyp, and the engine answers like the cmake-js build', async () => {
  // Started by the global set-up (helpers/gyp-build.ts); started here when that did not.
  const started = process.env[GYP_BUILD_ENV];
  const dir = started ?? startGypBuild();
  try {
    const built = await finishedGypBuild(dir);
    // node-gyp compiles with -Wall -Wextra, and the set-up shows what the compilers say: nothing a newcomer must learn to ignore.
    const said = fs.readFileSync(path.join(dir, 'compile.log'), 'utf8');
    expect(said.split('\n').filter((line) => /\bwarning:/.test(line))).toEqual([]);
    // Loaded first in a child: an unresolved symbol ends the loading process, which must not be jest's.
    execFileSync(process.execPath, ['-e', `require(${JSON.stringify(built)})`], { stdio: 'pipe' });
    const addon = require(built) as { NativeEngine: new () => NativeEngine };
    const gyp = new addon.NativeEngine();
    const request = { state: [1, 2, 3, 4, 5], questions: [{ tokens: [6, 7], labelIds: [8, 9, 10] }] };
    await gyp.load({ path: tinyModel('tiny-mistral') });
    const [viaGyp] = await gyp.answerBatch([request]);
    await gyp.close();
    const cmake = await Engine.open({ path: tinyModel('tiny-mistral') });
    const viaCmake = await cmake.answer(request);
    await cmake.close();
    expect(Array.from(viaGyp.answers[0].labelLogits)).toEqual(Array.from(viaCmake.answers[0].labelLogits));
    // The server's own addon, built beside it (glibc here: malloc_trim answers true or false).
    const host = require(path.join(path.dirname(built), 'tqserve_host.node')) as { releaseFreeMemory: () => boolean | null };
    expect(typeof host.releaseFreeMemory()).toBe('boolean');
  } finally {
    removeGypBuild(dir);
  }
}, 600_000);
