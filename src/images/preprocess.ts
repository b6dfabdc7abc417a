/**
 * The image recipe of the Qwen2-VL family (docs/images.md), with sharp (pinned, 0.35.5 on
 * libvips 8.18): decode; EXIF orientation applied; converted to sRGB (CMYK and grey included);
 * alpha flattened on white (as qwen-vl-utils does); resized to the family's `smart_resize` size
 * (both sides multiples of 28, the pixel count within the budget) with a bicubic (Catmull-Rom)
 * kernel and no shrink-on-load (JPEG and WebP would otherwise be downscaled by the decoder first);
 * raw RGB, 8 bits, row-major. Normalisation and the patch layout are the engine's (C++).
 *
 * Known distance from the Python processors: Pillow's bicubic differs from libvips' in the last
 * bits, and HF's slow and fast processors already differ from each other; the float64 reference
 * is fed these same RGB bytes, so parity is measured from here on.
 */
import { IMAGE_LIMITS } from './formats';
import { loadSharp } from './sharp';

/** Part of an image's cache key: a change to the recipe must never reuse cached KV. */
export const RECIPE_VERSION = 'qwen2vl-sharp-0.35.5-cubic-flatten-white/1';

export interface PixelBudget {
  /** patch size x merge size: 28 for Qwen2-VL. */
  factor: number;
  minPixels: number;
  maxPixels: number;
}

/** Qwen2-VL-2B-Instruct's preprocessor_config.json. */
export const QWEN2VL_BUDGET: PixelBudget = { factor: 28, minPixels: 56 * 56, maxPixels: 28 * 28 * 16384 };

/** The budget that makes an image at most `maxTokens` tokens (--image-max-tokens): one token per 28x28 square. */
export function budgetOfTokens(maxTokens: number): PixelBudget {
  return { ...QWEN2VL_BUDGET, maxPixels: Math.min(QWEN2VL_BUDGET.maxPixels, maxTokens * 28 * 28) };
}

/** Python's round(): half to even, as the reference implementation rounds. */
function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

export class ImageShapeError extends Error {}

/** transformers' `smart_resize` (Qwen2-VL): the size an image of height x width is resized to. */
export function smartResize(height: number, width: number, b: PixelBudget = QWEN2VL_BUDGET): { height: number; width: number } {
  if (Math.max(height, width) / Math.min(height, width) > 200) throw new ImageShapeError(`its aspect ratio ${width}:${height} is over 200`);
  let h = roundHalfEven(height / b.factor) * b.factor;
  let w = roundHalfEven(width / b.factor) * b.factor;
  if (h * w > b.maxPixels) {
    const beta = Math.sqrt((height * width) / b.maxPixels);
    h = Math.max(b.factor, Math.floor(height / beta / b.factor) * b.factor);
    w = Math.max(b.factor, Math.floor(width / beta / b.factor) * b.factor);
  } else if (h * w < b.minPixels) {
    const beta = Math.sqrt(b.minPixels / (height * width));
    h = Math.ceil((height * beta) / b.factor) * b.factor;
    w = Math.ceil((width * beta) / b.factor) * b.factor;
  }
  return { height: h, width: w };
}

export interface PreprocessedImage {
  width: number;
  height: number;
  /** width x height x 3 bytes, row-major RGB. */
  rgb: Buffer;
}

export async function preprocessImage(bytes: Buffer, budget: PixelBudget = QWEN2VL_BUDGET): Promise<PreprocessedImage> {
  const sharp = await loadSharp();
  const input = () => sharp(bytes, { failOn: 'error', limitInputPixels: IMAGE_LIMITS.maxPixels, animated: false });
  const meta = await input().metadata();
  const oriented = meta.autoOrient ?? { width: meta.width!, height: meta.height! };
  const size = smartResize(oriented.height, oriented.width, budget);
  const { data, info } = await input()
    .autoOrient()
    .toColourspace('srgb')
    .flatten({ background: '#ffffff' })
    .resize(size.width, size.height, { kernel: 'cubic', fit: 'fill', fastShrinkOnLoad: false })
    .raw()
    .toBuffer({ resolveWithObject: true });
  if (info.channels !== 3 || info.width !== size.width || info.height !== size.height) throw new Error(`the recipe gave ${info.width} x ${info.height} x ${info.channels}, expected ${size.width} x ${size.height} x 3`);
  return { width: info.width, height: info.height, rgb: data };
}
