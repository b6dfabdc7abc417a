/**
 * From label logits to the wire format's answers. Probabilities are the
 * softmax of the label logits divided by the question type's temperature.
 */

export function softmax(logits: ArrayLike<number>, temperature: number): number[] {
  const scaled = Array.from(logits, (l) => l / temperature);
  const max = Math.max(...scaled);
  const e = scaled.map((x) => Math.exp(x - max));
  const sum = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / sum);
}

/** Unicode code-point order (JS `<` compares UTF-16 code units, which differs above U+FFFF). */
export function compareCodePoints(a: string, b: string): number {
  const ca = Array.from(a), cb = Array.from(b);
  for (let i = 0; i < Math.min(ca.length, cb.length); i++) {
    const d = ca[i].codePointAt(0)! - cb[i].codePointAt(0)!;
    if (d !== 0) return d;
  }
  return ca.length - cb.length;
}

const clamp01 = (x: number) => Math.min(1, Math.max(0, x));

/** A probability rescaled from uniform over n options: (p - 1/n) / (1 - 1/n), clamped to [0, 1]. */
export function uniformRescaled(p: number, n: number): number {
  return n === 1 ? 1 : clamp01((p - 1 / n) / (1 - 1 / n));
}

export interface NoulAnswer { type: 'noul'; noul: number }
export interface ChoiceAnswer { type: 'choice'; choice: string; probabilities: Record<string, number>; confidence: number }
export interface ScoreAnswer { type: 'score'; score: number; probabilities: Record<string, number>; confidence: number; legend: Record<string, unknown> }
export type Answer = NoulAnswer | ChoiceAnswer | ScoreAnswer;

/** P(yes) from probabilities keyed "true"/"false". */
export function noulAnswer(p: Map<string, number>): NoulAnswer {
  return { type: 'noul', noul: p.get('true')! };
}

/**
 * The most probable key; among exact ties, the first in code-point order, so
 * the result does not depend on the order keys arrived in. Confidence is the
 * top probability rescaled from uniform: (p_max - 1/n) / (1 - 1/n).
 */
export function choiceAnswer(keys: string[], p: Map<string, number>): ChoiceAnswer {
  let best = keys[0];
  for (const k of keys) {
    const d = p.get(k)! - p.get(best)!;
    if (d > 0 || (d === 0 && compareCodePoints(k, best) < 0)) best = k;
  }
  // fromEntries defines own properties: a key named "__proto__" is an option like any other.
  const probabilities: Record<string, number> = Object.fromEntries(keys.map((k) => [k, p.get(k)!]));
  return { type: 'choice', choice: best, probabilities, confidence: uniformRescaled(p.get(best)!, keys.length) };
}

/**
 * score = sum of i * p_i over level indexes. Confidence is the concentration
 * at the mode: 1 - E|i - mode| / mean_i |i - (n-1)/2|, clamped to [0, 1]; the
 * denominator is the expected distance of a uniform guess from the scale's
 * middle, so a uniform distribution scores about 0 and a point mass 1.
 */
export function scoreAnswer(levels: unknown[], p: Map<string, number>): ScoreAnswer {
  const n = levels.length;
  const ps = levels.map((_, i) => p.get(String(i))!);
  let mode = 0;
  ps.forEach((v, i) => v > ps[mode] && (mode = i));
  const spread = ps.reduce((s, v, i) => s + v * Math.abs(i - mode), 0);
  const mid = (n - 1) / 2;
  const uniform = levels.reduce<number>((s, _, i) => s + Math.abs(i - mid), 0) / n;
  const probabilities = Object.fromEntries(ps.map((v, i) => [String(i), v]));
  const legend = Object.fromEntries(levels.map((l, i) => [String(i), l]));
  return {
    type: 'score',
    score: ps.reduce((s, v, i) => s + i * v, 0),
    probabilities,
    confidence: uniform === 0 ? 1 : clamp01(1 - spread / uniform),
    legend,
  };
}

