/** Test images made by sharp: textured (so a vision tower sees structure), in every accepted form. */
import sharp from 'sharp';

/** A deterministic texture: each seed gives a different picture of the same size. */
export function texture(width: number, height: number, seed: number, channels: 3 | 4 = 3): ReturnType<typeof sharp> {
  const raw = Buffer.alloc(width * height * channels);
  let s = seed * 2654435761 + 1;
  for (let y = 0; y < height; y++)
    for (let x = 0; x < width; x++)
      for (let c = 0; c < channels; c++) {
        s = (s * 1103515245 + 12345) >>> 0;
        const wave = 128 + 100 * Math.sin((x * (c + 1) + y * (3 - c) + seed * 7) / 6);
        raw[(y * width + x) * channels + c] = c === 3 ? (x * 255) / width : Math.max(0, Math.min(255, wave + ((s >>> 24) % 40) - 20));
      }
  return sharp(raw, { raw: { width, height, channels } });
}

export const png = (w: number, h: number, seed = 1) => texture(w, h, seed).png().toBuffer();

/** The accepted forms, each a different way to reach the recipe's RGB. */
export const imageForms: Record<string, () => Promise<Buffer>> = {
  'non-square PNG (wide)': () => png(90, 60, 1),
  'non-square PNG (tall)': () => png(50, 120, 2),
  'tiny PNG, upscaled to the minimum': () => png(9, 7, 3),
  'PNG with alpha': () => texture(70, 70, 4, 4).png().toBuffer(),
  'CMYK JPEG': () => texture(64, 80, 5).toColourspace('cmyk').jpeg({ quality: 95 }).toBuffer(),
  'EXIF-rotated JPEG': () => texture(100, 60, 6).jpeg({ quality: 95 }).withMetadata({ orientation: 6 }).toBuffer(),
  WebP: () => texture(80, 64, 7).webp({ quality: 90 }).toBuffer(),
};

/** A multipart/form-data body of fields and files ([field, value, filename?]). */
export function multipartBody(parts: [string, Buffer | string, string?][]): { body: Buffer; contentType: string } {
  const boundary = 'tq-test-boundary-7f3a';
  const chunks = parts.flatMap(([field, value, filename]) => [
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${field}"${filename ? `; filename="${filename}"\r\nContent-Type: application/octet-stream` : ''}\r\n\r\n`),
    Buffer.from(value),
    Buffer.from('\r\n'),
  ]);
  return { body: Buffer.concat([...chunks, Buffer.from(`--${boundary}--\r\n`)]), contentType: `multipart/form-data; boundary=${boundary}` };
}

export const dataUrl = (b: Buffer, type = 'image/png') => `data:${type};base64,${b.toString('base64')}`;
