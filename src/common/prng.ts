/**
 * Deterministic normal samples for generated test weights. Each tensor gets its
 * own stream seeded from (model seed, tensor name), so a tensor's values do not
 * depend on which other tensors a model has or their order.
 */

export function hashString(seed: number, s: string): number {
  let h = (seed ^ 0x9e3779b9) >>> 0;
  for (let i = 0; i < s.length; i++) {
    h = Math.imul(h ^ s.charCodeAt(i), 0x85ebca6b) >>> 0;
    h = (h ^ (h >>> 13)) >>> 0;
  }
  return Math.imul(h ^ (h >>> 16), 0xc2b2ae35) >>> 0 || 1;
}

/** Uniform samples in (0, 1) from xorshift32, seeded with a non-zero integer. */
export function uniformStream(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return (x + 1) / 4294967297;
  };
}

/** Fills `out` with N(mean, std) samples (xorshift32 + Box-Muller). */
export function fillNormal(out: Float32Array, seed: number, name: string, std: number, mean = 0): void {
  const uniform = uniformStream(hashString(seed, name));
  for (let i = 0; i < out.length; i += 2) {
    const r = Math.sqrt(-2 * Math.log(uniform())) * std;
    const t = 2 * Math.PI * uniform();
    out[i] = mean + r * Math.cos(t);
    if (i + 1 < out.length) out[i + 1] = mean + r * Math.sin(t);
  }
}
