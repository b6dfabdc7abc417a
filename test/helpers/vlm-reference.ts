/** Float64 reference logits of a Qwen2-VL checkpoint (test/reference/ref_vlm.py, Debian's python3-torch). */
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { PreprocessedImage } from '../../src/images/preprocess';
import { debianPython, referenceDir } from './models';

export interface VlmCase {
  /** One image pad token per image, where the image stands. */
  tokens: number[];
  images: PreprocessedImage[];
}

/**
 * The reference's standard output for `input` on its standard input. Asynchronous: the reference takes
 * seconds, and a test that blocked its event loop that long while holding a keep-alive connection to a
 * server found the socket closed by the server's idle timeout (5 s) on its next request ("other side closed").
 */
function runReference(script: string, input: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(debianPython, [path.join(referenceDir, script)], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(stdout) : reject(new Error(`${script} exited ${code}: ${stderr}`))));
    child.stdin.end(input);
  });
}

/** For each case, its full-vocabulary float64 logits at every position of the expanded prompt. */
export async function referenceVlmLogits(model: string, cases: VlmCase[]): Promise<Float64Array[][]> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-vlm-ref-'));
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
    const stdout = await runReference('ref_vlm.py', JSON.stringify({ model, cases: input, out }));
    const { vocab, lengths } = JSON.parse(stdout) as { vocab: number; lengths: number[] };
    const buf = fs.readFileSync(out);
    const all = new Float64Array(buf.buffer, buf.byteOffset, buf.byteLength / 8);
    let offset = 0;
    return lengths.map((n) => Array.from({ length: n }, () => all.subarray(offset, (offset += vocab))));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
