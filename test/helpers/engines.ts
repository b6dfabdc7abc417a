/** Engines opened for one piece of a test, and label logits compared as bits. */
import { Engine } from '../../src/engine/engine';
import { NativeLoadOptions } from '../../src/engine/native';

/** Opens the model `dir` with 2 threads and `options`, runs f on it, and closes it whatever f does. */
export async function withEngine<T>(dir: string, options: Partial<NativeLoadOptions>, f: (e: Engine) => Promise<T>): Promise<T> {
  const e = await Engine.open({ path: dir, threads: 2, ...options });
  try {
    return await f(e);
  } finally {
    await e.close();
  }
}

/** An fp32 array's bytes as hex: equal strings are bit-identical values. */
export const bits = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('hex');
