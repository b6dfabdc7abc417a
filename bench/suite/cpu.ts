/**
 * Where the test suite's CPU goes (not a test): `npm run bench:suite [-- jest's arguments]`.
 * Runs jest as `npm test` does and samples every process's CPU from /proc four times a second. Each process a jest
 * worker started (servers, their engine processes, tq_cli runs, compilers), and the worker itself, is given to the
 * test file the worker ran when the process was first seen (bench/suite/file-window.js marks each file's start and
 * end), even after its parent has gone: a server stopped before its engine process leaves that process to init. What
 * runs under jest's own process (the global set-up, the node-gyp build it starts) is counted apart. Prints each
 * file's wall time and CPU seconds, heaviest first, then the CPU by kind of process. A process that starts and ends
 * between two samples is not seen: `/usr/bin/time npm run bench:suite` gives the whole, to compare.
 */
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const root = path.resolve(__dirname, '..', '..');
const TICK = 100; // clock ticks per second (_SC_CLK_TCK on Linux x86)
const BETWEEN = '(a worker between files)';

interface Stat { ppid: number; cpu: number; started: number; command: string }

/** Every process's parent, CPU seconds (user + system), start time (clock ticks since boot) and command line. */
function snapshot(): Map<number, Stat> {
  const stats = new Map<number, Stat>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const text = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const f = text.slice(text.lastIndexOf(')') + 2).split(' '); // fields from the third (state) on
      // Read at each sample: a child forked and not yet exec'd has its parent's command line.
      const command = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').slice(0, 3).join(' ');
      stats.set(Number(entry), { ppid: Number(f[1]), cpu: (Number(f[11]) + Number(f[12])) / TICK, started: Number(f[19]), command });
    } catch {
      // ended meanwhile
    }
  }
  return stats;
}

/** What a process is, from its command line, for the CPU by kind. */
const KINDS: [string, RegExp][] = [
  ['jest workers (the tests, in-process engines)', /jest-worker/],
  ['servers (tqserve serve, decide)', /tqserve\.js|server\/main/],
  ['engine processes', /engine-process\/host/],
  ['tq_cli and the native checks', /\/build\/(tq_cli|\w+_check)\b/],
  ['compilers (g++, nvcc, their passes, the build tools)', /\b(g\+\+|c\+\+|cc1plus|cc1|nvcc|cicc|ptxas|cudafe\+\+|fatbinary|as|ld|collect2|cmake|ninja|make)\b/],
  ['Python (float64 references, the GPU window)', /python/],
  ["TypeScript's compiler (the set-up's dist/ and type check)", /typescript\/bin\/tsc/],
  ["jest's own process", /jest\/bin\/jest|\.bin\/jest/],
];
const kindOf = (command: string) => KINDS.find(([, pattern]) => pattern.test(command))?.[0] ?? 'other';

/** The file each jest worker runs now, from the marks: its last start without an end. */
function runningFiles(windows: string): Map<number, string> {
  const running = new Map<number, string>();
  for (const line of fs.readFileSync(windows, 'utf8').split('\n').filter(Boolean)) {
    const w = JSON.parse(line) as { pid: number; file: string; what: string };
    if (w.what === 'start') running.set(w.pid, w.file);
    else running.delete(w.pid);
  }
  return running;
}

/** Each file's wall time, from the marks. */
function fileWalls(windows: string): Map<string, number> {
  const wall = new Map<string, number>();
  const begun = new Map<string, number>();
  for (const line of fs.readFileSync(windows, 'utf8').split('\n').filter(Boolean)) {
    const w = JSON.parse(line) as { file: string; what: string; ms: number };
    if (w.what === 'start') begun.set(w.file, w.ms);
    else wall.set(w.file, (w.ms - begun.get(w.file)!) / 1000);
  }
  return wall;
}

/** A process, known by its pid and start time (pids are reused): whose CPU it is, and how much it had last seen. */
interface Tracked { file: string; kind: string; cpu: number; command: string }

async function main() {
  const windows = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'tq-suite-')), 'windows.jsonl');
  fs.writeFileSync(windows, '');
  const started = Date.now();
  const jest = spawn(process.execPath, [require.resolve('jest/bin/jest'), ...process.argv.slice(2), '--setupFilesAfterEnv', path.join(__dirname, 'file-window.js')], {
    cwd: root,
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, TQ_SUITE_WINDOWS: windows },
  });
  let done = false;
  const exited = new Promise<number | null>((resolve) => jest.on('exit', resolve)).finally(() => (done = true));
  const tracked = new Map<string, Tracked>();
  const perFile = new Map<string, number>();
  const perFileKind = new Map<string, Map<string, number>>();
  const charge = (t: Tracked, cpu: number) => {
    perFile.set(t.file, (perFile.get(t.file) ?? 0) + cpu);
    const kinds = perFileKind.get(t.file) ?? new Map<string, number>();
    perFileKind.set(t.file, kinds.set(t.kind, (kinds.get(t.kind) ?? 0) + cpu));
  };
  const JEST = "jest's own process and what it ran itself (the set-up, the node-gyp build)";
  while (!done) {
    await new Promise((r) => setTimeout(r, 250));
    const stats = snapshot();
    const children = new Map<number, number[]>();
    for (const [pid, s] of stats) children.set(s.ppid, [...(children.get(s.ppid) ?? []), pid]);
    const running = runningFiles(windows);
    // Walk jest's tree: a worker's processes are its file's; the others, jest's own.
    const walk = (pid: number, file: string) => {
      const s = stats.get(pid)!;
      const key = `${pid}@${s.started}`;
      const isWorker = s.ppid === jest.pid && /jest-worker/.test(s.command);
      const owner = isWorker ? running.get(pid) ?? BETWEEN : file;
      // A worker's own CPU goes to the file it runs now; another process's, to the file that started it.
      const t = tracked.get(key) ?? { file: owner, kind: kindOf(s.command), cpu: 0, command: s.command };
      if (isWorker) t.file = owner;
      if (s.command) Object.assign(t, { kind: kindOf(s.command), command: s.command }); // a zombie's is empty
      charge(t, s.cpu - t.cpu);
      t.cpu = s.cpu;
      tracked.set(key, t);
      for (const child of children.get(pid) ?? []) walk(child, isWorker ? owner : t.file);
    };
    if (stats.has(jest.pid!)) walk(jest.pid!, JEST);
    // Processes seen before and since left to init (their parent gone): still theirs.
    for (const [pid, s] of stats) {
      const t = tracked.get(`${pid}@${s.started}`);
      if (t && s.cpu !== t.cpu && !isUnder(pid, jest.pid!, stats)) {
        charge(t, s.cpu - t.cpu);
        t.cpu = s.cpu;
      }
    }
  }
  const code = await exited;
  report(perFile, perFileKind, fileWalls(windows), tracked, JEST, (Date.now() - started) / 1000);
  fs.rmSync(path.dirname(windows), { recursive: true, force: true });
  process.exitCode = code ?? 1;
}

function isUnder(pid: number, ancestor: number, stats: Map<number, Stat>): boolean {
  for (let p = stats.get(pid)?.ppid; p !== undefined && p > 1; p = stats.get(p)?.ppid) if (p === ancestor) return true;
  return false;
}

function report(perFile: Map<string, number>, perFileKind: Map<string, Map<string, number>>, wall: Map<string, number>, tracked: Map<string, Tracked>, jestOwn: string, seconds: number) {
  const files = [...perFile].filter(([file]) => file !== jestOwn).sort((a, b) => b[1] - a[1]);
  const inFiles = files.reduce((s, [, cpu]) => s + cpu, 0);
  console.log(`\nCPU seconds per test file (${os.cpus()[0].model}, ${os.cpus().length} cores), heaviest first, and its wall time:`);
  for (const [file, cpu] of files) console.log(`${cpu.toFixed(1).padStart(8)}  ${(wall.get(file)?.toFixed(1) ?? '-').padStart(7)} s  ${file === BETWEEN ? file : path.relative(root, file)}`);
  console.log(`${inFiles.toFixed(1).padStart(8)}  in the test files; ${(perFile.get(jestOwn) ?? 0).toFixed(1)} in ${jestOwn}; wall ${seconds.toFixed(1)} s`);
  console.log('\nThe ten heaviest files by kind of process (CPU seconds):');
  for (const [file] of files.filter(([f]) => f !== BETWEEN).slice(0, 10)) {
    const kinds = [...perFileKind.get(file)!].filter(([, cpu]) => cpu >= 0.5).sort((a, b) => b[1] - a[1]);
    console.log(`  ${path.relative(root, file)}: ${kinds.map(([kind, cpu]) => `${kind.replace(/ \(.*/, '')} ${cpu.toFixed(1)}`).join(', ')}`);
  }
  const byKind = new Map<string, { cpu: number; count: number }>();
  for (const { kind, cpu } of tracked.values()) {
    const k = byKind.get(kind) ?? { cpu: 0, count: 0 };
    byKind.set(kind, { cpu: k.cpu + cpu, count: k.count + 1 });
  }
  console.log('\nCPU seconds by kind of process (jest\'s own included; each process seen by a sample at least once):');
  for (const [kind, { cpu, count }] of [...byKind].sort((a, b) => b[1].cpu - a[1].cpu))
    console.log(`${cpu.toFixed(1).padStart(8)}  ${kind}: ${count}${count > 1 ? `, ${(cpu / count).toFixed(2)} s each` : ''}`);
  const others = [...tracked.values()].filter((t) => t.kind === 'other').sort((a, b) => b.cpu - a.cpu).slice(0, 8);
  console.log(`The heaviest of the others: ${others.map((t) => `${t.command.slice(0, 80)} (${t.cpu.toFixed(1)} s)`).join('; ')}`);
}

main();
