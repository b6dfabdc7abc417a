/**
 * Calibration of a question's readout: q = softmax(a * l + b), l the baseline's
 * log-probabilities (what the server answers without the task), one inverse temperature a
 * and one bias per option. a = 1, b = 0 is the baseline exactly. Options with fewer than
 * MIN_OWN_BIAS training examples share one tied bias, so an option seldom or never seen is
 * not pushed down on its own. Loss: mean NLL + (lambda/2)|b|^2 + 1e-4 (a - 1)^2, convex.
 * Newton (exact Hessian) up to NEWTON_MAX_PARAMS parameters, L-BFGS above.
 */
import { lbfgs, newton } from './optimize';
import { Readouts, softmaxInto } from './softmax-model';

export const MIN_OWN_BIAS = 3;
const A_PENALTY = 1e-4;
const NEWTON_MAX_PARAMS = 32;

export interface Calibration {
  a: number;
  /** Per option: its bias (a tied option carries the tied value; 0 without biases). */
  b: number[];
  /** The L2 weight on the biases; null: temperature only. */
  lambda: number | null;
}

/** Option -> bias parameter index (-1: no bias), from the training labels' counts. */
export function biasGroups(train: Readouts, withBias: boolean): { group: Int32Array; count: number } {
  const group = new Int32Array(train.C).fill(-1);
  if (!withBias) return { group, count: 0 };
  const counts = new Array(train.C).fill(0);
  for (let i = 0; i < train.n; i++) counts[train.y[i]]++;
  let count = 0;
  counts.forEach((c, j) => c >= MIN_OWN_BIAS && (group[j] = count++));
  if (counts.some((c) => c < MIN_OWN_BIAS)) {
    const tied = count++;
    counts.forEach((c, j) => c < MIN_OWN_BIAS && (group[j] = tied));
  }
  return { group, count };
}

/** Calibrated logits of row i into z. */
export function calibratedLogits(r: Readouts, i: number, cal: Calibration, z: Float64Array) {
  for (let j = 0; j < r.C; j++) z[j] = cal.a * r.logp[i * r.C + j] + cal.b[j];
}

/** The penalised loss in x = (a, one bias per group), its gradient and exact Hessian. */
export function calibrationObjective(train: Readouts, lambda: number | null) {
  const { n, C, logp, y } = train;
  const { group, count: G } = biasGroups(train, lambda !== null);
  const lam = lambda ?? 0;
  const P = 1 + G;
  const z = new Float64Array(C), p = new Float64Array(C);
  const f = (x: Float64Array, grad: Float64Array) => {
    grad.fill(0);
    let loss = 0;
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < C; j++) z[j] = x[0] * logp[i * C + j] + (group[j] >= 0 ? x[1 + group[j]] : 0);
      loss += softmaxInto(z, p) - z[y[i]];
      p[y[i]] -= 1; // dNLL/dz
      for (let j = 0; j < C; j++) {
        grad[0] += p[j] * logp[i * C + j];
        if (group[j] >= 0) grad[1 + group[j]] += p[j];
      }
    }
    loss /= n;
    for (let k = 0; k < P; k++) grad[k] /= n;
    loss += A_PENALTY * (x[0] - 1) ** 2;
    grad[0] += 2 * A_PENALTY * (x[0] - 1);
    for (let k = 1; k < P; k++) {
      loss += (lam / 2) * x[k] * x[k];
      grad[k] += lam * x[k];
    }
    return loss;
  };
  // Exact Hessian: sum over rows of J^T (diag p - p p^T) J, J the Jacobian of z in (a, b).
  const hessian = (x: Float64Array) => {
    const H = new Float64Array(P * P), s = new Float64Array(P);
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < C; j++) z[j] = x[0] * logp[i * C + j] + (group[j] >= 0 ? x[1 + group[j]] : 0);
      softmaxInto(z, p);
      s.fill(0);
      let aa = 0;
      for (let j = 0; j < C; j++) {
        const l = logp[i * C + j];
        s[0] += p[j] * l;
        aa += p[j] * l * l;
        if (group[j] >= 0) {
          const k = 1 + group[j];
          s[k] += p[j];
          H[k * P + k] += p[j];
          H[k * P] += p[j] * l;
          H[k] += p[j] * l;
        }
      }
      H[0] += aa;
      for (let u = 0; u < P; u++) for (let v = 0; v < P; v++) H[u * P + v] -= s[u] * s[v];
    }
    for (let k = 0; k < P * P; k++) H[k] /= n;
    H[0] += 2 * A_PENALTY;
    for (let k = 1; k < P; k++) H[k * P + k] += lam;
    return H;
  };
  return { f, hessian, size: P, group };
}

export function fitCalibration(train: Readouts, lambda: number | null, solver: 'auto' | 'newton' | 'lbfgs' = 'auto'): Calibration {
  const { f, hessian, size, group } = calibrationObjective(train, lambda);
  const x = new Float64Array(size);
  x[0] = 1;
  if (solver === 'newton' || (solver === 'auto' && size <= NEWTON_MAX_PARAMS)) newton(f, hessian, x);
  else lbfgs(f, x, { maxIterations: 2000, gradientTolerance: 1e-9 });
  return { a: x[0], b: Array.from(group, (g) => (g >= 0 ? x[1 + g] : 0)), lambda };
}
