/**
 * Fitting an abstention threshold from labelled examples (docs/abstention.md), in float64.
 *
 * Per example: u, the abstain option's probability in the distribution the server answers with
 * (tasks applied); whether it is answerable; whether the best other option is its label; and
 * whether the default rule (the abstain option the most probable) abstains on it. A rule is right
 * on an example when it abstains on an unanswerable one or answers an answerable one correctly.
 *
 * The threshold τ (abstain when u > τ) that maximises that accuracy is found exactly: sort by u,
 * then for each k the rule that answers the k lowest and abstains on the rest, with τ the midpoint
 * between the k-th and (k+1)-th scores (0 < τ below all of them, 1 for never); ties of accuracy go
 * to the larger coverage.
 *
 * It is kept only when justified: at least 10 unanswerable and 10 answerable examples, and, by
 * stratified 5-fold cross-validation repeated 3 times (τ fitted on each training part), a mean
 * accuracy gain of at least 0.01 over never abstaining and over the default rule, each with a
 * corrected resampled t-statistic (Nadeau & Bengio) of at least 2.
 */
import { hashString } from '../../common/prng';
import { correctedMeanSe, fmt, MIN_T, splitFold, stratifiedFolds, tStatistic } from '../fit/evidence';

export const THRESHOLD_RULE = { minEach: 10, margin: 0.01, minT: MIN_T, folds: 5, repeats: 3 };

export interface ThresholdData {
  u: Float64Array;
  answerable: Uint8Array;
  /** The best option other than the abstain option is the label (answerable examples only). */
  right: Uint8Array;
  byDefault: Uint8Array;
}

export interface RuleMetrics {
  /** Right answers and right abstentions over all examples. */
  accuracy: number;
  /** The share answered. */
  coverage: number;
  /** Right answers over those answered; null when none is. */
  selective_accuracy: number | null;
}

export interface GainEvidence {
  gain: number;
  se: number;
  t: number;
  folds: number;
}

export interface ThresholdRecord {
  n: number;
  answerable: number;
  unanswerable: number;
  /** The threshold fitted on all the examples, applied or not. */
  fitted_threshold: number;
  applied: boolean;
  reason?: string;
  evidence?: { vs_never: GainEvidence; vs_default: GainEvidence };
  /** Mean over the test parts of the folds (τ fitted on the training parts). */
  cross_validated?: { threshold: RuleMetrics; never: RuleMetrics; default: RuleMetrics };
  /** On all the examples, with the fitted threshold. */
  in_sample: { threshold: RuleMetrics; never: RuleMetrics; default: RuleMetrics };
  folds: { outer: number; repeats: number; seed: number };
  fit_ms: number;
}

type Rule = (i: number) => boolean; // abstains on example i

function metricsOf(d: ThresholdData, rows: number[], abstains: Rule): RuleMetrics {
  let correct = 0, answered = 0, rightAnswers = 0;
  for (const i of rows) {
    if (abstains(i)) correct += d.answerable[i] ? 0 : 1;
    else {
      answered++;
      const right = d.answerable[i] && d.right[i] ? 1 : 0;
      correct += right;
      rightAnswers += right;
    }
  }
  return { accuracy: correct / rows.length, coverage: answered / rows.length, selective_accuracy: answered ? rightAnswers / answered : null };
}

/** The exact accuracy-maximising threshold on `rows` (the module comment's scan). */
export function bestThreshold(d: ThresholdData, rows: number[]): number {
  const sorted = [...rows].sort((a, b) => d.u[a] - d.u[b]);
  const n = sorted.length;
  // Accuracy when the k lowest are answered: right answers among them plus unanswerables above them.
  let score = sorted.reduce((s, i) => s + (d.answerable[i] ? 0 : 1), 0); // k = 0: abstain on all
  let best = { score: d.u[sorted[0]] > 0 ? score : -1, threshold: d.u[sorted[0]] / 2 };
  for (let k = 1; k <= n; k++) {
    const i = sorted[k - 1];
    score += (d.answerable[i] && d.right[i] ? 1 : 0) - (d.answerable[i] ? 0 : 1);
    if (k < n && d.u[sorted[k]] === d.u[i]) continue; // equal scores cannot be split
    if (score >= best.score) best = { score, threshold: k === n ? 1 : (d.u[i] + d.u[sorted[k]]) / 2 };
  }
  return best.threshold;
}

const never: Rule = () => false;

function gainEvidence(values: number[], ratio: number): GainEvidence {
  const { mean, se } = correctedMeanSe(values, ratio);
  return { gain: mean, se, t: tStatistic(mean, se), folds: values.length };
}

function meanMetrics(list: RuleMetrics[]): RuleMetrics {
  const mean = (f: (m: RuleMetrics) => number | null) => {
    const v = list.map(f).filter((x): x is number => x !== null);
    return v.length ? v.reduce((s, x) => s + x, 0) / v.length : null;
  };
  return { accuracy: mean((m) => m.accuracy)!, coverage: mean((m) => m.coverage)!, selective_accuracy: mean((m) => m.selective_accuracy) };
}

function refusal(e: GainEvidence, against: string): string | undefined {
  const gain = `Δaccuracy ${fmt(e.gain)} ± ${e.se.toFixed(4)}`;
  if (!(e.gain >= THRESHOLD_RULE.margin)) return `not justified: no cross-validated accuracy gain of at least ${THRESHOLD_RULE.margin} over ${against}: ${gain}`;
  if (!(e.t >= THRESHOLD_RULE.minT)) return `not justified: the gain over ${against} is not significant: ${gain}, corrected t ${e.t.toFixed(2)} < ${THRESHOLD_RULE.minT}`;
  return undefined;
}

export function fitThreshold(id: string, d: ThresholdData): ThresholdRecord {
  const t0 = performance.now();
  const n = d.u.length;
  const all = Array.from({ length: n }, (_, i) => i);
  const answerable = d.answerable.reduce((s, v) => s + v, 0);
  const seed = hashString(0xab57, id);
  const { folds: K, repeats, minEach } = THRESHOLD_RULE;
  const byDefault: Rule = (i) => d.byDefault[i] === 1;
  const threshold = bestThreshold(d, all);
  const record: ThresholdRecord = {
    n,
    answerable,
    unanswerable: n - answerable,
    fitted_threshold: threshold,
    applied: false,
    in_sample: { threshold: metricsOf(d, all, (i) => d.u[i] > threshold), never: metricsOf(d, all, never), default: metricsOf(d, all, byDefault) },
    folds: { outer: K, repeats, seed },
    fit_ms: 0,
  };
  const few = answerable < minEach ? `answerable (${answerable})` : n - answerable < minEach ? `unanswerable (${n - answerable})` : undefined;
  if (few) return { ...record, reason: `not justified: fewer than ${minEach} ${few} examples`, fit_ms: performance.now() - t0 };

  const strata = Int32Array.from(d.answerable);
  const vsNever: number[] = [], vsDefault: number[] = [];
  const seen: { threshold: RuleMetrics; never: RuleMetrics; default: RuleMetrics }[] = [];
  for (let rep = 0; rep < repeats; rep++) {
    const fold = stratifiedFolds(strata, 2, K, seed + rep);
    for (let k = 0; k < K; k++) {
      const { train, test } = splitFold(fold, k);
      const tau = bestThreshold(d, train);
      const m = { threshold: metricsOf(d, test, (i) => d.u[i] > tau), never: metricsOf(d, test, never), default: metricsOf(d, test, byDefault) };
      seen.push(m);
      vsNever.push(m.threshold.accuracy - m.never.accuracy);
      vsDefault.push(m.threshold.accuracy - m.default.accuracy);
    }
  }
  const ratio = 1 / (K - 1);
  const evidence = { vs_never: gainEvidence(vsNever, ratio), vs_default: gainEvidence(vsDefault, ratio) };
  const reason = refusal(evidence.vs_never, 'never abstaining') ?? refusal(evidence.vs_default, 'the default rule');
  return {
    ...record,
    applied: !reason,
    ...(reason ? { reason } : {}),
    evidence,
    cross_validated: { threshold: meanMetrics(seen.map((m) => m.threshold)), never: meanMetrics(seen.map((m) => m.never)), default: meanMetrics(seen.map((m) => m.default)) },
    fit_ms: performance.now() - t0,
  };
}
