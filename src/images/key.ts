/**
 * An image's content key (docs/images.md, "Caching by content"): SHA-256 of its preprocessed pixels, its
 * size, the recipe version and the model. The engine puts it into the chained hash of every KV
 * block the image overlaps (csrc/vision/image_prompt.h) and keys its vision-output cache with it,
 * so two different images of the same size (identical token ids) never share cached work, and the
 * same image sent again, in any of the three forms, hits. A request's cache salt is in the key too:
 * the vision cache is shared only within a salt, as the prefix cache is (a hit across tenants would
 * show, by its time, that another tenant sent the image).
 */
import * as crypto from 'crypto';
import { PreprocessedImage, RECIPE_VERSION } from './preprocess';

export function imageKey(image: PreprocessedImage, model: string, cacheSalt?: string): string {
  return crypto
    .createHash('sha256')
    .update(JSON.stringify({ width: image.width, height: image.height, recipe: RECIPE_VERSION, model, ...(cacheSalt === undefined ? {} : { cacheSalt }) }))
    .update(image.rgb)
    .digest('hex');
}
