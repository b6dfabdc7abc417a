/** Float64 reference logits from test/reference/forward.py (Debian's python3-torch). */
import * as fs from 'fs';
import * as path from 'path';
import { callReference, referenceScratch } from './python-reference';

/**
 * For each sequence, its full-vocabulary float64 logits per position; with `allPositions` N, past the
 * first N sequences only the last position's (one row: rows[rows.length - 1] reads the same either way).
 */
export async function referenceLogits(model: string, sequences: number[][], allPositions = sequences.length): Promise<Float64Array[][]> {
  const out = path.join(referenceScratch('tq-ref-'), 'logits.bin');
  const { vocab } = (await callReference('forward', { model, sequences, out, all_positions: allPositions })) as { vocab: number };
  const buf = fs.readFileSync(out);
  fs.rmSync(path.dirname(out), { recursive: true, force: true });
  const all = new Float64Array(buf.buffer, buf.byteOffset, buf.byteLength / 8);
  const result: Float64Array[][] = [];
  let offset = 0;
  for (const [s, seq] of sequences.entries()) {
    const rows: Float64Array[] = [];
    for (let i = 0; i < (s < allPositions ? seq.length : 1); i++, offset += vocab) rows.push(all.subarray(offset, offset + vocab));
    result.push(rows);
  }
  return result;
}

// The loops over whole vocabularies compare instead of calling Math.max and Math.abs: inside jest's
// test context those builtins are not inlined (~270 ns a call), and 11 million of them, one model's
// logits at every position, took 2.8 s where the comparisons take 30 ms.
export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} vs ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    const d = a[i] - b[i];
    if (d > m) m = d;
    else if (-d > m) m = -d;
  }
  return m;
}

/** The largest |x| over all rows. */
export function maxAbs(rows: ArrayLike<number>[]): number {
  let m = 0;
  for (const row of rows)
    for (let i = 0; i < row.length; i++) {
      const v = row[i];
      if (v > m) m = v;
      else if (-v > m) m = -v;
    }
  return m;
}

export function softmax(x: ArrayLike<number>): number[] {
  return logSoftmax(x).map(Math.exp);
}

export function logSoftmax(x: ArrayLike<number>): number[] {
  let max = -Infinity;
  for (let i = 0; i < x.length; i++) max = Math.max(max, x[i]);
  let sum = 0;
  for (let i = 0; i < x.length; i++) sum += Math.exp(x[i] - max);
  const lse = max + Math.log(sum);
  return Array.from(x, (v) => v - lse);
}
