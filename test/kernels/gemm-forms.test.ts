/**
 * The forms a layer's GEMM can take on few rows (rows padded, a -0.0 bias, the transposed problem, a batch over the
 * output's columns), among which the batch-invariant CUDA engine takes the fastest that keeps a cold state's bits
 * (csrc/kernels/aten/few_rows_gemm.h), and which bench/gpu/gemm_probe.py times with torch alone. On the CPU: each form
 * is the product, in the engine (test/native/gemm_forms_check.cpp) and in the probe; and the engine's choice, with a
 * stand-in clock, takes the form the clock makes fastest, measures once per shape and row bucket, and answers with the
 * cold state's bits. Our own kernel's forms (one a tiling, the engine's ownGemm) apply to the shapes each takes alone,
 * and where their call fails (on the CPU: always, they are a CUDA kernel's) they are no candidates. The GPU's clock, cuBLAS's bits
 * and our kernel's are the window's to measure (its profile and invariance steps, tq_cli gemm-rows).
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { runLinkedCheck, scratchDir } from '../helpers/linked-check';
import { debianPython, pythonEnv } from '../helpers/models';

const root = path.resolve(__dirname, '..', '..');
const scratch = scratchDir();
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

test('the engine\'s few-row GEMM: every form is the product, and the choice takes the fastest form that keeps the cold bits', async () => {
  const lines = await runLinkedCheck('gemm_forms_check', scratch);
  const forms = lines.find((l) => l.check === 'forms');
  expect(forms.cases).toBeGreaterThanOrEqual(30);
  expect(forms.max_diff).toBeLessThan(1e-12);
  expect(lines.find((l) => l.check === 'choice')).toEqual({ check: 'choice', fastest: true, skips_other_bits: true, linear_when_none: true });
  expect(lines.find((l) => l.check === 'own_applies')).toEqual({ check: 'own_applies', forms: 4, takes: true, refuses: true, widths: true });
  const measured = lines.filter((l) => l.check === 'measured' && !l.own_kernel);
  expect(measured.map((m) => m.cheapest).sort()).toEqual(['bias_neg0', 'cols32', 'cols64', 'cols8', 'linear', 'pad128', 'pad256', 'swapped']);
  for (const m of measured) {
    // One shape and one row bucket under kFewRows (24, 32 and 17 rows), each form timed once; 300 rows left to at::linear;
    // one row, a bucket of its own.
    expect(m).toMatchObject({ choices: 1, trials: 8, timings: 8, chose_right: true, same_as_cold: true, choices_with_one_row: 2 });
  }
  // On this CPU every form kept the bits: the clock's cheapest was taken each time.
  expect(measured.filter((m) => m.cheapest_kept_bits).every((m) => m.chosen === m.cheapest)).toBe(true);
  // Our kernel asked for: its calls fail on a CPU tensor, so its forms have no trial and cuBLAS's answer, with the cold bits.
  const own = lines.filter((l) => l.check === 'measured' && l.own_kernel);
  expect(own.map((m) => m.cheapest).sort()).toEqual(['own_16x16', 'own_16x8', 'own_32x16', 'own_32x8']);
  for (const m of own) {
    expect(m).toMatchObject({ choices: 1, trials: 8, timings: 8, cheapest_kept_bits: false, chose_right: true, same_as_cold: true });
    expect(m.chosen).not.toMatch(/^own/);
  }
}, 300_000);

test("gemm_probe.py's forms are F.linear's product on every shape and row count", () => {
  const out = execFileSync(debianPython, [path.join(root, 'bench', 'gpu', 'gemm_probe.py'), '--cpu-check'], { encoding: 'utf8', env: pythonEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  const result = JSON.parse(out) as { cases: { shape: string; rows: number; form: string; size_ok: boolean; max_diff: number }[]; ok: boolean };
  const forms = new Set(result.cases.map((c) => c.form));
  expect([...forms].sort()).toEqual(['bias_neg0', 'cols16', 'cols32', 'cols4', 'cols64', 'cols8', 'linear', 'pad128', 'pad256', 'swapped']);
  expect(new Set(result.cases.map((c) => c.shape))).toEqual(new Set(['qkv', 'o', 'gate_up', 'down']));
  for (const c of result.cases) {
    expect(c.size_ok).toBe(true);
    expect(c.max_diff).toBeLessThan(1e-12);
  }
  expect(result.ok).toBe(true);
}, 120_000);
