/**
 * The float64 references (test/reference/serve.py) in one Python process per test file, started on the
 * first call: each interpreter spent ~1.7 s importing torch, and the engine suites asked 30-odd times.
 * Asynchronous, so a test never blocks its event loop while the reference runs (a test that did, while it
 * held a keep-alive connection, found the socket closed by the server's idle timeout). The process ends
 * with the test file (afterAll, registered here).
 */
import { ChildProcessWithoutNullStreams, spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { keepFreedMemory } from './keep-freed-memory';
import { debianPython, pythonEnv, referenceDir } from './models';

type Script = 'forward' | 'ref_vlm';
interface Waiting {
  resolve: (v: any) => void;
  reject: (e: Error) => void;
}

let worker: { child: ChildProcessWithoutNullStreams; waiting: Waiting[]; stderr: string } | undefined;

function start() {
  const child = spawn(debianPython, [path.join(referenceDir, 'serve.py')], { stdio: ['pipe', 'pipe', 'pipe'], env: keepFreedMemory(pythonEnv()) });
  const w = { child, waiting: [] as Waiting[], stderr: '' };
  let buffered = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    buffered += d;
    for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
      const reply = JSON.parse(buffered.slice(0, nl));
      buffered = buffered.slice(nl + 1);
      const next = w.waiting.shift()!;
      if (reply.error) next.reject(new Error(`reference: ${reply.error}`));
      else next.resolve(reply.result);
    }
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => (w.stderr += d));
  child.on('exit', (code) => {
    for (const next of w.waiting.splice(0)) next.reject(new Error(`the reference process exited (${code}): ${w.stderr}`));
    if (worker === w) worker = undefined;
  });
  return w;
}

/**
 * A scratch folder for what the reference writes: in memory (/dev/shm) where the machine has it. A parity suite's
 * logits at every position over a whole vocabulary are hundreds of megabytes, written once and read once.
 */
export function referenceScratch(prefix: string): string {
  const memory = '/dev/shm';
  let base = os.tmpdir();
  try {
    fs.accessSync(memory, fs.constants.W_OK);
    base = memory;
  } catch {
    /* no /dev/shm: the disk's temporary folder */
  }
  return fs.mkdtempSync(path.join(base, prefix));
}

/** What `script` returns for `request` (the JSON it reads on its standard input when run alone). */
export function callReference(script: Script, request: object): Promise<any> {
  worker ??= start();
  const w = worker;
  return new Promise((resolve, reject) => {
    w.waiting.push({ resolve, reject });
    w.child.stdin.write(JSON.stringify({ script, request }) + '\n');
  });
}

afterAll(() => {
  worker?.child.kill();
  worker = undefined;
});
