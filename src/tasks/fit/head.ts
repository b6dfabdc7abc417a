/**
 * The intent head: multinomial logistic regression on the hidden state at the readout
 * position. Features are standardised per dimension (essential on random-weight models)
 * and, above MAX_COMPONENTS dimensions, reduced by PCA fitted on all examples' hidden
 * states without their labels (subspace iteration, then whitened). Forms:
 *   residual: z = offset + W x + c, the offset the calibrated readout's logits; a large
 *             lambda gives back the calibrated readout exactly;
 *   replace:  z = W x + c.
 * Loss: mean NLL + (lambda/2)(|W|^2 + |c|^2) (replace: c penalised by 1e-4 only), L-BFGS.
 * After the fit, standardisation and projection fold into one C x d matrix and a bias.
 */
import { uniformStream } from '../../common/prng';
import { lbfgs } from './optimize';
import { softmaxInto } from './softmax-model';

export const MAX_COMPONENTS = 64;

/** x = (h - mean) M: M is d x r, row-major. */
export interface Projection {
  d: number;
  r: number;
  mean: Float64Array;
  M: Float64Array;
}

function orthonormalizeColumns(Q: Float64Array, d: number, r: number) {
  for (let j = 0; j < r; j++) {
    for (let k = 0; k < j; k++) {
      let dotp = 0;
      for (let i = 0; i < d; i++) dotp += Q[i * r + j] * Q[i * r + k];
      for (let i = 0; i < d; i++) Q[i * r + j] -= dotp * Q[i * r + k];
    }
    let norm = 0;
    for (let i = 0; i < d; i++) norm += Q[i * r + j] ** 2;
    norm = Math.sqrt(norm) || 1;
    for (let i = 0; i < d; i++) Q[i * r + j] /= norm;
  }
}

/** Eigen-decomposition of a symmetric r x r matrix by cyclic Jacobi rotations: values, vectors (columns). */
export function symmetricEigen(A: Float64Array, r: number): { values: Float64Array; vectors: Float64Array } {
  const a = Float64Array.from(A), V = new Float64Array(r * r);
  for (let i = 0; i < r; i++) V[i * r + i] = 1;
  for (let sweep = 0; sweep < 100; sweep++) {
    let off = 0;
    for (let p = 0; p < r; p++) for (let q = p + 1; q < r; q++) off += a[p * r + q] ** 2;
    if (off < 1e-22) break;
    for (let p = 0; p < r; p++)
      for (let q = p + 1; q < r; q++) {
        if (Math.abs(a[p * r + q]) < 1e-300) continue;
        const theta = (a[q * r + q] - a[p * r + p]) / (2 * a[p * r + q]);
        const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
        const c = 1 / Math.sqrt(t * t + 1), s = t * c;
        for (let k = 0; k < r; k++) {
          const akp = a[k * r + p], akq = a[k * r + q];
          a[k * r + p] = c * akp - s * akq;
          a[k * r + q] = s * akp + c * akq;
        }
        for (let k = 0; k < r; k++) {
          const apk = a[p * r + k], aqk = a[q * r + k];
          a[p * r + k] = c * apk - s * aqk;
          a[q * r + k] = s * apk + c * aqk;
        }
        for (let k = 0; k < r; k++) {
          const vkp = V[k * r + p], vkq = V[k * r + q];
          V[k * r + p] = c * vkp - s * vkq;
          V[k * r + q] = s * vkp + c * vkq;
        }
      }
  }
  return { values: Float64Array.from({ length: r }, (_, i) => a[i * r + i]), vectors: V };
}

/** Standardisation, then (when d > MAX_COMPONENTS) the leading principal components, whitened. */
export function fitProjection(h: Float64Array, n: number, d: number, seed: number): Projection {
  const mean = new Float64Array(d), inv = new Float64Array(d);
  for (let i = 0; i < n; i++) for (let k = 0; k < d; k++) mean[k] += h[i * d + k] / n;
  for (let i = 0; i < n; i++) for (let k = 0; k < d; k++) inv[k] += (h[i * d + k] - mean[k]) ** 2 / n;
  for (let k = 0; k < d; k++) inv[k] = inv[k] > 1e-20 ? 1 / Math.sqrt(inv[k]) : 0;
  const r0 = Math.min(MAX_COMPONENTS, n - 1, d);
  if (d <= MAX_COMPONENTS) {
    const M = new Float64Array(d * d);
    for (let k = 0; k < d; k++) M[k * d + k] = inv[k];
    return { d, r: d, mean, M };
  }
  // X: standardised rows. Subspace iteration for the top r0 right singular vectors.
  const X = new Float64Array(n * d);
  for (let i = 0; i < n; i++) for (let k = 0; k < d; k++) X[i * d + k] = (h[i * d + k] - mean[k]) * inv[k];
  const uniform = uniformStream(seed);
  let Q = Float64Array.from({ length: d * r0 }, () => uniform() - 0.5);
  const XQ = new Float64Array(n * r0);
  const multiply = () => {
    XQ.fill(0);
    for (let i = 0; i < n; i++) for (let k = 0; k < d; k++) {
      const x = X[i * d + k];
      if (x !== 0) for (let j = 0; j < r0; j++) XQ[i * r0 + j] += x * Q[k * r0 + j];
    }
  };
  orthonormalizeColumns(Q, d, r0);
  for (let it = 0; it < 6; it++) {
    multiply();
    const next = new Float64Array(d * r0);
    for (let i = 0; i < n; i++) for (let k = 0; k < d; k++) {
      const x = X[i * d + k];
      if (x !== 0) for (let j = 0; j < r0; j++) next[k * r0 + j] += x * XQ[i * r0 + j];
    }
    orthonormalizeColumns(next, d, r0);
    Q = next;
  }
  multiply();
  const B = new Float64Array(r0 * r0);
  for (let i = 0; i < n; i++) for (let u = 0; u < r0; u++) for (let v = 0; v < r0; v++) B[u * r0 + v] += XQ[i * r0 + u] * XQ[i * r0 + v];
  const { values, vectors } = symmetricEigen(B, r0);
  const order = Array.from(values.keys()).sort((a, b) => values[b] - values[a]).filter((j) => values[j] > 1e-10 * Math.max(1e-300, values[0] || 1) && values[j] > 0);
  const r = order.length;
  const M = new Float64Array(d * r);
  order.forEach((j, col) => {
    const scale = 1 / Math.sqrt(values[j] / n); // whitened: unit variance per component
    for (let k = 0; k < d; k++) {
      let v = 0;
      for (let u = 0; u < r0; u++) v += Q[k * r0 + u] * vectors[u * r0 + j];
      M[k * r + col] = v * inv[k] * scale;
    }
  });
  return { d, r, mean, M };
}

export function project(p: Projection, h: Float64Array, rows: number[]): Float64Array {
  const { d, r, mean, M } = p;
  const x = new Float64Array(rows.length * r);
  rows.forEach((row, i) => {
    for (let k = 0; k < d; k++) {
      const v = h[row * d + k] - mean[k];
      if (v !== 0) for (let j = 0; j < r; j++) x[i * r + j] += v * M[k * r + j];
    }
  });
  return x;
}

export type HeadForm = 'residual' | 'replace';

export interface HeadData {
  n: number;
  C: number;
  r: number;
  x: Float64Array; // n x r features
  offset: Float64Array | null; // n x C logits (residual), null (replace)
  y: Int32Array;
}

/**
 * z[j] += W_j . x_i for every option j: each sum over k in order, as a plain loop would take it (so the same bits),
 * but four options at a time, so that the four sums' additions overlap instead of each waiting for the one before
 * (an add's latency bounds a lone sum; the fit spends most of its time here: bench/README.md, "Task fitting").
 */
function addRowLogits(w: Float64Array, x: Float64Array, xi: number, r: number, C: number, z: Float64Array) {
  let j = 0;
  for (; j + 4 <= C; j += 4) {
    const w0 = j * r, w1 = w0 + r, w2 = w1 + r, w3 = w2 + r;
    let s0 = z[j], s1 = z[j + 1], s2 = z[j + 2], s3 = z[j + 3];
    for (let k = 0; k < r; k++) {
      const xk = x[xi + k];
      s0 += w[w0 + k] * xk;
      s1 += w[w1 + k] * xk;
      s2 += w[w2 + k] * xk;
      s3 += w[w3 + k] * xk;
    }
    z[j] = s0, z[j + 1] = s1, z[j + 2] = s2, z[j + 3] = s3;
  }
  for (; j < C; j++) {
    let s = z[j];
    for (let k = 0, wj = j * r; k < r; k++) s += w[wj + k] * x[xi + k];
    z[j] = s;
  }
}

/**
 * grad_j += g_j x_i (and the bias's += g_j) for every option j whose g_j is not 0, four options at a time where none
 * of the four is 0: each element still takes the rows in order, so the same bits as one option at a time.
 */
function addRowGradient(g: Float64Array, x: Float64Array, xi: number, r: number, C: number, grad: Float64Array) {
  const bias = C * r;
  let j = 0;
  for (; j + 4 <= C && g[j] !== 0 && g[j + 1] !== 0 && g[j + 2] !== 0 && g[j + 3] !== 0; j += 4) {
    const g0 = g[j], g1 = g[j + 1], g2 = g[j + 2], g3 = g[j + 3];
    const w0 = j * r, w1 = w0 + r, w2 = w1 + r, w3 = w2 + r;
    for (let k = 0; k < r; k++) {
      const xk = x[xi + k];
      grad[w0 + k] += g0 * xk;
      grad[w1 + k] += g1 * xk;
      grad[w2 + k] += g2 * xk;
      grad[w3 + k] += g3 * xk;
    }
    grad[bias + j] += g0, grad[bias + j + 1] += g1, grad[bias + j + 2] += g2, grad[bias + j + 3] += g3;
  }
  for (; j < C; j++) {
    if (g[j] === 0) continue;
    for (let k = 0, wj = j * r; k < r; k++) grad[wj + k] += g[j] * x[xi + k];
    grad[bias + j] += g[j];
  }
}

/** Parameters [W (C x r) row-major, c (C)]. */
export function headObjective(data: HeadData, lambda: number) {
  const { n, C, r, x, offset, y } = data;
  const z = new Float64Array(C), p = new Float64Array(C);
  const cPenalty = offset ? lambda : 1e-4;
  return (w: Float64Array, grad: Float64Array) => {
    grad.fill(0);
    let loss = 0;
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < C; j++) z[j] = w[C * r + j] + (offset ? offset[i * C + j] : 0);
      addRowLogits(w, x, i * r, r, C, z);
      loss += softmaxInto(z, p) - z[y[i]];
      p[y[i]] -= 1;
      for (let j = 0; j < C; j++) p[j] /= n;
      addRowGradient(p, x, i * r, r, C, grad);
    }
    loss /= n;
    for (let k = 0; k < C * r; k++) {
      loss += (lambda / 2) * w[k] * w[k];
      grad[k] += lambda * w[k];
    }
    for (let j = 0; j < C; j++) {
      loss += (cPenalty / 2) * w[C * r + j] ** 2;
      grad[C * r + j] += cPenalty * w[C * r + j];
    }
    return loss;
  };
}

/**
 * Fits the head at each lambda (largest first, each warm-started from the last); returns the
 * parameters per lambda. `maxIterations` per lambda: the inner cross-validation that only
 * ranks lambdas uses fewer than the final fit (a fit took a third of the time; bench/README.md,
 * "Measurements behind the CPU kernels").
 */
export function fitHeadPath(data: HeadData, lambdas: number[], maxIterations = 300): Float64Array[] {
  const w = new Float64Array(data.C * (data.r + 1));
  return lambdas.map((lambda) => {
    lbfgs(headObjective(data, lambda), w, { maxIterations, gradientTolerance: 1e-6 });
    return Float64Array.from(w);
  });
}

/** Logits of the head for row i (features x_i, offset row i) into z. */
export function headLogits(data: HeadData, w: Float64Array, i: number, z: Float64Array) {
  const { C, r, x, offset } = data;
  for (let j = 0; j < C; j++) z[j] = w[C * r + j] + (offset ? offset[i * C + j] : 0);
  addRowLogits(w, x, i * r, r, C, z);
}

/** The fitted head on raw hidden states: z += W' h + c', W' = W M^T (C x d), c' = c - W' mean. */
export function foldHead(p: Projection, w: Float64Array, C: number): { W: Float32Array; c: Float64Array } {
  const { d, r, mean, M } = p;
  const W = new Float32Array(C * d), c = new Float64Array(C);
  for (let j = 0; j < C; j++) {
    let shift = 0;
    for (let k = 0; k < d; k++) {
      let v = 0;
      for (let u = 0; u < r; u++) v += w[j * r + u] * M[k * r + u];
      W[j * d + k] = v; // rounded to float32: what is stored, exported and applied
      shift += W[j * d + k] * mean[k];
    }
    c[j] = w[C * r + j] - shift;
  }
  return { W, c };
}
