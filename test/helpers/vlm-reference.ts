/** Float64 reference logits of a Qwen2-VL or Qwen2.5-VL checkpoint (test/reference/ref_vlm.py, Debian's python3-torch). */
import * as fs from 'fs';
import * as path from 'path';
import { PreprocessedImage } from '../../src/images/preprocess';
import { callReference, referenceScratch } from './python-reference';

export interface VlmCase {
  /** One image pad token per image, where the image stands. */
  tokens: number[];
  images: PreprocessedImage[];
}

/** For each case, its full-vocabulary float64 logits at every position of the expanded prompt. */
export async function referenceVlmLogits(model: string, cases: VlmCase[]): Promise<Float64Array[][]> {
  const dir = referenceScratch('tq-vlm-ref-');
  try {
    const out = path.join(dir, 'logits.bin');
    const input = cases.map((c, i) => ({
      tokens: c.tokens,
      images: c.images.map((im, j) => {
        const file = path.join(dir, `image-${i}-${j}.rgb`);
        fs.writeFileSync(file, im.rgb);
        return { rgb: file, width: im.width, height: im.height };
      }),
    }));
    const { vocab, lengths } = (await callReference('ref_vlm', { model, cases: input, out })) as { vocab: number; lengths: number[] };
    const buf = fs.readFileSync(out);
    const all = new Float64Array(buf.buffer, buf.byteOffset, buf.byteLength / 8);
    let offset = 0;
    return lengths.map((n) => Array.from({ length: n }, () => all.subarray(offset, (offset += vocab))));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
