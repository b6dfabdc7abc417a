/**
 * Native checks linked against the engine library the build made (build/libtq_core.a, by `npm run build:addon`):
 * test/native/<name>.cpp compiled with g++ and torch's headers, run, its output read as one JSON object per line.
 * Started at once, so that several checks' compiles share the cores.
 */
import { execFile } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const root = path.resolve(__dirname, '..', '..');

function run(file: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(file, args, { maxBuffer: 16 << 20 }, (error, stdout, stderr) => (error ? reject(new Error(`${path.basename(file)}:\n${stderr}`)) : resolve(stdout))),
  );
}

export async function runLinkedCheck(name: string, scratch: string): Promise<any[]> {
  const library = path.join(root, 'build', 'libtq_core.a');
  if (!fs.existsSync(library)) throw new Error(`${library} is not built; run: npm run build:addon`);
  const exe = path.join(scratch, name);
  // -O0: the checks' own code is light (the kernels come compiled from the library), and it compiles in half the time.
  await run('g++', ['-std=c++17', '-O0', `-I${path.join(root, 'csrc')}`, '-I/usr/include/torch/csrc/api/include',
    path.join(root, 'test', 'native', `${name}.cpp`), library, '-ltorch', '-ltorch_cpu', '-lc10', '-ldnnl', '-fopenmp', '-o', exe]);
  return (await run(exe, [])).trim().split('\n').map((line) => JSON.parse(line));
}

export function scratchDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'tq-linked-'));
}
