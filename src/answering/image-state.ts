/**
 * A request's images placed in its state, for the image engine's prompt. The images of `images`
 * and uploaded files come first, each on its own line before the state's text (as Qwen2-VL's
 * chat template puts a message's images before its text); a data URI inside the state is
 * replaced by its image where it stands, the rest of the state kept as text. Each image is the
 * model's placeholder <|vision_start|><|image_pad|><|vision_end|>: one <|image_pad|> the engine
 * widens to the image's tokens (csrc/vision/image_prompt.h).
 */
import { ImageInput, STATE_IMAGE } from '../images/collect';
import { renderState } from '../rendering/state';

export const IMAGE_PLACEHOLDER = '<|vision_start|><|image_pad|><|vision_end|>';

/** The state's text or placeholders do not give one <|image_pad|> token per image (e.g. the text itself holds that token's text). */
export class ImagePlacementError extends Error {}

function replaceImages(v: unknown): unknown {
  if (typeof v === 'string') return v.replace(STATE_IMAGE, IMAGE_PLACEHOLDER);
  if (Array.isArray(v)) return v.map(replaceImages);
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, replaceImages(x)]));
  return v;
}

/** The images in the order their placeholders stand in the state's text. */
export function inPromptOrder(images: ImageInput[]): ImageInput[] {
  return [...images.filter((i) => i.placement === 'leading'), ...images.filter((i) => i.placement === 'state')];
}

/** The state as text with each image's placeholder where the image stands. */
export function stateWithImages(state: unknown, images: ImageInput[]): string {
  const leading = images.filter((i) => i.placement === 'leading').length;
  return `${IMAGE_PLACEHOLDER}\n`.repeat(leading) + renderState(replaceImages(state));
}

/** Refuses a prompt whose image pad tokens are not one per image. */
export function checkImagePlacement(prefixTokens: readonly number[], imagePadId: number, images: number) {
  const pads = prefixTokens.filter((t) => t === imagePadId).length;
  if (pads !== images)
    throw new ImagePlacementError(
      `the state's text gives ${pads} image placeholder tokens for ${images} images: it must not contain the model's image tokens (<|vision_start|>, <|image_pad|>, <|vision_end|>) as text`,
    );
}
