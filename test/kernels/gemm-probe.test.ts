/**
 * bench/gpu/gemm_probe.py's forms of a layer's GEMM (rows padded, a -0.0 bias, the transposed problem, a batch over
 * the output's columns), whose GPU times and bits decide how the batch-invariant engine runs its GEMMs on few rows:
 * on the CPU in float64, each is F.linear's product. The window times the same code on the GPU.
 */
import { execFileSync } from 'child_process';
import * as path from 'path';
import { debianPython, pythonEnv } from '../helpers/models';

const root = path.resolve(__dirname, '..', '..');

test("gemm_probe.py's forms are F.linear's product on every shape and row count", () => {
  const out = execFileSync(debianPython, [path.join(root, 'bench', 'gpu', 'gemm_probe.py'), '--cpu-check'], { encoding: 'utf8', env: pythonEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  const result = JSON.parse(out) as { cases: { shape: string; rows: number; form: string; size_ok: boolean; max_diff: number }[]; ok: boolean };
  const forms = new Set(result.cases.map((c) => c.form));
  expect([...forms].sort()).toEqual(['bias_neg0', 'cols16', 'cols4', 'cols8', 'linear', 'pad128', 'pad256', 'swapped']);
  expect(new Set(result.cases.map((c) => c.shape))).toEqual(new Set(['qkv', 'o', 'gate_up', 'down']));
  for (const c of result.cases) {
    expect(c.size_ok).toBe(true);
    expect(c.max_diff).toBeLessThan(1e-12);
  }
  expect(result.ok).toBe(true);
}, 120_000);
