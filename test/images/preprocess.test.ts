/**
 * The Qwen2-VL image recipe (src/images/preprocess.ts): smart_resize against Python's own
 * arithmetic (Debian python3: round half to even, floor, ceil), and sharp's output for EXIF-rotated
 * and CMYK JPEGs, alpha PNGs, WebP and a tiny upscaled image.
 */
import { execFileSync } from 'child_process';
import sharp from 'sharp';
import { ImageShapeError, preprocessImage, QWEN2VL_BUDGET, smartResize } from '../../src/images/preprocess';
import { imageKey } from '../../src/images/key';

const PYTHON_SMART_RESIZE = `
import json, math, sys
def smart_resize(height, width, factor=28, min_pixels=56*56, max_pixels=28*28*16384):
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return [h_bar, w_bar]
print(json.dumps([smart_resize(h, w) for h, w in json.loads(sys.stdin.read())]))
`;

test('smart_resize equals Python\'s on 400 sizes: halves rounding to even, tiny, huge and elongated images', () => {
  const sizes: [number, number][] = [];
  for (let i = 0; i < 400; i++) {
    const pick = [1, 5, 13, 14, 42, 70, 98, 126, 200, 333, 640, 1024, 1920, 3000, 4032, 5000, 8000, 12000][i % 18];
    const other = [1, 14, 42, 70, 99, 480, 768, 1080, 2160, 6000][Math.floor(i / 18) % 10] + (i % 7);
    if (Math.max(pick, other) / Math.min(pick, other) <= 200) sizes.push(i % 2 ? [pick, other] : [other, pick]);
  }
  const expected: [number, number][] = JSON.parse(execFileSync('/usr/bin/python3', ['-c', PYTHON_SMART_RESIZE], { input: JSON.stringify(sizes), encoding: 'utf8' }));
  sizes.forEach(([h, w], i) => expect([smartResize(h, w).height, smartResize(h, w).width]).toEqual(expected[i]));
  expect(smartResize(70, 70)).toEqual({ height: 56, width: 56 }); // 70/28 = 2.5 rounds to 2
  expect(smartResize(98, 98)).toEqual({ height: 112, width: 112 }); // 3.5 rounds to 4
  expect(() => smartResize(10, 2011)).toThrow(ImageShapeError);
});

const solid = (w: number, h: number, channels: 3 | 4, background: object) => sharp({ create: { width: w, height: h, channels, background } as any });

test('an EXIF-rotated JPEG is turned upright before its size is chosen', async () => {
  const stored = await solid(40, 20, 3, { r: 10, g: 200, b: 30 }).jpeg().withMetadata({ orientation: 6 }).toBuffer();
  const out = await preprocessImage(stored);
  expect({ width: out.width, height: out.height }).toEqual({ width: smartResize(40, 20).width, height: smartResize(40, 20).height });
  expect(out.height).toBeGreaterThan(out.width);
  expect(out.rgb.length).toBe(out.width * out.height * 3);
});

test('alpha is flattened on white; CMYK becomes sRGB; WebP decodes; a 5 x 5 image is upscaled to 56 x 56', async () => {
  const transparent = await preprocessImage(await solid(30, 30, 4, { r: 0, g: 0, b: 0, alpha: 0 }).png().toBuffer());
  expect(transparent.rgb.every((v) => v === 255)).toBe(true);
  const cmyk = await preprocessImage(await solid(30, 30, 3, { r: 200, g: 40, b: 90 }).toColourspace('cmyk').jpeg({ quality: 100 }).toBuffer());
  expect(cmyk.rgb.length).toBe(cmyk.width * cmyk.height * 3);
  // A CMYK round trip without embedded profiles moves colours by up to ~20 levels; the channels stay in place.
  expect(Math.abs(cmyk.rgb[0] - 200)).toBeLessThan(32);
  expect(Math.abs(cmyk.rgb[1] - 40)).toBeLessThan(32);
  expect(Math.abs(cmyk.rgb[2] - 90)).toBeLessThan(32);
  const webp = await preprocessImage(await solid(60, 40, 3, { r: 1, g: 2, b: 250 }).webp({ lossless: true }).toBuffer());
  expect([webp.width, webp.height]).toEqual([smartResize(40, 60).width, smartResize(40, 60).height]);
  expect([...webp.rgb.subarray(0, 3)]).toEqual([1, 2, 250]);
  const tiny = await preprocessImage(await solid(5, 5, 3, { r: 9, g: 9, b: 9 }).png().toBuffer());
  expect([tiny.width, tiny.height]).toEqual([56, 56]);
  expect(QWEN2VL_BUDGET.factor).toBe(28);
});

test("an image's content key: the same for the same pixels, model and cache salt; another for another salt or none", async () => {
  const image = await preprocessImage(await solid(40, 30, 3, { r: 10, g: 200, b: 30 }).png().toBuffer());
  const model = 'models/tiny-qwen2-vl';
  expect(imageKey(image, model, 'tenant-A')).toBe(imageKey({ ...image, rgb: Buffer.from(image.rgb) }, model, 'tenant-A'));
  const keys = new Set([imageKey(image, model), imageKey(image, model, 'tenant-A'), imageKey(image, model, 'tenant-B'), imageKey(image, 'models/other', 'tenant-A')]);
  expect(keys.size).toBe(4);
});
