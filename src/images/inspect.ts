/**
 * Each image checked before it reaches an engine (docs/images.md): the count, the size,
 * the format by its bytes, and its header read by sharp (the dimensions, the pixel count, a
 * header that does not parse, an animation). Only the header is read: decoding belongs to the
 * image engine's process. Every problem names the image.
 */
import { Problem } from '../wire/http-error';
import { ImageInput } from './collect';
import { describeBytes, IMAGE_LIMITS, sniffFormat } from './formats';
import { loadSharp } from './sharp';

const MB = (n: number) => `${(n / 1e6).toFixed(1)} MB`;

async function headerProblem(bytes: Buffer): Promise<string | undefined> {
  const sharp = await loadSharp();
  const meta = await sharp(bytes, { failOn: 'error', limitInputPixels: false })
    .metadata()
    .catch((e: Error) => e);
  if (meta instanceof Error) return `cannot be read: ${meta.message}`;
  if (!meta.width || !meta.height) return 'cannot be read: its header gives no size';
  const pixels = meta.width * meta.height;
  if (pixels > IMAGE_LIMITS.maxPixels) return `is ${meta.width} x ${meta.height} = ${pixels} pixels, over the limit of ${IMAGE_LIMITS.maxPixels} (a decompression bomb, or an image to downscale first)`;
  if ((meta.pages ?? 1) > 1) return `is animated (${meta.pages} frames): send one frame`;
  return undefined;
}

export async function inspectImages(images: ImageInput[]): Promise<Problem[]> {
  const problems: Problem[] = [];
  const bad = (loc: (string | number)[], msg: string) => problems.push({ loc, msg, type: 'value_error' });
  if (images.length > IMAGE_LIMITS.maxImages) bad(['body'], `${images.length} images (${images.map((i) => i.name).join(', ')}): a request may have at most ${IMAGE_LIMITS.maxImages}`);
  for (const image of images) {
    const at = (msg: string) => bad(image.loc, `${image.name} ${msg}`);
    if (image.truncated) at(`is larger than ${MB(IMAGE_LIMITS.maxBytes)}`);
    else if (image.bytes.length > IMAGE_LIMITS.maxBytes) at(`is ${MB(image.bytes.length)}, over the limit of ${MB(IMAGE_LIMITS.maxBytes)}`);
    else if (!sniffFormat(image.bytes)) at(`is ${describeBytes(image.bytes)}, not PNG, JPEG or WebP`);
    else {
      const problem = await headerProblem(image.bytes);
      if (problem) at(problem);
    }
  }
  return problems;
}
