/**
 * The image engine against an independent float64 reference (test/reference/ref_vlm.py, Debian's
 * python3-torch, no transformers), fed the same sharp RGB: fp32 logits within 1e-4 at every position
 * of the expanded prompt, for each image form, non-square grids (the tiny model's mrope_section is
 * unequal, so swapping height and width would fail), two images with text between them, an image
 * starting mid-block, and both checkpoint key layouts. Then the caches: the same image again hits
 * every block; two different images of the same size (identical token ids) share no block that
 * overlaps them; answers are the same with and without the caches.
 */
import { Engine } from '../../src/engine/engine';
import { NativeImage } from '../../src/engine/native';
import { imageKey } from '../../src/images/key';
import { preprocessImage, PreprocessedImage } from '../../src/images/preprocess';
import { imageForms, png } from '../helpers/images';
import { tinyModel, withEditedConfig } from '../helpers/models';
import { maxAbs, maxAbsDiff } from '../helpers/reference';
import { referenceVlmLogits, VlmCase } from '../helpers/vlm-reference';

const START = 151652, PAD = 151655, END = 151653;
const image = (...t: number[]) => [START, PAD, END, ...t];
const text = (n: number, from = 1000) => Array.from({ length: n }, (_, i) => from + 37 * i);
const native = (im: PreprocessedImage, model: string): NativeImage => ({ rgb: new Uint8Array(im.rgb), width: im.width, height: im.height, key: imageKey(im, model) });

async function maxErrors(engine: Engine, model: string, cases: VlmCase[]): Promise<number[]> {
  const refs = await referenceVlmLogits(model, cases);
  const errors: number[] = [];
  for (const [i, c] of cases.entries()) {
    const got = await engine.logitsAll(c.tokens, c.images.map((im) => native(im, model)));
    expect(got.length).toBe(refs[i].length);
    errors.push(Math.max(...got.map((row, p) => maxAbsDiff(row, refs[i][p]))));
  }
  return errors;
}

describe('tiny-qwen2-vl (transformers 4 layout) against the float64 reference', () => {
  const model = tinyModel('tiny-qwen2-vl');
  let engine: Engine;
  const images: Record<string, PreprocessedImage> = {};
  beforeAll(async () => {
    engine = await Engine.open({ path: model, threads: 2 });
    for (const [name, make] of Object.entries(imageForms)) images[name] = await preprocessImage(await make());
  });
  afterAll(() => engine.close());

  test('loads as a vision-language model with the real image token ids', () => {
    expect(engine.info.architecture).toBe('Qwen2VLForConditionalGeneration');
    expect(engine.info.vision).toMatchObject({ depth: 2, embedDim: 32, patchSize: 14, mergeSize: 2, imagePadId: PAD, visionStartId: START, visionEndId: END });
  });

  test('each image form: fp32 logits within 1e-4 at every position', async () => {
    const names = Object.keys(imageForms);
    const cases = names.map((n) => ({ tokens: [...text(3), ...image(...text(4, 2000))], images: [images[n]] }));
    const errors = await maxErrors(engine, model, cases);
    names.forEach((n, i) => console.log(`${n} (${images[n].width}x${images[n].height}): max|Δlogit| ${errors[i].toExponential(2)}`));
    for (const e of errors) expect(e).toBeLessThanOrEqual(1e-4);
  });

  test('two images with text between them, and an image starting mid-block', async () => {
    const wide = images['non-square PNG (wide)'], tall = images['non-square PNG (tall)'];
    const cases = [
      { tokens: [...text(2), ...image(...text(5, 3000)), ...image(...text(3, 4000))], images: [wide, tall] },
      { tokens: [...text(21), ...image(...text(6, 5000))], images: [tall] },
    ];
    for (const e of await maxErrors(engine, model, cases)) expect(e).toBeLessThanOrEqual(1e-4);
  });

  // The fused forward is CUDA's default, ATen's the fp8 weights' (csrc/engine/engine_options.cpp, resolve_forward_defaults).
  test.each(['aten', 'fused'] as const)("the GPU's %s kernels (here on the CPU): fp32 logits within 1e-4", async (kernels) => {
    const aten = await Engine.open({ path: model, threads: 2, kernels });
    try {
      expect(aten.info.kernels).toBe(kernels);
      const wide = images['non-square PNG (wide)'], tall = images['non-square PNG (tall)'];
      const errors = await maxErrors(aten, model, [{ tokens: [...text(2), ...image(...text(5, 3000)), ...image(...text(3, 4000))], images: [wide, tall] }]);
      expect(errors[0]).toBeLessThanOrEqual(1e-4);
    } finally {
      await aten.close();
    }
  });

  test('bf16 (the vision tower too): the error is reported, within 5% of the logit scale', async () => {
    const bf16 = await Engine.open({ path: model, threads: 2, dtype: 'bf16' });
    try {
      const c = { tokens: [...text(3), ...image(...text(4, 2000))], images: [images['non-square PNG (wide)']] };
      const [ref] = await referenceVlmLogits(model, [c]);
      const got = await bf16.logitsAll(c.tokens, c.images.map((im) => native(im, model)));
      const err = Math.max(...got.map((row, p) => maxAbsDiff(row, ref[p])));
      const scale = maxAbs(ref);
      console.log(`tiny-qwen2-vl bf16: max|Δlogit| ${err.toExponential(2)} (logit scale ${scale.toFixed(2)})`);
      expect(err).toBeLessThan(0.05 * scale);
    } finally {
      await bf16.close();
    }
  });

  // 224 x 224 px are 16 x 16 patches: the tower's attention takes them in two chunks of 128 queries over the same 256
  // keys, whose packed keys and values a thread reuses from one chunk to the next (attention_invariant.cpp). One
  // thread takes every item, and so reuses every head's; two share them out.
  test('an image of 256 patches (chunks of queries over the same keys): within 1e-4 on 1 and 2 threads, the same bits on both', async () => {
    const big = await preprocessImage(await png(224, 224, 13));
    expect(big.width * big.height).toBe(256 * 14 * 14);
    const state = [...text(3), ...image(...text(4, 2000))], question = text(3, 7000);
    const labels = Array.from({ length: 64 }, (_, i) => 100 + 997 * i);
    const [ref] = await referenceVlmLogits(model, [{ tokens: [...state, ...question], images: [big] }]);
    const last = ref[ref.length - 1];
    for (const dtype of ['fp32', 'bf16'] as const) {
      const bits: string[] = [];
      for (const threads of [1, 2]) {
        const e = await Engine.open({ path: model, threads, dtype });
        try {
          const [a] = (await e.answer({ state, images: [native(big, model)], questions: [{ tokens: question, labelIds: labels }] })).answers;
          if (dtype === 'fp32') expect(maxAbsDiff(a.labelLogits, labels.map((id) => last[id]))).toBeLessThanOrEqual(1e-4);
          bits.push(Buffer.from(Float32Array.from(a.labelLogits).buffer).toString('hex'));
        } finally {
          await e.close();
        }
      }
      expect(bits[1]).toBe(bits[0]);
    }
  });

  test('packed questions after an image read out the reference logits at each question end', async () => {
    const im = images['WebP'];
    const state = [...text(4), ...image(...text(9, 6000))];
    const questions = [text(5, 7000), text(7, 8000)];
    const labels = [101, 202, 303];
    const res = await engine.answer({ state, images: [native(im, model)], questions: questions.map((tokens) => ({ tokens, labelIds: labels })) });
    expect(res.stateTokens).toBe(state.length - 1 + (im.width / 28) * (im.height / 28));
    const refs = await referenceVlmLogits(model, questions.map((q) => ({ tokens: [...state, ...q], images: [im] })));
    res.answers.forEach((a, i) => {
      const last = refs[i][refs[i].length - 1];
      expect(maxAbsDiff(a.labelLogits, labels.map((id) => last[id]))).toBeLessThanOrEqual(1e-4);
    });
  });
});

test('tiny-qwen2-vl-v5 (transformers 5 layout, untied lm_head, bf16-stored) agrees with the reference', async () => {
  const model = tinyModel('tiny-qwen2-vl-v5');
  const engine = await Engine.open({ path: model, threads: 2 });
  try {
    const a = await preprocessImage(await png(90, 60, 11)), b = await preprocessImage(await png(60, 90, 12));
    const errors = await maxErrors(engine, model, [{ tokens: [...text(3), ...image(...text(2, 900)), ...image(...text(4, 950))], images: [a, b] }]);
    expect(errors[0]).toBeLessThanOrEqual(1e-4);
  } finally {
    await engine.close();
  }
});

// Qwen2.5-VL: RMSNorm and SwiGLU in the ViT, attention within windows of 56 px (2x2 merged units) in blocks 0 and
// 1 and over the whole image in block 2. A 90x60 image is resized to 3x2 merged units (a whole window and a
// partial one), a 50x120 one to 2x4, a 112x84 one to 4x3 (whole windows and partial ones at its bottom).
describe('tiny-qwen2.5-vl (window attention) against the float64 reference', () => {
  const model = tinyModel('tiny-qwen2.5-vl');
  let engine: Engine;
  let cases: VlmCase[];
  beforeAll(async () => {
    engine = await Engine.open({ path: model, threads: 2 });
    const wide = await preprocessImage(await png(90, 60, 1)), tall = await preprocessImage(await png(50, 120, 2));
    const big = await preprocessImage(await png(112, 84, 3));
    cases = [
      { tokens: [...text(2), ...image(...text(5, 3000)), ...image(...text(3, 4000))], images: [wide, tall] },
      { tokens: [...text(3), ...image(...text(4, 2000))], images: [big] },
    ];
  });
  afterAll(() => engine.close());

  test("loads as Qwen2.5-VL with its windows, and answers within 1e-4 at every position, on the engine's, ATen's and the fused kernels", async () => {
    expect(engine.info.architecture).toBe('Qwen2_5_VLForConditionalGeneration');
    expect(engine.info.vision).toMatchObject({ depth: 3, embedDim: 32, intermediateSize: 48, windowSize: 56, imagePadId: PAD });
    for (const e of await maxErrors(engine, model, cases)) expect(e).toBeLessThanOrEqual(1e-4);
    for (const kernels of ['aten', 'fused'] as const) {
      const gpuForm = await Engine.open({ path: model, threads: 2, kernels });
      try {
        for (const e of await maxErrors(gpuForm, model, cases)) expect(e).toBeLessThanOrEqual(1e-4);
      } finally {
        await gpuForm.close();
      }
    }
  });

  test('the windows matter: the same weights with every block attending to the whole image answer otherwise', async () => {
    const everyBlockFull = (c: any) => ({ ...c, vision_config: { ...c.vision_config, fullatt_block_indexes: [0, 1, 2] } });
    await withEditedConfig(model, everyBlockFull, async (copy) => {
      const full = await Engine.open({ path: copy, threads: 2 });
      try {
        const c = cases[1];
        const [windowed, whole] = await Promise.all([engine, full].map((e) => e.logitsAll(c.tokens, c.images.map((im) => native(im, model)))));
        expect(Math.max(...windowed.map((row, p) => maxAbsDiff(row, whole[p])))).toBeGreaterThan(1e-3);
      } finally {
        await full.close();
      }
    });
  });
});

describe('image caching by content', () => {
  const model = tinyModel('tiny-qwen2-vl');
  let cached: Engine, uncached: Engine;
  let a: PreprocessedImage, b: PreprocessedImage;
  const state = [...text(5), ...image(...text(20, 3000))];
  const questions = [{ tokens: text(4, 9000), labelIds: [11, 22, 33] }];
  beforeAll(async () => {
    cached = await Engine.open({ path: model, threads: 2, registerBoundary: 'before' });
    uncached = await Engine.open({ path: model, threads: 2, prefixCache: false, visionCacheMiB: 0 });
    a = await preprocessImage(await png(84, 84, 21));
    b = await preprocessImage(await png(84, 84, 22));
  });
  afterAll(async () => {
    await cached.close();
    await uncached.close();
  });

  test('the same image again hits every block (no vision tower run); after other text, the vision cache; answers equal the uncached engine', async () => {
    const first = await cached.answer({ state, images: [native(a, model)], questions });
    const afterFirst = await cached.visionCacheStats();
    const again = await cached.answer({ state, images: [native(a, model)], questions });
    // Every image token came from the prefix cache: the vision tower and its cache were not asked.
    expect(await cached.visionCacheStats()).toEqual(afterFirst);
    expect(first.cachedTokens).toBe(0);
    expect(again.cachedTokens).toBe(again.stateTokens);
    const reference = await uncached.answer({ state, images: [native(a, model)], questions });
    expect(maxAbsDiff(again.answers[0].labelLogits, reference.answers[0].labelLogits)).toBeLessThanOrEqual(1e-6);
    expect(maxAbsDiff(first.answers[0].labelLogits, reference.answers[0].labelLogits)).toBeLessThanOrEqual(1e-6);
    // The image after different text: no KV block can be reused past the text, but the ViT is skipped.
    const vision0 = await cached.visionCacheStats();
    await cached.answer({ state: [...text(3, 500), ...image()], images: [native(a, model)], questions });
    const vision1 = await cached.visionCacheStats();
    expect(vision1.hits).toBe(vision0.hits + 1);
    expect(vision1.misses).toBe(vision0.misses);
  });

  test('two different images of the same size share only the blocks before them', async () => {
    await cached.answer({ state, images: [native(a, model)], questions });
    const withB = await cached.answer({ state, images: [native(b, model)], questions });
    // Identical token ids; the image starts at token 6 of the first block: nothing may be reused.
    expect(withB.cachedTokens).toBe(0);
    const reference = await uncached.answer({ state, images: [native(b, model)], questions });
    expect(maxAbsDiff(withB.answers[0].labelLogits, reference.answers[0].labelLogits)).toBeLessThanOrEqual(1e-6);
    const withA = await uncached.answer({ state, images: [native(a, model)], questions });
    expect(maxAbsDiff(withB.answers[0].labelLogits, withA.answers[0].labelLogits)).toBeGreaterThan(1e-3);
    // With a full block of text before the image, that block is shared and nothing after it.
    const long = [...text(20), ...image(...text(3, 3000))];
    await cached.answer({ state: long, images: [native(a, model)], questions });
    expect((await cached.answer({ state: long, images: [native(b, model)], questions })).cachedTokens).toBe(16);
  });

  test('one batch with the same tokens and different images answers each as alone', async () => {
    const [ra, rb] = await uncached.answerBatch([
      { state, images: [native(a, model)], questions },
      { state, images: [native(b, model)], questions },
    ]);
    const alone = await uncached.answer({ state, images: [native(b, model)], questions });
    expect(maxAbsDiff(rb.answers[0].labelLogits, alone.answers[0].labelLogits)).toBeLessThanOrEqual(1e-6);
    expect(maxAbsDiff(ra.answers[0].labelLogits, rb.answers[0].labelLogits)).toBeGreaterThan(1e-3);
  });

  test('bad image inputs are BAD_REQUEST errors, and the engine answers afterwards', async () => {
    const good = native(a, model);
    const bad: [string, Parameters<Engine['answer']>[0]][] = [
      ['one placeholder, no image', { state, questions }],
      ['an image, no placeholder', { state: text(5), images: [good], questions }],
      ['a side not a multiple of 28', { state, images: [{ ...good, width: 42, height: 168, rgb: new Uint8Array(42 * 168 * 3) }], questions }],
      ['a placeholder in a question', { state, images: [good], questions: [{ tokens: [PAD, 5], labelIds: [1, 2] }] }],
      ['a key that is not hex', { state, images: [{ ...good, key: 'x'.repeat(64) }], questions }],
      ['rgb of the wrong length', { state, images: [{ ...good, width: 56 }], questions }],
    ];
    for (const [, request] of bad) await expect(cached.answer(request)).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    expect((await cached.answer({ state, images: [good], questions })).answers).toHaveLength(1);
  });
});
