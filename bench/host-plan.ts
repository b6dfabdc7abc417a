/**
 * The host's planning of a call (not a test): `npm run bench:host-plan`.
 * What the host does before a call's steps run (ForwardInfo::plan_ms, tq_cli's `planMs`): the requests checked and
 * packed, the prefix looked up, the steps planned and padded to their bucket, their attention planned and their
 * arrays moved to the device, a CUDA graph's buffers refilled. On CUDA a lone call's first step waits for it, so it
 * is part of every warm question's time there; here it is measured on the CPU, where the same code runs.
 * Workloads on tiny-qwen3 (PLAN_MODEL to change; the plans depend on token counts, not on the model's size), each call
 * repeated PLAN_CALLS times (default 200) after one cold call, in one tq_cli process: a warm 24-token question over a
 * cached 1,000-token state, and 16 such questions at once; and a cold one, a new 1,000-token state and its question each
 * call (a prefill: a quarter as many calls). Paths: the GPU's (`--attention cascade --cuda-graphs on`,
 * its fixed form and graph refills, planned on the CPU) and the CPU's default. PLAN_BASELINE, another tq_cli (a
 * checkout's build/tq_cli before a change), runs alternately beside build/tq_cli, PLAN_ROUNDS times (default 3).
 * Prints each run's median and the medians of the runs, in µs.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const root = path.resolve(__dirname, '..');
const MODEL = process.env.PLAN_MODEL ?? path.join(root, 'models', 'tiny-qwen3');
const CALLS = Number(process.env.PLAN_CALLS ?? 200);
const ROUNDS = Number(process.env.PLAN_ROUNDS ?? 3);
const clis: Record<string, string> = {
  'build/tq_cli': path.join(root, 'build', 'tq_cli'),
  ...(process.env.PLAN_BASELINE ? { baseline: process.env.PLAN_BASELINE } : {}),
};

// Token ids drawn by a fixed generator: the same calls for every build.
let seed = 1;
const token = () => 100 + ((seed = (seed * 1103515245 + 12345) % 2147483648) % 4900);
const tokens = (n: number) => Array.from({ length: n }, token);
const state = tokens(1000);
const question = () => ({ tokens: tokens(24), labelIds: [10, 11, 12, 13] });
const asked = question();
const sixteen = Array.from({ length: 16 }, question);
/** Each workload's calls: one request a call. */
const workloads: Record<string, () => unknown[]> = {
  'warm question (24 over 1,000)': () => Array.from({ length: CALLS + 1 }, () => ({ state, questions: [asked], wantHidden: false })),
  'warm, 16 questions at once': () => Array.from({ length: CALLS + 1 }, () => ({ state, questions: sixteen, wantHidden: false })),
  'cold, a new 1,000-token state and its question': () =>
    Array.from({ length: Math.ceil(CALLS / 4) + 1 }, () => ({ state: tokens(1000), questions: [asked], wantHidden: false })),
};
const paths: Record<string, string[]> = {
  "the GPU's path (cascade, fixed form, graph refills)": ['--attention', 'cascade', '--cuda-graphs', 'on'],
  "the CPU's default": [],
};

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-host-plan-'));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** The median planMs of the calls but the first (the process's first call), in µs. */
function planUs(cli: string, requests: unknown[], flags: string[]): number {
  const file = path.join(scratch, 'calls.json');
  fs.writeFileSync(file, JSON.stringify({ calls: requests.map((request) => [request]) }));
  const out = JSON.parse(execFileSync(cli, ['answer', '--model', MODEL, '--calls', file, '--dtype', 'bf16', ...flags], { encoding: 'utf8', maxBuffer: 1 << 28 }));
  return 1000 * median(out.calls.slice(1).map((call: { planMs: number }[]) => call[0].planMs));
}

try {
  console.log(`${os.cpus()[0].model}, ${os.cpus().length} CPUs; ${path.basename(MODEL)}, bf16, ${CALLS} warm calls a run (cold: ${Math.ceil(CALLS / 4)}), ${ROUNDS} rounds`);
  for (const [pathName, flags] of Object.entries(paths))
    for (const [name, calls] of Object.entries(workloads)) {
      const runs: Record<string, number[]> = Object.fromEntries(Object.keys(clis).map((k) => [k, []]));
      const requests = calls();  // the same calls for every build and round
      for (let round = 0; round < ROUNDS; round++) for (const [k, cli] of Object.entries(clis)) runs[k].push(planUs(cli, requests, flags));
      const line = Object.entries(runs).map(([k, us]) => `${k} ${median(us).toFixed(0)} µs (${us.map((u) => u.toFixed(0)).join(', ')})`);
      console.log(`${pathName}, ${name}: ${line.join('; ')}`);
    }
} finally {
  fs.rmSync(scratch, { recursive: true, force: true });
}
