/**
 * Where the test suite's CPU goes (not a test): `npm run bench:suite [-- jest's arguments]`.
 * Runs jest as `npm test` does, samples every process's CPU from /proc four times a second, and gives each jest
 * worker's CPU, with that of every process under it (servers, engine processes, tq_cli runs, compilers), to the
 * test file the worker ran at the time (bench/suite/file-window.js marks each file's start and end). What runs
 * under jest's own process (the global set-up, the node-gyp build it starts) is counted apart. Prints each file's
 * wall time and CPU seconds, heaviest first, and the totals; processes that start and end between two samples
 * are still counted, in the CPU their parent collects when it reaps them (/proc's cutime and cstime).
 */
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const root = path.resolve(__dirname, '..', '..');
const TICK = 100; // clock ticks per second (_SC_CLK_TCK on Linux x86)

interface Stat { ppid: number; cpu: number; reaped: number }

/** Every process's parent, CPU (user + system) and its reaped children's, in seconds. */
function snapshot(): Map<number, Stat> {
  const stats = new Map<number, Stat>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let text: string;
    try {
      text = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // ended meanwhile
    }
    const f = text.slice(text.lastIndexOf(')') + 2).split(' '); // fields from the third (state) on
    stats.set(Number(entry), { ppid: Number(f[1]), cpu: (Number(f[11]) + Number(f[12])) / TICK, reaped: (Number(f[13]) + Number(f[14])) / TICK });
  }
  return stats;
}

/** Whether a process runs jest's worker (the global set-up's children, the node-gyp build among them, are jest's own). */
function isJestWorker(pid: number): boolean {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('jest-worker');
  } catch {
    return false;
  }
}

/** CPU seconds of `pid` and everything under it: its own, its reaped children's, its live descendants'. */
function treeCpu(pid: number, stats: Map<number, Stat>, children: Map<number, number[]>): number {
  const own = stats.get(pid);
  if (!own) return 0;
  return own.cpu + own.reaped + (children.get(pid) ?? []).reduce((sum, child) => sum + treeCpu(child, stats, children), 0);
}

async function main() {
  const windows = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'tq-suite-')), 'windows.jsonl');
  fs.writeFileSync(windows, '');
  const started = Date.now();
  const jest = spawn(process.execPath, [require.resolve('jest/bin/jest'), ...process.argv.slice(2), '--setupFilesAfterEnv', path.join(__dirname, 'file-window.js')], {
    cwd: root,
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, TQ_SUITE_WINDOWS: windows },
  });
  const exited = new Promise<number | null>((resolve) => jest.on('exit', resolve));
  const perFile = new Map<string, number>();
  const lastTree = new Map<number, number>(); // worker pid -> its tree's CPU at the last sample
  const lastFile = new Map<number, string>(); // worker pid -> the file its last sample's CPU went to
  let mainCpu = 0;
  let done = false;
  exited.then(() => (done = true));
  while (!done) {
    await new Promise((r) => setTimeout(r, 250));
    const stats = snapshot();
    const children = new Map<number, number[]>();
    for (const [pid, s] of stats) children.set(s.ppid, [...(children.get(s.ppid) ?? []), pid]);
    const running = new Map<number, string>(); // worker pid -> the file it runs now (its last start without an end)
    for (const line of fs.readFileSync(windows, 'utf8').split('\n').filter(Boolean)) {
      const w = JSON.parse(line) as { pid: number; file: string; what: string };
      if (w.what === 'start') running.set(w.pid, w.file);
      else running.delete(w.pid);
    }
    const workers = (children.get(jest.pid!) ?? []).filter(isJestWorker);
    for (const worker of workers) {
      const now = treeCpu(worker, stats, children);
      const delta = now - (lastTree.get(worker) ?? 0);
      lastTree.set(worker, now);
      // A child reaped between the reads of its stat and its parent's is counted twice in one sample and taken back in
      // the next: the taking back goes to the file the double count went to.
      const file = delta < 0 ? lastFile.get(worker)! : running.get(worker) ?? '(a worker between files)';
      lastFile.set(worker, file);
      perFile.set(file, (perFile.get(file) ?? 0) + delta);
    }
    // Jest's process and what it ran itself: its tree less the workers' (while they run: once reaped, theirs joins it).
    if (workers.length > 0) mainCpu = treeCpu(jest.pid!, stats, children) - workers.reduce((s, w) => s + lastTree.get(w)!, 0);
  }
  const code = await exited;
  const wall = new Map<string, number>();
  const begun = new Map<string, number>();
  for (const line of fs.readFileSync(windows, 'utf8').split('\n').filter(Boolean)) {
    const w = JSON.parse(line) as { file: string; what: string; ms: number };
    if (w.what === 'start') begun.set(w.file, w.ms);
    else wall.set(w.file, (w.ms - begun.get(w.file)!) / 1000);
  }
  const rows = [...perFile].sort((a, b) => b[1] - a[1]);
  const total = rows.reduce((s, [, cpu]) => s + cpu, 0);
  console.log(`\nCPU seconds per test file (${os.cpus()[0].model}, ${os.cpus().length} cores), heaviest first:`);
  for (const [file, cpu] of rows) console.log(`${cpu.toFixed(1).padStart(8)}  ${(wall.get(file)?.toFixed(1) ?? '-').padStart(7)} s  ${path.relative(root, file)}`);
  console.log(`${total.toFixed(1).padStart(8)}  in the test files; jest's own process and what it ran directly (set-up, node-gyp): ${mainCpu.toFixed(1)}; wall ${((Date.now() - started) / 1000).toFixed(1)} s`);
  process.exitCode = code ?? 1;
}

main();
