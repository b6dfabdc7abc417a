/**
 * Task fitting's time (not a test): `npm run bench:fit`. `fitTask` (src/tasks/fit/fit-task.ts, what a registration
 * runs in its worker) on seeded inputs of two sizes, in fresh processes, alternating with another build's where
 * FIT_BASELINE names its compiled fit-task.js (e.g. a worktree's `dist/tasks/fit/fit-task.js`):
 *   - 180 examples, 13 options, 64 hidden dimensions: the size of the abstention tests' head task;
 *   - 1,000 examples, 77 options, 896 hidden dimensions (reduced to 64 by the fit's PCA): bench:tasks' fitting time.
 * Each input's labels lean on one hidden dimension each, so that a head has something to find. Prints each fit's
 * time, what it applied, a hash of its output (fit_ms aside) and, against the baseline, the largest relative
 * difference of any number in the two outputs. FIT_ROUNDS (default 2) rounds; FIT_SIZES=small or big for one size.
 */
import { execFileSync } from 'child_process';
import { createHash } from 'crypto';
import * as path from 'path';

interface Size { name: string; n: number; C: number; d: number }
const SIZES: Size[] = [
  { name: 'small', n: 180, C: 13, d: 64 },
  { name: 'big', n: 1000, C: 77, d: 896 },
];

/** One fit in this process (the child's side): its time and output as JSON on stdout. */
function fitOnce(modulePath: string, size: Size) {
  let seed = 12345;
  const uniform = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
  const { n, C, d } = size;
  const y = Int32Array.from({ length: n }, (_, i) => i % C);
  const data = new Float64Array(n * d).map(() => uniform() - 0.5);
  for (let i = 0; i < n; i++) data[i * d + (y[i] % d)] += 2;
  const logp = new Float64Array(n * C);
  for (let i = 0; i < n; i++) {
    let sum = 0;
    for (let j = 0; j < C; j++) sum += Math.exp((logp[i * C + j] = 2 * uniform()));
    for (let j = 0; j < C; j++) logp[i * C + j] -= Math.log(sum);
  }
  const input = { id: `bench-${size.name}`, keys: Array.from({ length: C }, (_, j) => `k${j}`), readouts: { n, C, logp, y }, hidden: { d, data } };
  // eslint-disable-next-line @typescript-eslint/no-var-requires
  const { fitTask } = require(modulePath);
  const t0 = performance.now();
  const out = fitTask(input);
  const ms = performance.now() - t0;
  delete out.record.fit_ms;
  const json = JSON.stringify(out, (_k, v) => (v instanceof Float32Array || v instanceof Float64Array ? Array.from(v) : v));
  process.stdout.write(JSON.stringify({ ms, applied: out.applied, out: json }));
}

function largestRelativeDifference(a: unknown, b: unknown): number {
  if (typeof a === 'number' && typeof b === 'number') return a === b ? 0 : Math.abs(a - b) / Math.max(Math.abs(a), Number.MIN_VALUE);
  if (a && b && typeof a === 'object' && typeof b === 'object')
    return Math.max(0, ...Object.keys(a).map((k) => largestRelativeDifference((a as any)[k], (b as any)[k])));
  return a === b ? 0 : Infinity;
}

function main() {
  if (process.argv[2] === '--child') return fitOnce(process.argv[3], SIZES.find((s) => s.name === process.argv[4])!);
  const own = path.resolve(__dirname, '..', 'src', 'tasks', 'fit', 'fit-task.ts');
  const builds: [string, string][] = [['this build', own], ...(process.env.FIT_BASELINE ? [['baseline', path.resolve(process.env.FIT_BASELINE)] as [string, string]] : [])];
  const rounds = Number(process.env.FIT_ROUNDS ?? 2);
  const sizes = SIZES.filter((s) => !process.env.FIT_SIZES || process.env.FIT_SIZES.split(',').includes(s.name));
  console.log(`| input | build | round | fit ms | applied | output hash | largest relative difference from the baseline |\n|---|---|---|---|---|---|---|`);
  for (const size of sizes)
    for (let round = 0; round < rounds; round++) {
      // Both orders in turn, so that neither build always runs on a machine the other has just warmed.
      const order = round % 2 === 0 ? builds : [...builds].reverse();
      const results = new Map<string, { ms: number; applied: string; out: string }>();
      for (const [name, modulePath] of order) {
        const args = ['-r', 'ts-node/register/transpile-only', __filename, '--child', modulePath, size.name];
        results.set(name, JSON.parse(execFileSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 1 << 28 })));
      }
      const baseline = results.get('baseline');
      for (const [name, r] of results) {
        const hash = createHash('sha256').update(r.out).digest('hex').slice(0, 12);
        const diff = baseline && name !== 'baseline' ? largestRelativeDifference(JSON.parse(baseline.out), JSON.parse(r.out)).toExponential(1) : '';
        console.log(`| ${size.n} x ${size.C} options x ${size.d} | ${name} | ${round + 1} | ${r.ms.toFixed(0)} | ${r.applied} | ${hash} | ${diff} |`);
      }
    }
}

main();
