/**
 * The image engine process's side of an image (docs/images.md): the compressed bytes it
 * received are decoded and sized by the recipe here, in the engine's process, so only compressed
 * bytes cross the process boundary; each gets its content key. Normalisation and the patch
 * layout are the engine's (csrc/vision/patches.h).
 */
import { NativeImage } from '../engine/native';
import { imageKey } from './key';
import { PixelBudget, preprocessImage } from './preprocess';

/** An image the recipe could not decode or size; `index` is its place in the call's images. */
export class ImageDecodeError extends Error {
  constructor(readonly index: number, message: string) {
    super(message);
  }
}

/** `cacheSalt`: the request's, in each image's key (key.ts). */
export async function decodeImages(images: Uint8Array[], budget: PixelBudget, model: string, cacheSalt?: string): Promise<NativeImage[]> {
  return Promise.all(
    images.map(async (bytes, index) => {
      try {
        const image = await preprocessImage(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), budget);
        return { rgb: new Uint8Array(image.rgb.buffer, image.rgb.byteOffset, image.rgb.byteLength), width: image.width, height: image.height, key: imageKey(image, model, cacheSalt) };
      } catch (e) {
        throw new ImageDecodeError(index, (e as Error).message);
      }
    }),
  );
}
