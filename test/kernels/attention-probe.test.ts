/**
 * bench/gpu/attention_probe.py's chunked form (a state's own causal tier cut along its keys, then merged), whose GPU
 * figures decide whether plan_cascade cuts that tier: its plan and merge on the CPU, with a float64 stand-in for
 * FlashAttention-2's varlen forward, give the tier whole. And its grid cases (a tier launched with the fixed form's
 * empty sequences and longest) compute the same rows as the tier alone. The window times the same code on the GPU.
 */
import { execFileSync } from 'child_process';
import * as path from 'path';
import { debianPython, pythonEnv } from '../helpers/models';

const root = path.resolve(__dirname, '..', '..');

test("attention_probe.py's own tier cut into key chunks is the tier whole: sequences alone and side by side, chunks that divide the keys or not; its grid cases the same rows as their tiers alone", () => {
  const out = execFileSync(debianPython, [path.join(root, 'bench', 'gpu', 'attention_probe.py'), '--cpu-check'], { encoding: 'utf8', env: pythonEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  const result = JSON.parse(out) as { cases: { chunk: number; keys: number; prefix_rows: number; max_diff: number }[]; grid_cases_first_run_max_diff: Record<string, number>; long_state_cuts_ok: boolean; ok: boolean };
  expect(result.cases.length).toBeGreaterThanOrEqual(4);
  // A 1,000-key state in chunks of 256: rows 256-999 over one to three earlier chunks.
  expect(result.cases.find((c) => c.keys === 1000 && c.chunk === 256)?.prefix_rows).toBe(256 + 2 * 256 + 3 * 232);
  for (const c of result.cases) expect(c.max_diff).toBeLessThan(1e-5);
  // The grid cases (the fixed form's empty sequences and longest, docs/gpu.md "The fixed form's grids"): a tier's work
  // gives the same rows alone and launched beside the others, so that the window's times are of the same work.
  expect(Object.keys(result.grid_cases_first_run_max_diff)).toHaveLength(4);
  for (const d of Object.values(result.grid_cases_first_run_max_diff)) expect(d).toBe(0);
  // A question over a long state cut into more chunks than the engine's 6: each cut covers the keys once, and runs.
  expect(result.long_state_cuts_ok).toBe(true);
  expect(result.ok).toBe(true);
}, 120_000);
