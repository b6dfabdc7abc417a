/** /health's `image_engine` group (present when --image-model runs): the model, its vision tower, the recipe and the caches. */
import { IMAGE_LIMITS } from '../../images/formats';
import { RECIPE_VERSION } from '../../images/preprocess';
import { loadSharp } from '../../images/sharp';
import { ImageService } from '../service/service';

export async function imageEngineHealth(images: ImageService) {
  const { stats, vision: visionCache, memory } = await images.cacheReport();
  const e = images.engineInfo, v = e.vision!, base = images.base;
  return {
    model: {
      name: base.profile.name,
      checkpoint: base.checkpoint,
      architecture: e.architecture,
      dtype: e.dtype,
      vision: `the text model's kernels in ${e.dtype}; residual stream, LayerNorms, RoPE and activations fp32`,
      stored_dtype: e.storedDtype,
      random_weights: base.randomWeights,
      ...(base.note ? { note: base.note } : {}),
      engine_process: images.engineProcess,
      rss_bytes: memory.rssBytes,
    },
    vision: {
      depth: v.depth,
      embed_dim: v.embedDim,
      heads: v.heads,
      mlp_ratio: v.mlpRatio,
      patch_size: v.patchSize,
      temporal_patch_size: v.temporalPatchSize,
      merge_size: v.mergeSize,
      out_hidden: v.outHidden,
      token_ids: { vision_start: v.visionStartId, image_pad: v.imagePadId, vision_end: v.visionEndId },
      positions: 'M-RoPE: text (p, p, p); an image (s, s + row, s + column) on its merged grid; text after it continues one past the largest',
    },
    pixel_budget: {
      max_tokens: images.maxTokens,
      factor: images.budget.factor,
      min_pixels: images.budget.minPixels,
      max_pixels: images.budget.maxPixels,
      tokens_per_image: 'height / 28 x width / 28 after smart_resize',
    },
    recipe: {
      version: RECIPE_VERSION,
      steps: ['EXIF orientation', 'sRGB', 'alpha flattened on white', 'smart_resize (sides multiples of 28 within the budget)', 'cubic (Catmull-Rom) resize, no shrink-on-load', 'raw RGB', 'CLIP mean/std and 14x14x2 patches in the engine'],
      decoded_in: 'the image engine process',
      sharp: (await loadSharp()).versions,
    },
    limits: { images_per_request: IMAGE_LIMITS.maxImages, bytes_per_image: IMAGE_LIMITS.maxBytes, pixels_per_image: IMAGE_LIMITS.maxPixels, formats: ['png', 'jpeg', 'webp'] },
    cache: {
      image_key: 'SHA-256 of the preprocessed pixels, size, recipe version and model; in the chained hash of every KV block an image overlaps',
      prefix: { enabled: e.prefixCache, block_size: e.blockSize, lookups: stats.lookups, hit_tokens: stats.hitTokens, miss_tokens: stats.missTokens, hit_blocks: stats.hitBlocks, cached_blocks: stats.cachedBlocks },
      vision_outputs: visionCache && { hits: visionCache.hits, misses: visionCache.misses, entries: visionCache.entries, bytes: visionCache.bytes, budget_bytes: visionCache.budgetBytes },
    },
  };
}
