/** The task fitting's numerics (src/tasks/fit/): gradients, optimisers, a known temperature, the acceptance rule. */
import { calibrationObjective, fitCalibration } from '../../src/tasks/fit/calibration';
import { evidenceOf, refusal, stratifiedFolds } from '../../src/tasks/fit/evidence';
import { fitTask } from '../../src/tasks/fit/fit-task';
import { fitProjection, headObjective, project, symmetricEigen } from '../../src/tasks/fit/head';
import { Readouts } from '../../src/tasks/fit/softmax-model';
import { uniformStream } from '../../src/common/prng';

function normal(u: () => number) {
  return Math.sqrt(-2 * Math.log(u())) * Math.cos(2 * Math.PI * u());
}

/** n rows of C log-softmaxed logits `scale * g` (g standard normal); labels drawn from softmax(g) (or `label`). */
function synthetic(n: number, C: number, seed: number, scale: number, label?: (i: number, u: () => number) => number): Readouts {
  const u = uniformStream(seed);
  const logp = new Float64Array(n * C), y = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const g = Array.from({ length: C }, () => normal(u));
    const m = Math.max(...g);
    const e = g.map((v) => Math.exp(v - m)), s = e.reduce((a, b) => a + b, 0);
    let r = u() * s, pick = 0;
    while (pick < C - 1 && (r -= e[pick]) > 0) pick++;
    y[i] = label ? label(i, u) : pick;
    const z = g.map((v) => v * scale), zm = Math.max(...z), lse = zm + Math.log(z.reduce((a, v) => a + Math.exp(v - zm), 0));
    z.forEach((v, j) => (logp[i * C + j] = v - lse));
  }
  return { n, C, logp, y };
}

function finiteDifferenceError(f: (x: Float64Array, g: Float64Array) => number, x: Float64Array): number {
  const g = new Float64Array(x.length);
  f(x, g);
  let worst = 0;
  for (let k = 0; k < x.length; k++) {
    const h = 1e-6, xp = Float64Array.from(x), xm = Float64Array.from(x);
    xp[k] += h;
    xm[k] -= h;
    const fd = (f(xp, new Float64Array(x.length)) - f(xm, new Float64Array(x.length))) / (2 * h);
    worst = Math.max(worst, Math.abs(fd - g[k]));
  }
  return worst;
}

describe('task fitting', () => {
  test('the calibration and head gradients pass a finite-difference check, and the Hessian matches the gradient', () => {
    const r = synthetic(60, 5, 1, 1);
    const { f, hessian, size } = calibrationObjective(r, 0.05);
    const u = uniformStream(3);
    const x = Float64Array.from({ length: size }, () => u() - 0.5);
    expect(finiteDifferenceError(f, x)).toBeLessThan(1e-7);
    // Hessian column k against the gradient's finite difference in x_k.
    const H = hessian(x);
    for (let k = 0; k < size; k++) {
      const gp = new Float64Array(size), gm = new Float64Array(size), xp = Float64Array.from(x), xm = Float64Array.from(x);
      xp[k] += 1e-6;
      xm[k] -= 1e-6;
      f(xp, gp);
      f(xm, gm);
      for (let j = 0; j < size; j++) expect(Math.abs((gp[j] - gm[j]) / 2e-6 - H[j * size + k])).toBeLessThan(1e-6);
    }
    const C = 4, rdim = 3, n = 20;
    const data = { n, C, r: rdim, x: Float64Array.from({ length: n * rdim }, () => normal(u)), offset: Float64Array.from({ length: n * C }, () => normal(u)), y: Int32Array.from({ length: n }, (_, i) => i % C) };
    const w = Float64Array.from({ length: C * (rdim + 1) }, () => u() - 0.5);
    expect(finiteDifferenceError(headObjective(data, 0.1), w)).toBeLessThan(1e-7);
    expect(finiteDifferenceError(headObjective({ ...data, offset: null }, 0.1), w)).toBeLessThan(1e-7);
  });

  test('a known temperature is recovered: readout logits 3x too sharp give a within 10% of 1/3', () => {
    const r = synthetic(3000, 6, 7, 3);
    const cal = fitCalibration(r, null);
    expect(Math.abs(cal.a - 1 / 3) / (1 / 3)).toBeLessThan(0.1);
  });

  test('Newton and L-BFGS reach the same calibration', () => {
    const r = synthetic(400, 8, 11, 2, (i, u) => (u() < 0.5 ? 0 : Math.floor(u() * 8)));
    for (const lambda of [null, 0.01]) {
      const a = fitCalibration(r, lambda, 'newton'), b = fitCalibration(r, lambda, 'lbfgs');
      expect(Math.abs(a.a - b.a)).toBeLessThan(1e-5);
      a.b.forEach((v, j) => expect(Math.abs(v - b.b[j])).toBeLessThan(1e-5));
    }
  });

  test('the acceptance rule: margin, corrected t and accuracy', () => {
    const ratio = 1 / 4;
    const steady = { nllGain: [0.05, 0.06, 0.04, 0.05, 0.055], accuracyChange: [0, 0, 0, 0, 0], testTrainRatio: ratio };
    expect(refusal(evidenceOf(steady), 0.005)).toBeUndefined();
    expect(refusal(evidenceOf(steady), 0.1)).toMatch(/no cross-validated gain of at least 0.1/);
    const noisy = { nllGain: [0.2, -0.15, 0.1, -0.1, 0.05], accuracyChange: [0, 0, 0, 0, 0], testTrainRatio: ratio };
    const e = evidenceOf(noisy);
    expect(e.t).toBeLessThan(2);
    expect(refusal(e, 0.005)).toMatch(/not significant/);
    // The corrected t is smaller than the naive one by sqrt((1/J + ratio) / (1/J)).
    const naive = e.gain / Math.sqrt(noisy.nllGain.reduce((s, v) => s + (v - e.gain) ** 2, 0) / 4 / 5);
    expect(e.t).toBeCloseTo(naive / Math.sqrt((1 / 5 + ratio) * 5), 10);
    const worse = { ...steady, accuracyChange: [-0.05, -0.06, -0.04, -0.05, -0.05] };
    expect(refusal(evidenceOf(worse), 0.005)).toMatch(/accuracy falls/);
  });

  test('stratified folds are seeded, balanced and keep each class spread', () => {
    const y = Int32Array.from({ length: 103 }, (_, i) => (i < 70 ? 0 : i < 90 ? 1 : 2));
    const a = stratifiedFolds(y, 3, 5, 42), b = stratifiedFolds(y, 3, 5, 42), c = stratifiedFolds(y, 3, 5, 43);
    expect(Array.from(a)).toEqual(Array.from(b));
    expect(Array.from(a)).not.toEqual(Array.from(c));
    const sizes = [0, 1, 2, 3, 4].map((k) => a.filter((f) => f === k).length);
    expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1);
    for (const cls of [0, 1, 2]) {
      const per = [0, 1, 2, 3, 4].map((k) => a.filter((f, i) => f === k && y[i] === cls).length);
      expect(Math.max(...per) - Math.min(...per)).toBeLessThanOrEqual(1);
    }
  });

  test('PCA: the eigen-decomposition reconstructs, and whitened components have unit variance', () => {
    const A = Float64Array.from([4, 1, 0.5, 1, 3, 0.2, 0.5, 0.2, 1]);
    const { values, vectors } = symmetricEigen(A, 3);
    for (let i = 0; i < 3; i++)
      for (let j = 0; j < 3; j++) {
        let v = 0;
        for (let k = 0; k < 3; k++) v += vectors[i * 3 + k] * values[k] * vectors[j * 3 + k];
        expect(v).toBeCloseTo(A[i * 3 + j], 10);
      }
    const u = uniformStream(5), n = 300, d = 100;
    const h = Float64Array.from({ length: n * d }, (_, i) => normal(u) * (1 + (i % d) / 10));
    const p = fitProjection(h, n, d, 9);
    expect(p.r).toBe(64);
    const x = project(p, h, Array.from({ length: n }, (_, i) => i));
    for (const j of [0, 10, 63]) {
      let s = 0;
      for (let i = 0; i < n; i++) s += x[i * p.r + j] ** 2;
      expect(s / n).toBeCloseTo(1, 6);
    }
  });

  test('a class prior independent of the text: calibration kept; random labels: nothing kept', () => {
    const prior = synthetic(200, 4, 21, 1, (i, u) => { const v = u(); return v < 0.7 ? 0 : v < 0.8 ? 1 : v < 0.9 ? 2 : 3; });
    const fit = fitTask({ id: 'prior', keys: ['a', 'b', 'c', 'd'], readouts: prior });
    expect(fit.record.calibration.applied).toBe(true);
    expect(fit.applied).toBe('calibration');
    expect(fit.record.metrics.calibration.nll).toBeLessThan(0.99);
    expect(fit.record.head.reason).toMatch(/fewer than 10 options/);
    const random = synthetic(200, 4, 22, 0.2, (i, u) => Math.floor(u() * 4));
    const none = fitTask({ id: 'random', keys: ['a', 'b', 'c', 'd'], readouts: random });
    expect(none.applied).toBe('none');
    expect(none.record.calibration.reason).toBeDefined();
  });
});
