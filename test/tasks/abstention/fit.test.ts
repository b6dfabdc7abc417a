/** The abstention threshold's fit (src/tasks/abstention/fit.ts): the exact scan, and the rule that keeps a threshold. */
import { bestThreshold, fitThreshold, ThresholdData } from '../../../src/tasks/abstention/fit';
import { uniformStream } from '../../../src/common/prng';

/** Beta(a, b) for integers a, b: the a-th smallest of a + b - 1 uniforms. */
function beta(u: () => number, a: number, b: number): number {
  return Array.from({ length: a + b - 1 }, u).sort((x, y) => x - y)[a - 1];
}

/** n examples, half unanswerable; `score(answerable)` draws u; answerable ones right with probability 0.9; default rule u > `defaultAt`. */
function data(n: number, seed: number, score: (u: () => number, answerable: boolean) => number, defaultAt = 0.9): ThresholdData {
  const u = uniformStream(seed);
  const d = { u: new Float64Array(n), answerable: new Uint8Array(n), right: new Uint8Array(n), byDefault: new Uint8Array(n) };
  for (let i = 0; i < n; i++) {
    const answerable = i % 2 === 0;
    d.answerable[i] = answerable ? 1 : 0;
    d.right[i] = answerable && u() < 0.9 ? 1 : 0;
    d.u[i] = score(u, answerable);
    d.byDefault[i] = d.u[i] > defaultAt ? 1 : 0;
  }
  return d;
}

const accuracyAt = (d: ThresholdData, tau: number) => d.u.reduce((s, v, i) => s + (v > tau ? 1 - d.answerable[i] : d.answerable[i] & d.right[i]), 0) / d.u.length;

test('the scan finds the exact optimum: every split of the sorted scores tried by brute force, ties of scores never split', () => {
  for (let seed = 1; seed <= 30; seed++) {
    // Scores rounded to tenths: many exact ties.
    const d = data(40 + seed, seed, (u, a) => Math.round((a ? beta(u, 2, 4) : beta(u, 4, 2)) * 10) / 10);
    const rows = Array.from({ length: d.u.length }, (_, i) => i);
    const tau = bestThreshold(d, rows);
    const candidates = [0, ...[...new Set(d.u)].sort((a, b) => a - b)].flatMap((v, i, all) => (i + 1 < all.length ? [(v + all[i + 1]) / 2] : [1]));
    const best = Math.max(...candidates.map((c) => accuracyAt(d, c)));
    expect(accuracyAt(d, tau)).toBe(best);
    expect(d.u.every((v) => v !== tau)).toBe(true);
    // Among thresholds as accurate, the one answering the most.
    const coverage = (t: number) => d.u.filter((v) => v <= t).length;
    for (const c of candidates) if (accuracyAt(d, c) === best) expect(coverage(tau)).toBeGreaterThanOrEqual(coverage(c));
  }
});

test('separating scores (Beta(2,5) answerable, Beta(5,2) unanswerable) give a justified threshold', () => {
  const d = data(200, 7, (u, a) => (a ? beta(u, 2, 5) : beta(u, 5, 2)));
  const r = fitThreshold('beta', d);
  expect(r.applied).toBe(true);
  expect(r.reason).toBeUndefined();
  expect(r.fitted_threshold).toBeGreaterThan(0.3);
  expect(r.fitted_threshold).toBeLessThan(0.7);
  expect(r.evidence!.vs_never.t).toBeGreaterThanOrEqual(2);
  expect(r.evidence!.vs_default.t).toBeGreaterThanOrEqual(2);
  expect(r.evidence!.vs_default.folds).toBe(15);
  expect(r.cross_validated!.threshold.accuracy).toBeGreaterThan(r.cross_validated!.default.accuracy + 0.1);
  expect(r.in_sample.never).toEqual({ accuracy: 0.5 * (d.right.reduce((s, v) => s + v, 0) / 100), coverage: 1, selective_accuracy: expect.any(Number) });
  expect(r.in_sample.threshold.accuracy).toBeCloseTo(accuracyAt(d, r.fitted_threshold), 12);
  expect(r).toMatchObject({ n: 200, answerable: 100, unanswerable: 100 });
});

test('scores independent of answerability: not justified, in 20 seeds out of 20', () => {
  for (let seed = 1; seed <= 20; seed++) {
    const r = fitThreshold(`null-${seed}`, data(120, seed, (u) => u()));
    expect(r.applied).toBe(false);
    expect(r.reason).toMatch(/^not justified: /);
  }
});

test('a default rule as good as any threshold: not justified over the default rule', () => {
  // Perfectly separated at 0.5, and the default rule abstains exactly above 0.5.
  const r = fitThreshold('default-optimal', data(120, 3, (u, a) => (a ? 0.5 * u() : 0.5 + 0.5 * u()), 0.5));
  expect(r.applied).toBe(false);
  expect(r.reason).toMatch(/over the default rule/);
  expect(r.evidence!.vs_never.gain).toBeGreaterThan(0.3);
});

test('fewer than 10 unanswerable or answerable examples: not justified, with the count', () => {
  const d = data(60, 5, (u, a) => (a ? beta(u, 2, 5) : beta(u, 5, 2)));
  const nine = { u: d.u.slice(0, 18), answerable: d.answerable.slice(0, 18), right: d.right.slice(0, 18), byDefault: d.byDefault.slice(0, 18) };
  const r = fitThreshold('few', nine);
  expect(r.applied).toBe(false);
  expect(r.reason).toBe('not justified: fewer than 10 answerable (9) examples');
  expect(r.evidence).toBeUndefined();
});
