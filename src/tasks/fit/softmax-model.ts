/**
 * The multinomial log-loss all task parts share, in float64: for logits z (C) and a label y,
 * NLL = logsumexp(z) - z_y and dNLL/dz = softmax(z) - onehot(y).
 */

/** Writes softmax(z) into p (same length); returns logsumexp(z). */
export function softmaxInto(z: ArrayLike<number>, p: Float64Array, offset = 0, length = z.length): number {
  let max = -Infinity;
  for (let j = 0; j < length; j++) max = Math.max(max, z[offset + j]);
  let sum = 0;
  for (let j = 0; j < length; j++) {
    const e = Math.exp(z[offset + j] - max);
    p[j] = e;
    sum += e;
  }
  for (let j = 0; j < length; j++) p[j] /= sum;
  return max + Math.log(sum);
}

/** The floor of a log-probability: exp(-700) is still a double, so a 0 from the readout stays finite. */
export const LOG_FLOOR = -700;

export function safeLog(p: number): number {
  return p > 0 ? Math.max(LOG_FLOOR, Math.log(p)) : LOG_FLOOR;
}

/** A labelled set: n rows of C log-probabilities of the baseline (row-major), labels in [0, C). */
export interface Readouts {
  n: number;
  C: number;
  logp: Float64Array;
  y: Int32Array;
}

export function subset(r: Readouts, rows: number[]): Readouts {
  const logp = new Float64Array(rows.length * r.C);
  const y = new Int32Array(rows.length);
  rows.forEach((row, i) => {
    logp.set(r.logp.subarray(row * r.C, (row + 1) * r.C), i * r.C);
    y[i] = r.y[row];
  });
  return { n: rows.length, C: r.C, logp, y };
}
