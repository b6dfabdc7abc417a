/**
 * Start-up benchmark (not a test): `npm run bench:startup`.
 * How long from starting the server to `GET /ready` answering 200, with the tiny test model
 * (STARTUP_BASE, default tiny-qwen3; STARTUP_ARGS adds flags, e.g. "--image-model tiny-qwen2-vl")
 * on its own port: the compiled command (`tqserve serve`, dist/, what `npm start` runs), and beside
 * it, alternating, STARTUP_BASELINE's (another checkout's dist/tqserve.js, to compare a change) or
 * else the same server run from its TypeScript through ts-node. STARTUP_RUNS (default 5) runs each;
 * prints every run and the median. Needs `npm run build` (the set-up runs it).
 */
import { spawn } from 'child_process';
import * as http from 'http';
import * as path from 'path';

const root = path.resolve(__dirname, '..');
const RUNS = Number(process.env.STARTUP_RUNS ?? 5);
const BASE = process.env.STARTUP_BASE ?? 'tiny-qwen3';
const PORT = 18700;

const EXTRA = (process.env.STARTUP_ARGS ?? '').split(' ').filter(Boolean);
const BASELINE = process.env.STARTUP_BASELINE;

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

/** Milliseconds from spawn to the first 200 from /ready; the server is then stopped and awaited. */
async function timeToReady(args: string[]): Promise<number> {
  const t0 = performance.now();
  const child = spawn(process.execPath, [...args, '--base', BASE, ...EXTRA, '--port', String(PORT), '--log-level', 'error'], { cwd: root, stdio: 'ignore' });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  while ((await readyStatus()) !== 200) {
    if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  const ms = performance.now() - t0;
  child.kill();
  await exited;
  return ms;
}

async function main() {
  const times: Record<string, number[]> = Object.fromEntries(Object.keys(forms).map((f) => [f, []]));
  for (let run = 0; run < RUNS; run++) {
    for (const [form, args] of Object.entries(forms)) times[form].push(await timeToReady(args));
  }
  console.log(`time from start to /ready 200, ${BASE}${EXTRA.length ? ' ' + EXTRA.join(' ') : ''}, ${RUNS} runs each (alternating), ms:`);
  for (const [form, ms] of Object.entries(times)) {
    const median = [...ms].sort((a, b) => a - b)[Math.floor(ms.length / 2)];
    console.log(`  ${form.padEnd(28)} median ${median.toFixed(0).padStart(5)}   runs ${ms.map((m) => m.toFixed(0)).join(' ')}`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
