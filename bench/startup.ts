/**
 * Start-up benchmark (not a test): `npm run bench:startup`.
 * How long from starting the server to `GET /ready` answering 200, with the tiny test model
 * (STARTUP_BASE, default tiny-qwen3; STARTUP_ARGS adds flags, e.g. "--image-model tiny-qwen2-vl")
 * on its own port: the compiled command (`tqserve serve`, dist/, what `npm start` runs), and beside
 * it, alternating, STARTUP_BASELINE's (another checkout's dist/tqserve.js, to compare a change) or
 * else the same server run from its TypeScript through ts-node. STARTUP_RUNS (default 5) runs each;
 * prints every run and the medians, with the CPU the server process and its engine processes had spent by then (read
 * from /proc). Each server gets GLIBC_TUNABLES as `npm start` gives it (glibc.malloc.hugetlb=1
 * unless set; docs/running.md, "Start-up"). Needs `npm run build` (the set-up runs it).
 */
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as http from 'http';
import * as path from 'path';

const root = path.resolve(__dirname, '..');
const RUNS = Number(process.env.STARTUP_RUNS ?? 5);
const BASE = process.env.STARTUP_BASE ?? 'tiny-qwen3';
const PORT = 18700;

const EXTRA = (process.env.STARTUP_ARGS ?? '').split(' ').filter(Boolean);
const BASELINE = process.env.STARTUP_BASELINE;
const TUNABLES = process.env.GLIBC_TUNABLES ?? 'glibc.malloc.hugetlb=1';

const forms: Record<string, string[]> = {
  'tqserve serve (compiled)': [path.join(root, 'dist/tqserve.js'), 'serve'],
  ...(BASELINE
    ? { [`baseline ${BASELINE}`]: [BASELINE, 'serve'] }
    : { 'ts-node src/server/main.ts': ['-r', 'ts-node/register/transpile-only', path.join(root, 'src/server/main.ts')] }),
};

function readyStatus(): Promise<number> {
  return new Promise((resolve) => {
    http.get(`http://127.0.0.1:${PORT}/ready`, (res) => (res.resume(), resolve(res.statusCode ?? 0))).on('error', () => resolve(0));
  });
}

/** CPU milliseconds a process has spent (user and system; /proc's clock ticks are 10 ms here), 0 once it is gone. */
function cpuMs(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return 0;
  }
}

function childrenOf(pid: number): number[] {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

interface Start { ms: number; serverCpu: number; enginesCpu: number }

/** From spawn to the first 200 from /ready, and the CPU spent by then; the server is then stopped and awaited. */
async function timeToReady(args: string[]): Promise<Start> {
  const t0 = performance.now();
  const child = spawn(process.execPath, [...args, '--base', BASE, ...EXTRA, '--port', String(PORT), '--log-level', 'error'], { cwd: root, stdio: 'ignore', env: { ...process.env, GLIBC_TUNABLES: TUNABLES } });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  while ((await readyStatus()) !== 200) {
    if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  const start = { ms: performance.now() - t0, serverCpu: cpuMs(child.pid!), enginesCpu: childrenOf(child.pid!).reduce((sum, pid) => sum + cpuMs(pid), 0) };
  child.kill();
  await exited;
  return start;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  const starts: Record<string, Start[]> = Object.fromEntries(Object.keys(forms).map((f) => [f, []]));
  for (let run = 0; run < RUNS; run++) {
    for (const [form, args] of Object.entries(forms)) starts[form].push(await timeToReady(args));
  }
  console.log(`time from start to /ready 200, ${BASE}${EXTRA.length ? ' ' + EXTRA.join(' ') : ''}, GLIBC_TUNABLES=${TUNABLES}, ${RUNS} runs each (alternating), ms:`);
  for (const [form, runs] of Object.entries(starts)) {
    const ms = runs.map((r) => r.ms);
    console.log(`  ${form.padEnd(28)} median ${median(ms).toFixed(0).padStart(5)}   CPU by then: server ${median(runs.map((r) => r.serverCpu))}, engines ${median(runs.map((r) => r.enginesCpu))}` +
      `   runs ${ms.map((m) => m.toFixed(0)).join(' ')}`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
