/**
 * Two minimisers for smooth convex objectives in float64: damped Newton with the exact
 * Hessian (few parameters: the calibration of a question with up to ~30 options) and
 * L-BFGS (many: wide calibrations, intent heads). Both stop on the gradient's max norm;
 * the unit tests check that they agree.
 */

export type Objective = (x: Float64Array, grad: Float64Array) => number;

export interface MinimizeOptions {
  maxIterations?: number;
  /** Stop when every gradient component is below this. */
  gradientTolerance?: number;
}

function maxAbs(v: Float64Array): number {
  let m = 0;
  for (let i = 0; i < v.length; i++) m = Math.max(m, Math.abs(v[i]));
  return m;
}

function dot(a: Float64Array, b: Float64Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

/**
 * Backtracking (Armijo) line search along `dir` from x (value f0, gradient g0); on success x,
 * g hold the new point and its gradient. Returns the new value, or undefined when no step
 * decreased the objective.
 */
function lineSearch(f: Objective, x: Float64Array, f0: number, g: Float64Array, dir: Float64Array, step0: number): number | undefined {
  const slope = dot(g, dir);
  if (!(slope < 0)) return undefined;
  const trial = new Float64Array(x.length), gTrial = new Float64Array(x.length);
  for (let step = step0, i = 0; i < 60; i++, step *= 0.5) {
    for (let k = 0; k < x.length; k++) trial[k] = x[k] + step * dir[k];
    const v = f(trial, gTrial);
    if (Number.isFinite(v) && v <= f0 + 1e-4 * step * slope) {
      x.set(trial);
      g.set(gTrial);
      return v;
    }
  }
  return undefined;
}

/** L-BFGS (memory 10) with a backtracking line search. Minimises in place; returns the value. */
export function lbfgs(f: Objective, x: Float64Array, { maxIterations = 500, gradientTolerance = 1e-7 }: MinimizeOptions = {}): number {
  const m = 10, n = x.length;
  const g = new Float64Array(n);
  let value = f(x, g);
  const S: Float64Array[] = [], Y: Float64Array[] = [], rho: number[] = [];
  const alpha = new Float64Array(m);
  for (let it = 0; it < maxIterations && maxAbs(g) > gradientTolerance; it++) {
    // Two-loop recursion: dir = -H g.
    const q = Float64Array.from(g);
    for (let i = S.length - 1; i >= 0; i--) {
      const a = (alpha[i] = rho[i] * dot(S[i], q)), Yi = Y[i];
      for (let k = 0; k < n; k++) q[k] -= a * Yi[k];
    }
    const gamma = S.length ? dot(S[S.length - 1], Y[Y.length - 1]) / dot(Y[Y.length - 1], Y[Y.length - 1]) : 1 / Math.max(1, maxAbs(g));
    for (let k = 0; k < n; k++) q[k] *= gamma;
    for (let i = 0; i < S.length; i++) {
      const c = alpha[i] - rho[i] * dot(Y[i], q), Si = S[i];
      for (let k = 0; k < n; k++) q[k] += Si[k] * c;
    }
    for (let k = 0; k < n; k++) q[k] = -q[k];
    const x0 = Float64Array.from(x), g0 = Float64Array.from(g);
    const next = lineSearch(f, x, value, g, q, 1);
    if (next === undefined) break;
    const s = new Float64Array(n), yv = new Float64Array(n);
    for (let k = 0; k < n; k++) (s[k] = x[k] - x0[k]), (yv[k] = g[k] - g0[k]);
    const sy = dot(s, yv);
    if (sy > 1e-12) {
      if (S.length === m) {
        S.shift();
        Y.shift();
        rho.shift();
      }
      S.push(s);
      Y.push(yv);
      rho.push(1 / sy);
    }
    if (value - next <= 1e-15 * Math.max(1, Math.abs(value))) {
      value = next;
      break;
    }
    value = next;
  }
  return value;
}

/** Solves A x = b for a symmetric positive definite A (row-major, n x n) by Cholesky; undefined if not SPD. */
export function choleskySolve(A: Float64Array, b: Float64Array): Float64Array | undefined {
  const n = b.length, L = new Float64Array(n * n);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j <= i; j++) {
      let s = A[i * n + j];
      for (let k = 0; k < j; k++) s -= L[i * n + k] * L[j * n + k];
      if (i === j) {
        if (!(s > 0)) return undefined;
        L[i * n + i] = Math.sqrt(s);
      } else L[i * n + j] = s / L[j * n + j];
    }
  }
  const z = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    let s = b[i];
    for (let k = 0; k < i; k++) s -= L[i * n + k] * z[k];
    z[i] = s / L[i * n + i];
  }
  for (let i = n - 1; i >= 0; i--) {
    let s = z[i];
    for (let k = i + 1; k < n; k++) s -= L[k * n + i] * z[k];
    z[i] = s / L[i * n + i];
  }
  return z;
}

/**
 * Damped Newton: `hessian(x)` gives the exact Hessian (row-major). The step solves
 * (H + mu I) d = -g, mu growing when H is not positive definite, then a line search.
 */
export function newton(f: Objective, hessian: (x: Float64Array) => Float64Array, x: Float64Array, { maxIterations = 100, gradientTolerance = 1e-10 }: MinimizeOptions = {}): number {
  const n = x.length, g = new Float64Array(n);
  let value = f(x, g);
  for (let it = 0; it < maxIterations && maxAbs(g) > gradientTolerance; it++) {
    const H = hessian(x);
    let dir: Float64Array | undefined;
    for (let mu = 0; !dir && mu < 1e8; mu = mu === 0 ? 1e-8 : mu * 100) {
      const damped = Float64Array.from(H);
      for (let i = 0; i < n; i++) damped[i * n + i] += mu;
      dir = choleskySolve(damped, g.map((v) => -v));
    }
    if (!dir) break;
    const next = lineSearch(f, x, value, g, dir, 1);
    if (next === undefined) break;
    // Stopped as lbfgs stops: at the minimum, rounding can hold the gradient above the tolerance while no step gains
    // anything, and each such iteration's line search halved its way to a step that changed nothing, up to the last
    // iteration (bench/README.md, "Task fitting").
    const gained = value - next;
    value = next;
    if (gained <= 1e-15 * Math.max(1, Math.abs(value))) break;
  }
  return value;
}
