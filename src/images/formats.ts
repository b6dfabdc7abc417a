/**
 * Image limits and formats (docs/images.md): at most 2 images per request, each at most
 * 20 MB, PNG, JPEG or WebP identified by their bytes, never by a declared type; and at most
 * 64 megapixels, read from the header before anything is decoded, so that a small file that
 * would decode to gigabytes (a decompression bomb) is refused.
 */
export const IMAGE_LIMITS = { maxImages: 2, maxBytes: 20 * 1000 * 1000, maxPixels: 64 * 1024 * 1024 };

/** A server started without --image-model (and decide) answers every request with images with this (400). */
export const NO_IMAGE_ENGINE = 'this server has no image engine: images need a server started with --image-model';

export type ImageFormat = 'png' | 'jpeg' | 'webp';

/** The format the bytes are in, from their signature; undefined for anything else. */
export function sniffFormat(b: Uint8Array): ImageFormat | undefined {
  const at = (i: number, bytes: number[]) => bytes.every((v, j) => b[i + j] === v);
  if (at(0, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return 'png';
  if (at(0, [0xff, 0xd8, 0xff])) return 'jpeg';
  if (at(0, [0x52, 0x49, 0x46, 0x46]) && at(8, [0x57, 0x45, 0x42, 0x50])) return 'webp'; // RIFF....WEBP
  return undefined;
}

/** What other bytes are, to say so in an error. */
export function describeBytes(b: Uint8Array): string {
  if (b.length === 0) return 'no bytes';
  const ascii = Buffer.from(b.subarray(0, 16)).toString('latin1');
  if (ascii.startsWith('GIF8')) return 'a GIF';
  if (ascii.startsWith('BM')) return 'a BMP';
  if (ascii.startsWith('II*\0') || ascii.startsWith('MM\0*')) return 'a TIFF';
  if (/^\s*<(\?xml|svg)/i.test(ascii)) return 'SVG or XML text';
  if (ascii.startsWith('%PDF')) return 'a PDF';
  return `bytes starting ${Buffer.from(b.subarray(0, 4)).toString('hex')}`;
}
