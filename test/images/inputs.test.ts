/**
 * Image input on the main route (docs/images.md): the three forms (data URLs in `images`,
 * data URIs inside `state`, multipart/form-data files), the limits (2 images, 20 MB, 64 megapixels)
 * and bad images of many kinds, each a 422 whose detail names the image and the problem, the server
 * up after them. Well-formed images reach the routing step: 400 naming --image-model while the
 * server has no image engine. Test images are made by sharp here.
 */
import sharp from 'sharp';
import { dataUrl, multipartBody } from '../helpers/images';
import { detailText, expectProblems, rawRequest, RunningServer, startServer } from '../helpers/server';

jest.setTimeout(120_000);

let server: RunningServer;
let png: Buffer, jpeg: Buffer, webp: Buffer, alphaPng: Buffer, gif: Buffer, tiff: Buffer, bomb: Buffer;

const make = (w: number, h: number, channels: 3 | 4 = 3) => sharp({ create: { width: w, height: h, channels, background: { r: 200, g: 40, b: 90, alpha: 0.5 } } });

/** CRC-32 (PNG chunks). */
function crc32(b: Buffer): number {
  let c = ~0;
  for (const byte of b) {
    c ^= byte;
    for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
  }
  return ~c >>> 0;
}

/** A small PNG whose header claims width x height: read from the header, never decoded. */
function claimingSize(source: Buffer, width: number, height: number): Buffer {
  const b = Buffer.from(source);
  b.writeUInt32BE(width, 16);
  b.writeUInt32BE(height, 20);
  b.writeUInt32BE(crc32(b.subarray(12, 29)), 29); // IHDR type + data
  return b;
}

beforeAll(async () => {
  server = await startServer();
  [png, jpeg, webp, alphaPng, gif, tiff] = await Promise.all([
    make(40, 30).png().toBuffer(),
    make(40, 30).jpeg().toBuffer(),
    make(40, 30).webp().toBuffer(),
    make(20, 20, 4).png().toBuffer(),
    make(20, 20).gif().toBuffer(),
    make(20, 20).tiff().toBuffer(),
  ]);
  bomb = claimingSize(png, 20_000, 20_000);
});
afterAll(() => server.stop());

const question = { q: { type: 'noul', instructions: 'Is there a cat?' } };
const ask = (body: object) => server.post('/v1/systemone', { questions: question, ...body });

/** A multipart/form-data request written out by hand (parts: field, value, filename for a file). */
async function multipart(parts: [string, Buffer | string, string?][]) {
  const { body, contentType } = multipartBody(parts);
  const res = await rawRequest(server.url, 'POST', '/v1/systemone', body, { 'content-type': contentType });
  return { status: res.status, body: JSON.parse(res.body) };
}
const requestField = JSON.stringify({ state: 'A photo.', questions: question });

describe('well-formed images in each form reach routing: 400 naming --image-model', () => {
  test.each([
    ['a PNG in images', () => ({ state: 'x', images: [dataUrl(png)] })],
    ['a JPEG and a WebP in images', () => ({ state: 'x', images: [dataUrl(jpeg, 'image/jpeg'), dataUrl(webp, 'image/webp')] })],
    ['a PNG declared as JPEG (the bytes decide)', () => ({ state: 'x', images: [dataUrl(png, 'image/jpeg')] })],
    ['an alpha PNG inside the state', () => ({ state: `Before ${dataUrl(alphaPng)} after.` })],
    ['one in images and one inside a state object', () => ({ state: { caption: 'two', photo: dataUrl(jpeg, 'image/jpeg') }, images: [dataUrl(png)] })],
  ])('%s', async (_name, body) => {
    const r = await ask(body());
    expect(r.status).toBe(400);
    expect(r.body.detail).toBe('this server has no image engine: images need a server started with --image-model');
  });

  test('a multipart request with two files (fields image and image[])', async () => {
    const r = await multipart([['request', requestField], ['image', png, 'a.png'], ['image[]', webp, 'b.webp']]);
    expect(r.status).toBe(400);
    expect(r.body.detail).toMatch(/--image-model/);
  });

  test('x-service-route: image without images, and text with images', async () => {
    const r = await server.post('/v1/systemone', { state: 'x', questions: question }, { 'x-service-route': 'image' });
    expect(r.status).toBe(400);
    expect(r.body.detail).toMatch(/--image-model/);
    const text = await server.post('/v1/systemone', { state: 'x', questions: question });
    expect(text.status).toBe(200);
    expect(text.headers.get('x-service-route')).toBe('text');
  });
});

const twentyMb = () => Buffer.concat([png.subarray(0, 8), Buffer.alloc(20_000_001)]);
const bad: [string, () => Promise<{ status: number; body: any }>, RegExp][] = [
  ['three images', () => ask({ state: 'x', images: [dataUrl(png), dataUrl(png), dataUrl(jpeg, 'image/jpeg')] }), /3 images \(images\.0, images\.1, images\.2\): a request may have at most 2/],
  ['two in images and one in the state', () => ask({ state: `see ${dataUrl(webp, 'image/webp')}`, images: [dataUrl(png), dataUrl(png)] }), /3 images .*state image 1.*at most 2/],
  ['an image over 20 MB', () => ask({ state: 'x', images: [dataUrl(twentyMb())] }), /images\.0 is 20\.0 MB, over the limit of 20\.0 MB/],
  ['a URL, not a data URL', () => ask({ state: 'x', images: ['https://example.com/cat.png'] }), /images\.0: must be a data URL/],
  ['a data URL without base64', () => ask({ state: 'x', images: ['data:image/png,rawbytes'] }), /images\.0: must be a base64 data URL/],
  ['invalid base64', () => ask({ state: 'x', images: ['data:image/png;base64,@@@@'] }), /images\.0: is not valid base64/],
  ['an empty image', () => ask({ state: 'x', images: ['data:image/png;base64,'] }), /images\.0 is no bytes, not PNG, JPEG or WebP/],
  ['a GIF', () => ask({ state: 'x', images: [dataUrl(gif, 'image/gif')] }), /images\.0 is a GIF, not PNG, JPEG or WebP/],
  ['a TIFF declared as PNG', () => ask({ state: 'x', images: [dataUrl(tiff)] }), /images\.0 is a TIFF, not PNG, JPEG or WebP/],
  ['SVG text', () => ask({ state: 'x', images: [dataUrl(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>'), 'image/svg+xml')] }), /images\.0 is SVG or XML text/],
  ['random bytes', () => ask({ state: 'x', images: [dataUrl(Buffer.from('hello world, not an image'))] }), /images\.0 is bytes starting 68656c6c, not PNG, JPEG or WebP/],
  ['a PNG signature then garbage', () => ask({ state: 'x', images: [dataUrl(Buffer.concat([png.subarray(0, 8), Buffer.from('garbage garbage garbage')]))] }), /images\.0 cannot be read: /],
  ['a JPEG cut after its first bytes', () => ask({ state: 'x', images: [dataUrl(jpeg.subarray(0, 12), 'image/jpeg')] }), /images\.0 cannot be read: /],
  ['a decompression bomb (20,000 x 20,000 in a small file)', () => ask({ state: 'x', images: [dataUrl(bomb)] }), /images\.0 is 20000 x 20000 = 400000000 pixels, over the limit of 67108864/],
  ['a corrupt image inside the state', () => ask({ state: `look: ${dataUrl(Buffer.from('GIF89a...'), 'image/gif')}` }), /state image 1 is a GIF/],
  ['multipart with three files', () => multipart([['request', requestField], ['image', png, 'a.png'], ['images', png, 'b.png'], ['image[]', png, 'c.png']]), /more than 2 image files/],
  ['multipart with a file over 20 MB', () => multipart([['request', requestField], ['image', twentyMb(), 'big.png']]), /file "big\.png" \(field image\) is larger than 20\.0 MB/],
  ['multipart with a GIF', () => multipart([['request', requestField], ['image', gif, 'a.gif']]), /file "a\.gif" \(field image\) is a GIF/],
  ['multipart without a request field', () => multipart([['image', png, 'a.png']]), /needs a "request" field holding the JSON body/],
  ['multipart whose request is not JSON', () => multipart([['request', '{nope'], ['image', png, 'a.png']]), /body is not valid JSON/],
  ['multipart with a file in another field', () => multipart([['request', requestField], ['photo', png, 'a.png']]), /the file "a\.png" is in the field "photo": send images in "image", "images", "image\[\]"/],
];

test.each(bad)('%s → 422 naming the image and the problem', async (_name, send, detail) => {
  const r = await send();
  expect(r.status).toBe(422);
  expectProblems(r.body);
  expect(detailText(r.body)).toMatch(detail);
});

test('after every bad image the server is up and answers text', async () => {
  expect((await server.get('/health')).status).toBe(200);
  const r = await ask({ state: 'A plain text state.' });
  expect(r.status).toBe(200);
});

test('task examples are text only: an image inside a state is refused', async () => {
  const examples = Array.from({ length: 10 }, (_, i) => ({ request: { state: i === 2 ? `x ${dataUrl(png)}` : `s${i}`, questions: question }, answer: i % 2 === 0 }));
  const r = await server.post('/v1/tasks', { id: 'pictures', examples });
  expect(r.status).toBe(422);
  expect(detailText(r.body)).toMatch(/examples\.2\.request\.images: task examples are text only/);
});
