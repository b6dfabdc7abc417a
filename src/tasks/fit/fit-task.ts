/**
 * Fitting one task from its examples' readouts, on evidence (docs/tasks.md):
 *   1. calibration, evaluated by stratified 5-fold CV repeated 3 times against the baseline;
 *   2. for 10 or more options, the intent head (residual on the calibrated readout, or
 *      alone), evaluated by stratified 5-fold CV against what step 1 applies;
 * each hyper-parameter (the biases' L2, the head's form and L2) chosen inside each outer
 * training fold by an inner 3-fold CV with the one-standard-error rule (the most regularised
 * candidate within one SE of the best). Folds are seeded from the task id: deterministic.
 */
import { hashString } from '../../common/prng';
import { Calibration, calibratedLogits, fitCalibration } from './calibration';
import { evidenceOf, MARGIN, Metrics, metricsOf, refusal, splitFold, stratifiedFolds } from './evidence';
import { explainedParts } from './part-reasons';
import { FitInput, FitOutput, PartRecord } from './record';
import { fitHeadPath, fitProjection, foldHead, HeadData, HeadForm, headLogits, project, Projection } from './head';
import { Readouts, softmaxInto, subset } from './softmax-model';

export const OUTER_FOLDS = 5, CALIBRATION_REPEATS = 3, HEAD_REPEATS = 1, INNER_FOLDS = 3;
export const HEAD_MIN_OPTIONS = 10;
const BIAS_LAMBDAS: (number | null)[] = [null, 0.1, 0.01, 0.001]; // simplest first
const HEAD_LAMBDAS = [1, 0.1, 0.01, 0.001]; // most regularised first
const HEAD_FORMS: HeadForm[] = ['residual', 'replace'];
/** L-BFGS iterations per lambda when the inner CV ranks the head's candidates (the final fit takes up to 300). */
const INNER_ITERATIONS = 100;

/** Row-major distributions of the rows under a model giving logits. */
function distributions(rows: number, C: number, logits: (i: number, z: Float64Array) => void): Float64Array {
  const p = new Float64Array(rows * C), z = new Float64Array(C), q = new Float64Array(C);
  for (let i = 0; i < rows; i++) {
    logits(i, z);
    softmaxInto(z, q);
    p.set(q, i * C);
  }
  return p;
}

const calibrated = (r: Readouts, cal: Calibration) => distributions(r.n, r.C, (i, z) => calibratedLogits(r, i, cal, z));
const baseline = (r: Readouts) => distributions(r.n, r.C, (i, z) => z.set(r.logp.subarray(i * r.C, (i + 1) * r.C)));

function meanSe(v: number[]) {
  const mean = v.reduce((s, x) => s + x, 0) / v.length;
  const sd = Math.sqrt(v.reduce((s, x) => s + (x - mean) ** 2, 0) / Math.max(1, v.length - 1));
  return { mean, se: sd / Math.sqrt(v.length) };
}

/** Index of the chosen candidate: the first (most regularised) within one SE of the best mean loss. */
function oneSe(losses: number[][]): number {
  const stats = losses.map(meanSe);
  const best = stats.reduce((b, s, i) => (s.mean < stats[b].mean ? i : b), 0);
  return stats.findIndex((s) => s.mean <= stats[best].mean + stats[best].se);
}

function chooseCalibration(train: Readouts, seed: number): Calibration {
  const folds = stratifiedFolds(train.y, train.C, INNER_FOLDS, seed);
  const losses = BIAS_LAMBDAS.map(() => [] as number[]);
  for (let k = 0; k < INNER_FOLDS; k++) {
    const { train: tr, test } = splitFold(folds, k);
    if (!test.length || !tr.length) continue;
    const a = subset(train, tr), b = subset(train, test);
    BIAS_LAMBDAS.forEach((lambda, c) => losses[c].push(metricsOf(calibrated(b, fitCalibration(a, lambda)), b.y, b.C).nll));
  }
  return fitCalibration(train, BIAS_LAMBDAS[losses[0].length ? oneSe(losses) : 0]);
}

function headData(x: Float64Array, r: number, rows: number[], readouts: Readouts, cal: Calibration, form: HeadForm): HeadData {
  const part = subset(readouts, rows);
  const features = new Float64Array(rows.length * r);
  rows.forEach((row, i) => features.set(x.subarray(row * r, (row + 1) * r), i * r));
  let offset: Float64Array | null = null;
  if (form === 'residual') {
    offset = new Float64Array(rows.length * part.C);
    const z = new Float64Array(part.C);
    for (let i = 0; i < part.n; i++) {
      calibratedLogits(part, i, cal, z);
      offset.set(z, i * part.C);
    }
  }
  return { n: rows.length, C: part.C, r, x: features, offset, y: part.y };
}

const headDistributions = (d: HeadData, w: Float64Array) => distributions(d.n, d.C, (i, z) => headLogits(d, w, i, z));

/** The head's form and L2 by inner CV on `rows`, then its fit on them all. */
function chooseHead(x: Float64Array, r: number, rows: number[], readouts: Readouts, cal: Calibration, seed: number) {
  const y = Int32Array.from(rows, (row) => readouts.y[row]);
  const folds = stratifiedFolds(y, readouts.C, INNER_FOLDS, seed);
  const candidates = HEAD_FORMS.flatMap((form) => HEAD_LAMBDAS.map((lambda, li) => ({ form, lambda, li })));
  const losses = candidates.map(() => [] as number[]);
  for (let k = 0; k < INNER_FOLDS; k++) {
    const { train, test } = splitFold(folds, k);
    HEAD_FORMS.forEach((form) => {
      const path = fitHeadPath(headData(x, r, train.map((i) => rows[i]), readouts, cal, form), HEAD_LAMBDAS, INNER_ITERATIONS);
      const held = headData(x, r, test.map((i) => rows[i]), readouts, cal, form);
      path.forEach((w, li) => losses[candidates.findIndex((c) => c.form === form && c.li === li)].push(metricsOf(headDistributions(held, w), held.y, held.C).nll));
    });
  }
  const chosen = candidates[oneSe(losses)];
  const data = headData(x, r, rows, readouts, cal, chosen.form);
  const w = fitHeadPath(data, HEAD_LAMBDAS.slice(0, chosen.li + 1))[chosen.li];
  return { ...chosen, w };
}

/** Metrics averaged over repeats of out-of-fold predictions. */
function averageMetrics(ms: Metrics[]): Metrics {
  const avg = (f: (m: Metrics) => number) => ms.reduce((s, m) => s + f(m), 0) / ms.length;
  return { nll: avg((m) => m.nll), accuracy: avg((m) => m.accuracy), brier: avg((m) => m.brier), ece: avg((m) => m.ece) };
}

/** Step 1: calibration against the baseline, cross-validated; then fitted on every example. */
function calibrationStep(all: Readouts, seed: number) {
  const { n, C } = all;
  const cal = { nllGain: [] as number[], accuracyChange: [] as number[], testTrainRatio: 1 / (OUTER_FOLDS - 1) };
  const oofBase: Metrics[] = [], oofCal: Metrics[] = [];
  for (let rep = 0; rep < CALIBRATION_REPEATS; rep++) {
    const folds = stratifiedFolds(all.y, C, OUTER_FOLDS, seed + rep);
    const pBase = baseline(all), pCal = new Float64Array(n * C);
    for (let k = 0; k < OUTER_FOLDS; k++) {
      const { train, test } = splitFold(folds, k);
      const testSet = subset(all, test);
      const p = calibrated(testSet, chooseCalibration(subset(all, train), seed + 1000 * rep + k));
      test.forEach((row, i) => pCal.set(p.subarray(i * C, (i + 1) * C), row * C));
      const b = metricsOf(baseline(testSet), testSet.y, C), c = metricsOf(p, testSet.y, C);
      cal.nllGain.push(b.nll - c.nll);
      cal.accuracyChange.push(c.accuracy - b.accuracy);
    }
    oofBase.push(metricsOf(pBase, all.y, C));
    oofCal.push(metricsOf(pCal, all.y, C));
  }
  const evidence = evidenceOf(cal);
  const reason = refusal(evidence, MARGIN.calibration);
  const calibration = chooseCalibration(all, seed + 999_999);
  const part: PartRecord = {
    fitted: true,
    applied: !reason,
    ...(reason ? { reason } : {}),
    evidence: { ...evidence, against: 'baseline' },
    hyper: { a: calibration.a, bias_lambda: calibration.lambda },
  };
  const metrics: FitOutput['record']['metrics'] = { baseline: averageMetrics(oofBase), calibration: averageMetrics(oofCal), applied: averageMetrics(reason ? oofBase : oofCal) };
  return { calibration, part, metrics, reason };
}

/** Step 2: the intent head against what step 1 applies (`calReason`: the calibration was refused), cross-validated; then fitted on every example. */
function headStep(input: FitInput, seed: number, calibration: Calibration, calReason: string | undefined) {
  const all = input.readouts;
  const { n, C } = all;
  const { d, data } = input.hidden!;
  const projection: Projection = fitProjection(data, n, d, seed);
  const x = project(projection, data, Array.from({ length: n }, (_, i) => i));
  const comparison = { nllGain: [] as number[], accuracyChange: [] as number[], testTrainRatio: 1 / (OUTER_FOLDS - 1) };
  const oofHead: Metrics[] = [];
  for (let rep = 0; rep < HEAD_REPEATS; rep++) {
    const folds = stratifiedFolds(all.y, C, OUTER_FOLDS, seed + 77 + rep);
    const pHead = new Float64Array(n * C);
    for (let k = 0; k < OUTER_FOLDS; k++) {
      const { train, test } = splitFold(folds, k);
      const testSet = subset(all, test);
      const foldCal = chooseCalibration(subset(all, train), seed + 5000 + k);
      const reference = calReason ? baseline(testSet) : calibrated(testSet, foldCal);
      const chosen = chooseHead(x, projection.r, train, all, foldCal, seed + 7000 + k);
      const p = headDistributions(headData(x, projection.r, test, all, foldCal, chosen.form), chosen.w);
      test.forEach((row, i) => pHead.set(p.subarray(i * C, (i + 1) * C), row * C));
      const ref = metricsOf(reference, testSet.y, C), h = metricsOf(p, testSet.y, C);
      comparison.nllGain.push(ref.nll - h.nll);
      comparison.accuracyChange.push(h.accuracy - ref.accuracy);
    }
    oofHead.push(metricsOf(pHead, all.y, C));
  }
  const evidence = evidenceOf(comparison);
  const reason = refusal(evidence, MARGIN.head);
  const final = chooseHead(x, projection.r, Array.from({ length: n }, (_, i) => i), all, calibration, seed + 9999);
  const head: FitOutput['head'] = { form: final.form, lambda: final.lambda, d, ...foldHead(projection, final.w, C) };
  const part: PartRecord = {
    fitted: true,
    applied: !reason,
    ...(reason ? { reason } : {}),
    evidence: { ...evidence, against: calReason ? 'baseline' : 'calibration' },
    hyper: { form: final.form, lambda: final.lambda, hidden_size: d, components: projection.r, standardised: true, pca: projection.r < d },
  };
  return { head, part, metrics: averageMetrics(oofHead), reason };
}

export function fitTask(input: FitInput): FitOutput {
  const t0 = performance.now();
  const { readouts: all, keys } = input;
  const seed = hashString(0x7a5c, input.id);
  const counts = new Array(all.C).fill(0);
  for (let i = 0; i < all.n; i++) counts[all.y[i]]++;
  const cal = calibrationStep(all, seed);
  const metrics = cal.metrics;
  let head: FitOutput['head'] = null;
  let headPart: PartRecord;
  const notFitted = headRefusal(input, counts);
  if (notFitted) headPart = { fitted: false, applied: false, reason: notFitted };
  else {
    const h = headStep(input, seed, cal.calibration, cal.reason);
    ({ head, part: headPart } = h);
    metrics.head = h.metrics;
    if (!h.reason) metrics.applied = metrics.head;
  }
  const applied = headPart.applied ? 'head' : cal.part.applied ? 'calibration' : 'none';
  const record = {
    n: all.n,
    counts: Object.fromEntries(keys.map((k, j) => [k, counts[j]])),
    folds: { outer: OUTER_FOLDS, calibration_repeats: CALIBRATION_REPEATS, head_repeats: HEAD_REPEATS, inner: INNER_FOLDS, seed },
    calibration: cal.part,
    head: headPart,
    metrics,
    fit_ms: performance.now() - t0,
  };
  return { calibration: cal.calibration, head, applied, record: explainedParts(record, applied, head?.form) };
}

function headRefusal(input: FitInput, counts: number[]): string | undefined {
  const C = input.keys.length;
  if (C < HEAD_MIN_OPTIONS) return `fewer than ${HEAD_MIN_OPTIONS} options (${C})`;
  if (!input.hidden) return 'no hidden states';
  if (input.readouts.n < 2 * C) return `too few examples: ${input.readouts.n} < 2 per option (${2 * C})`;
  if (counts.filter((c) => c >= 3).length < 2) return 'too few examples per option: fewer than 2 options with 3 or more';
  return undefined;
}
