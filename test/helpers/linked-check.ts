/**
 * Native checks linked against the engine library (test/native/<name>.cpp): the build makes them beside tq_cli
 * (CMakeLists.txt: build/<name>), and this runs one, its output read as one JSON object per line. Where the check's
 * source is newer than that build (edited since), it is compiled here against build/libtq_core.a first: at -O0 by
 * default (the kernels come compiled in the library), or with the flags given, where the check instantiates kernel
 * code of its own that must be compiled as the library's is, or the build's own (cuda_bodies_check: -fsanitize=address,
 * CMakeLists.txt). `args` go to the check (one part of it alone).
 */
import { execFile } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { keepFreedMemory } from './keep-freed-memory';

const root = path.resolve(__dirname, '..', '..');

function run(file: string, args: string[], env?: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(file, args, { maxBuffer: 16 << 20, env }, (error, stdout, stderr) => (error ? reject(new Error(`${path.basename(file)}:\n${stderr}`)) : resolve(stdout))),
  );
}

const mtime = (file: string) => (fs.existsSync(file) ? fs.statSync(file).mtimeMs : -Infinity);

/** Each check compiled here, once per scratch folder however many runs ask for it. */
const compiled = new Map<string, Promise<void>>();

export async function runLinkedCheck(
  name: string,
  scratch: string,
  options: { compileFlags?: string[]; env?: NodeJS.ProcessEnv; args?: string[] } = {},
): Promise<any[]> {
  const library = path.join(root, 'build', 'libtq_core.a');
  if (!fs.existsSync(library)) throw new Error(`${library} is not built; run: npm run build:addon`);
  const source = path.join(root, 'test', 'native', `${name}.cpp`);
  // The definitions the CPU build compiles the library with (CMakeLists.txt: oneDNN required, no CUDA), so that the
  // check sees the library's branches (without them it would lose its oneDNN parts and report them missing).
  const compile = (exe: string, flags: string[]) =>
    run('g++', ['-std=c++17', ...flags, '-DTQ_ONEDNN=1', '-DTQ_CUDA=0', `-I${path.join(root, 'csrc')}`, '-I/usr/include/torch/csrc/api/include', source, library,
      '-ltorch', '-ltorch_cpu', '-lc10', '-ldnnl', '-fopenmp', '-o', exe]);
  let exe = path.join(root, 'build', name);
  if (mtime(exe) < Math.max(mtime(source), mtime(library))) {
    exe = path.join(scratch, name);
    // -O0 by default: the check's own code is light (the kernels come compiled in the library), and it compiles in half the time.
    if (!compiled.has(exe)) compiled.set(exe, compile(exe, options.compileFlags ?? ['-O0']).then(() => undefined));
    await compiled.get(exe);
  }
  return (await run(exe, options.args ?? [], keepFreedMemory(options.env))).trim().split('\n').map((line) => JSON.parse(line));
}

export function scratchDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'tq-linked-'));
}
