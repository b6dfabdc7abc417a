/**
 * Cross-validated evidence: seeded stratified folds, the metrics of a set of predicted
 * distributions, and the rule that keeps a fitted part.
 *
 * The rule (docs/tasks.md): a part is kept only when, over the outer folds (J = K x R),
 *   - its mean out-of-fold NLL gain over what is applied without it is at least `margin`
 *     (0.005 nats per example for a calibration, 0.02 for an intent head);
 *   - the corrected resampled t-statistic (Nadeau & Bengio 2003) of that gain,
 *     t = mean / sqrt((1/J + n_test/n_train) * var), is at least 2;
 *   - its mean accuracy change is not below minus one (equally corrected) standard error.
 * NLL decides, being strictly proper; Brier and ECE are reported only.
 */
import { uniformStream } from '../../common/prng';

/** Fold index of each row: each class's rows shuffled (seeded), then dealt round the folds. */
export function stratifiedFolds(y: Int32Array, classes: number, K: number, seed: number): Int32Array {
  const uniform = uniformStream(seed);
  const fold = new Int32Array(y.length);
  let next = 0;
  for (let c = 0; c < classes; c++) {
    const rows: number[] = [];
    y.forEach((v, i) => v === c && rows.push(i));
    for (let i = rows.length - 1; i > 0; i--) {
      const j = Math.floor(uniform() * (i + 1));
      [rows[i], rows[j]] = [rows[j], rows[i]];
    }
    // Continuing the deal where the last class stopped keeps the folds' sizes within one.
    for (const row of rows) fold[row] = next++ % K;
  }
  return fold;
}

export function splitFold(fold: Int32Array, k: number): { train: number[]; test: number[] } {
  const train: number[] = [], test: number[] = [];
  fold.forEach((f, i) => (f === k ? test : train).push(i));
  return { train, test };
}

export interface Metrics {
  nll: number;
  accuracy: number;
  brier: number;
  /** Expected calibration error of the top probability, 15 equal-mass bins. */
  ece: number;
}

/** Metrics of n predicted distributions (row-major n x C) against labels y. */
export function metricsOf(p: Float64Array, y: Int32Array, C: number): Metrics {
  const n = y.length;
  let nll = 0, correct = 0, brier = 0;
  const tops: { conf: number; right: boolean }[] = [];
  for (let i = 0; i < n; i++) {
    let best = 0;
    for (let j = 0; j < C; j++) {
      const v = p[i * C + j];
      if (v > p[i * C + best]) best = j;
      brier += (v - (j === y[i] ? 1 : 0)) ** 2;
    }
    nll -= Math.log(Math.max(p[i * C + y[i]], 1e-300));
    correct += best === y[i] ? 1 : 0;
    tops.push({ conf: p[i * C + best], right: best === y[i] });
  }
  tops.sort((a, b) => a.conf - b.conf);
  const bins = Math.min(15, n);
  let ece = 0;
  for (let b = 0; b < bins; b++) {
    const part = tops.slice(Math.floor((b * n) / bins), Math.floor(((b + 1) * n) / bins));
    if (!part.length) continue;
    const conf = part.reduce((s, t) => s + t.conf, 0) / part.length, acc = part.filter((t) => t.right).length / part.length;
    ece += (part.length / n) * Math.abs(conf - acc);
  }
  return { nll: nll / n, accuracy: correct / n, brier: brier / n, ece };
}

export interface FoldComparison {
  /** Per outer fold: NLL of the reference minus NLL of the candidate (positive: the candidate is better). */
  nllGain: number[];
  /** Per outer fold: accuracy of the candidate minus the reference's. */
  accuracyChange: number[];
  /** Test rows over training rows of a fold, (K-1)^-1 for K folds. */
  testTrainRatio: number;
}

export interface Evidence {
  gain: number;
  se: number;
  t: number;
  accuracyChange: number;
  accuracySe: number;
  folds: number;
}

/** The mean of per-fold values and its standard error corrected for overlapping training sets (Nadeau & Bengio). */
export function correctedMeanSe(values: number[], ratio: number): { mean: number; se: number } {
  const J = values.length;
  const mean = values.reduce((s, v) => s + v, 0) / J;
  const variance = J > 1 ? values.reduce((s, v) => s + (v - mean) ** 2, 0) / (J - 1) : 0;
  return { mean, se: Math.sqrt((1 / J + ratio) * variance) };
}

/** mean / se; with no spread, Infinity for a positive mean and 0 otherwise. */
export function tStatistic(mean: number, se: number): number {
  return se > 0 ? mean / se : mean > 0 ? Infinity : 0;
}

export function evidenceOf(c: FoldComparison): Evidence {
  const nll = correctedMeanSe(c.nllGain, c.testTrainRatio), acc = correctedMeanSe(c.accuracyChange, c.testTrainRatio);
  const t = tStatistic(nll.mean, nll.se);
  return { gain: nll.mean, se: nll.se, t, accuracyChange: acc.mean, accuracySe: acc.se, folds: c.nllGain.length };
}

export const MARGIN = { calibration: 0.005, head: 0.02 };
export const MIN_T = 2;

/** The rule above: undefined when the part is kept, else the reason it is not. */
export function refusal(e: Evidence, margin: number): string | undefined {
  const gain = `ΔNLL ${fmt(-e.gain)} ± ${e.se.toFixed(4)} nats per example`;
  if (!(e.gain >= margin)) return `no cross-validated gain of at least ${margin}: ${gain}`;
  if (!(e.t >= MIN_T)) return `gain not significant: ${gain}, corrected t ${e.t.toFixed(2)} < ${MIN_T}`;
  if (e.accuracyChange < -e.accuracySe) return `accuracy falls by more than one standard error: ${fmt(e.accuracyChange)} ± ${e.accuracySe.toFixed(4)}`;
  return undefined;
}

export function fmt(x: number): string {
  return (x >= 0 ? '+' : '') + x.toFixed(4);
}
