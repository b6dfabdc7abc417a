/**
 * The lean libtorch_cpu (scripts/lean_torch.py, CMakeLists.txt; docs/build.md, "A lean libtorch_cpu"). Debian's
 * libtorch_cpu names libraries it takes no symbol from; the build's programs and addon load a copy without exactly
 * those, found here with binutils (nm, readelf, ldd), apart from the script's own ELF reader. A process that loads the
 * addon maps the copy, and of the libraries dropped only those another library needs; and tq_cli answers with the same
 * bits on the copy and on the library as installed.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { tinyModel } from '../helpers/models';
import { tokenizeTexts } from '../helpers/tokens';
import { cliPath, runCli } from '../helpers/tq-cli';

const root = path.resolve(__dirname, '..', '..');
// The build's RUNPATH is what is checked: no LD_LIBRARY_PATH of the caller's in front of it.
const ownEnv: NodeJS.ProcessEnv = { ...process.env, LD_LIBRARY_PATH: '' };
const run = (file: string, args: string[], env: NodeJS.ProcessEnv = ownEnv) => execFileSync(file, args, { encoding: 'utf8', env, maxBuffer: 1 << 28 });

/** Library name -> path, as the loader resolves them for `file` (ldd). */
function resolved(file: string, env?: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries([...run('ldd', [file], env).matchAll(/^\s*(\S+) => (\/\S+)/gm)].map((m) => [m[1], m[2]]));
}
const needed = (file: string) => [...run('readelf', ['-d', file]).matchAll(/\(NEEDED\)\s+Shared library: \[(.+)\]/g)].map((m) => m[1]);
const symbols = (file: string, which: 'undefined' | 'defined') =>
  new Set(run('nm', ['-D', `--${which}-only`, '--format=just-symbols', file]).split('\n').filter(Boolean).map((s) => s.split('@')[0]));

// libtorch_cpu by the name the programs need it (libtorch_cpu.so.1.13 on Debian's bookworm), and its lean copy's path.
const soname = needed(cliPath).find((name) => name.startsWith('libtorch_cpu.so'))!;
const lean = path.join(root, 'build', 'lean-torch', soname);
// The library as installed: the one the loader finds by its name, without the build's RUNPATH.
const installed = / => (\S+)/.exec(run('/sbin/ldconfig', ['-p']).split('\n').find((line) => line.trim().startsWith(`${soname} `)) ?? '')?.[1];

function unusedNeeded(library: string): string[] {
  const undefinedSymbols = symbols(library, 'undefined');
  const paths = resolved(library);
  return needed(library).filter((name) => paths[name] && ![...symbols(paths[name], 'defined')].some((s) => undefinedSymbols.has(s)));
}

const dropped = installed ? unusedNeeded(installed) : [];
const hasCopy = dropped.length > 0;

test('the copy drops exactly the libraries that define none of the symbols libtorch_cpu leaves undefined, and the build loads it', () => {
  expect(installed).toBeDefined();
  expect(fs.existsSync(lean)).toBe(hasCopy);
  if (!hasCopy) return;
  expect(needed(lean)).toEqual(needed(installed!).filter((name) => !dropped.includes(name)));
  const addon = path.join(root, 'build', 'Release', 'tqserve_engine.node');
  for (const program of [cliPath, addon]) expect([program, resolved(program)[soname]]).toEqual([program, lean]);
});

(hasCopy ? test : test.skip)('a process that loads the addon maps the copy, and of the libraries it drops only those a library kept needs', () => {
  const script = `require(${JSON.stringify(path.join(root, 'dist', 'engine', 'native.js'))}).loadAddon();
    const maps = require('fs').readFileSync('/proc/self/maps', 'utf8');
    console.log(JSON.stringify([...new Set(maps.split('\\n').map((l) => l.split(/\\s+/)[5]).filter((f) => f && f.includes('.so')))]));`;
  const mapped: string[] = JSON.parse(run(process.execPath, ['-e', script]));
  expect(mapped.filter((file) => path.basename(file).startsWith('libtorch_cpu'))).toEqual([lean]);
  // A library dropped from the copy is mapped only where a library kept needs it too (libc10 needs libnuma).
  const closure = Object.values(resolved(lean)).map((file) => fs.realpathSync(file));
  const droppedMapped = mapped.filter((file) => dropped.some((name) => path.basename(file).startsWith(name)));
  expect(droppedMapped.filter((file) => !closure.includes(file))).toEqual([]);
  // Node's own and the addon's included, fewer than the library as installed brings alone.
  expect(mapped.length).toBeLessThan(Object.keys(resolved(installed!)).length / 2);
});

(hasCopy ? test : test.skip)('tq_cli answers with the same bits on the copy and on the library as installed', async () => {
  const dir = tinyModel('tiny-qwen3');
  const { state, questions, labels } = await tokenizeTexts(dir);
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-lean-'));
  try {
    const calls = path.join(scratch, 'calls.json');
    fs.writeFileSync(calls, JSON.stringify({ calls: [[{ state, questions: questions.map((tokens) => ({ tokens, labelIds: labels })) }]] }));
    // LD_LIBRARY_PATH is searched before a RUNPATH: the installed library's folder first makes the loader take it.
    const asInstalled = { ...process.env, LD_LIBRARY_PATH: path.dirname(installed!) };
    expect(resolved(cliPath, asInstalled)[soname]).toBe(path.join(path.dirname(installed!), soname));
    const args = ['answer', '--model', dir, '--dtype', 'bf16', '--calls', calls];
    const [onCopy, onInstalled] = await Promise.all([runCli(args, { LD_LIBRARY_PATH: '' }), runCli(args, { LD_LIBRARY_PATH: asInstalled.LD_LIBRARY_PATH })]);
    expect(onCopy.calls[0][0].answers.length).toBe(questions.length);
    const answers = (out: any) => JSON.stringify(out.calls.map((call: any[]) => call.map((r) => r.answers)));
    expect(answers(onInstalled)).toBe(answers(onCopy));
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
});
