/**
 * The image route over HTTP: a server started with --image-model tiny-qwen2-vl answers requests
 * with images with its image engine (a second engine process), in each of the three forms, with the
 * probabilities the float64 reference gives for the same sharp RGB; caches by content; headers,
 * /health's image_engine group, bad images (422 naming them), and the image engine's death.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { preprocessImage } from '../../src/images/preprocess';
import { dataUrl, multipartBody, png, texture } from '../helpers/images';
import { tinyModel } from '../helpers/models';
import { maxAbsDiff } from '../helpers/reference';
import { killAndAwaitDeadHealth, rawRequest, RunningServer, startServer } from '../helpers/server';
import { referenceVlmLogits } from '../helpers/vlm-reference';

let server: RunningServer;
let red: Buffer, blue: Buffer;
const questions = { photo: { type: 'noul', instructions: 'Is it a photo?' }, kind: { type: 'choice', criteria: { cat: 'a cat', dog: 'a dog', car: 'a car' } } };

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-image-route-'));
const tasksFile = path.join(dir, 'tasks.json');

beforeAll(async () => {
  server = await startServer(['--image-model', 'tiny-qwen2-vl', '--debug-readout', '--tasks-file', tasksFile]);
  red = await png(90, 60, 31);
  blue = await png(90, 60, 32);
}, 120_000);
afterAll(async () => {
  await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

const ask = (body: unknown, headers: Record<string, string> = {}) => server.post('/v1/systemone', body, headers);
async function askMultipart(request: unknown, files: [string, Buffer, string][]) {
  const { body, contentType } = multipartBody([['request', JSON.stringify(request)], ...files]);
  const res = await rawRequest(server.url, 'POST', '/v1/systemone', body, { 'content-type': contentType });
  return { status: res.status, body: JSON.parse(res.body), headers: res.headers };
}

describe('the three forms', () => {
  test('images, a data URI leading the state, and a multipart file give the same prompt and the same answers', async () => {
    const viaImages = await ask({ state: 'A picture.', images: [dataUrl(red)], questions });
    const inState = await ask({ state: `${dataUrl(red)}\nA picture.`, questions });
    const viaFile = await askMultipart({ state: 'A picture.', questions }, [['image', red, 'red.png']]);
    for (const r of [viaImages, inState, viaFile]) {
      expect(r.status).toBe(200);
      expect(r.body.answers.kind.choice).toMatch(/^(cat|dog|car)$/);
    }
    expect(viaImages.headers.get('x-service-route')).toBe('image');
    expect(JSON.stringify(inState.body.answers)).toBe(JSON.stringify(viaImages.body.answers));
    expect(JSON.stringify(viaFile.body.answers)).toBe(JSON.stringify(viaImages.body.answers));
    // 84 x 56 after smart_resize: 3 x 2 = 6 image tokens in place of one placeholder, counted in usage.
    const { readout } = (await ask({ state: 'A picture.', images: [dataUrl(red)], questions }, { 'x-service-debug': 'readout' })).body;
    const stateTokens = readout.photo.state_token_count, prefix = stateTokens - 5;
    expect(readout.photo.prompt_token_ids.slice(0, prefix).filter((t: number) => t === 151655)).toHaveLength(1);
    const questionTokens = Object.values(readout).reduce((s: number, q: any) => s + q.prompt_token_ids.length - prefix, 0);
    expect(viaImages.body.usage.input_tokens).toBe(stateTokens + questionTokens);
  });

  test('a data URI inside a state object stands where it was; two images in one request', async () => {
    const r = await ask({ state: { caption: 'two cars', photo: dataUrl(blue), note: 'see above' }, images: [dataUrl(red)], questions });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-service-route')).toBe('image');
    const swapped = await ask({ state: { caption: 'two cars', photo: dataUrl(red), note: 'see above' }, images: [dataUrl(blue)], questions });
    expect(JSON.stringify(swapped.body.answers)).not.toBe(JSON.stringify(r.body.answers));
  });
});

test('the readout equals the float64 reference on the same RGB (debug readout, both questions)', async () => {
  const r = await ask({ state: `Two pictures: ${dataUrl(red)} and ${dataUrl(blue)}.`, questions }, { 'x-service-debug': 'readout' });
  expect(r.status).toBe(200);
  const images = [await preprocessImage(red), await preprocessImage(blue)];
  for (const name of Object.keys(questions)) {
    const q = r.body.readout[name];
    // prompt_token_ids hold one placeholder per image, as the engine received them.
    const [ref] = await referenceVlmLogits(tinyModel('tiny-qwen2-vl'), [{ tokens: q.prompt_token_ids, images }]);
    const last = ref[ref.length - 1];
    expect(maxAbsDiff(q.label_logits, q.label_token_ids.map((id: number) => last[id]))).toBeLessThanOrEqual(1e-4);
    // Each 84 x 56 image is 6 tokens in place of its one placeholder.
    expect(ref.length).toBe(q.prompt_token_ids.length + 2 * 5);
  }
}, 60_000);

describe('caching by content', () => {
  const health = async () => (await server.get('/health')).body.image_engine.cache;
  test('the same image again hits the KV cache; a different image of the same size gets its own answer', async () => {
    const body = (image: Buffer) => ({ state: 'Cache test.', images: [dataUrl(image)], questions });
    const first = await ask(body(red));
    const before = await health();
    const again = await ask(body(red));
    const after = await health();
    expect(JSON.stringify(again.body.answers)).toBe(JSON.stringify(first.body.answers));
    expect(after.prefix.hit_tokens).toBeGreaterThan(before.prefix.hit_tokens);
    const other = await ask(body(blue));
    expect(JSON.stringify(other.body.answers)).not.toBe(JSON.stringify(first.body.answers));
    // The image after other text: the vision tower's output is reused.
    const vision = (await health()).vision_outputs;
    await ask({ state: 'Other words first.', images: [dataUrl(red)], questions });
    const now = (await health()).vision_outputs;
    expect(now.hits).toBe(vision.hits + 1);
    expect(now.misses).toBe(vision.misses);
  });
});

test('/health reports the image engine: model, vision config, pixel budget, recipe and versions', async () => {
  const h = (await server.get('/health')).body.image_engine;
  expect(h.model).toMatchObject({ name: 'tiny-qwen2-vl', architecture: 'Qwen2VLForConditionalGeneration', random_weights: true });
  expect(h.vision).toMatchObject({ depth: 2, embed_dim: 32, patch_size: 14, merge_size: 2, token_ids: { vision_start: 151652, image_pad: 151655, vision_end: 151653 } });
  expect(h.pixel_budget).toMatchObject({ max_tokens: 1024, factor: 28, max_pixels: 1024 * 28 * 28 });
  expect(h.recipe.version).toMatch(/^qwen2vl-sharp/);
  expect(h.recipe.sharp).toMatchObject({ sharp: '0.35.5' });
  expect(typeof h.model.engine_process.pid).toBe('number');
});

describe('abstention tasks with images (match imajev_extension), read by the image engine', () => {
  const pictures = async (n: number, seed: number) => Promise.all(Array.from({ length: n }, (_, i) => png(56 + 28 * (i % 3), 56, seed + i)));
  const examples = async (): Promise<{ request: Record<string, unknown>; answer: string | null }[]> => [
    ...(await pictures(12, 100)).map((p, i) => ({ request: { state: `Photo ${i}.`, images: [dataUrl(p)], questions: { q: questions.kind } }, answer: ['cat', 'dog', 'car'][i % 3] })),
    ...(await pictures(12, 200)).map((p, i) => ({ request: { state: `Blurred photo ${i}: ${dataUrl(p)}`, questions: { q: questions.kind } }, answer: null })),
  ];

  test('registers through the image engine under its own fingerprint; the text route never applies it', async () => {
    const r = await server.post('/v1/abstention/tasks', { id: 'blurred', option: { append: "can't tell" }, match: 'imajev_extension', examples: await examples() });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ id: 'blurred', match: 'imajev_extension' });
    expect(r.body.record.counts ?? r.body.record).toBeDefined();
    const full = (await server.get('/v1/tasks?full=1')).body;
    const task = full.abstention_tasks.find((t: any) => t.id === 'blurred');
    expect(task.fingerprint_components.image_recipe).toMatch(/^[0-9a-f]{16}$/);
    expect(task.fingerprint).not.toBe(full.fingerprint);
    const text = await ask({ state: 'Words only.', questions: { q: questions.kind } });
    expect(text.headers.get('x-service-tasks')).toBeNull();
    if (task.applied) {
      const image = await ask({ state: 'A photo.', images: [dataUrl(red)], questions: { q: questions.kind } });
      expect(image.headers.get('x-service-tasks')).toBe('abstention:blurred');
    }
  });

  test('an example image that is not an image: 422 naming the example; option_set examples with images: 422', async () => {
    const list = await examples();
    list[3] = { ...list[3], request: { ...list[3].request, images: ['data:image/png;base64,AAAA'] } };
    const bad = await server.post('/v1/abstention/tasks', { id: 'blurred', option: { append: "can't tell" }, match: 'imajev_extension', examples: list });
    expect(bad.status).toBe(422);
    expect(JSON.stringify(bad.body.detail)).toMatch(/example 3: images\.0 is/);
    const textual = await server.post('/v1/abstention/tasks', { id: 'bad', option: { append: "can't tell" }, examples: await examples() });
    expect(textual.status).toBe(422);
    expect(JSON.stringify(textual.body.detail)).toMatch(/imajev_extension/);
  });

  test('a server without --image-model refuses the stored image-route task at start, naming the flag', async () => {
    const other = await startServer(['--tasks-file', tasksFile]);
    try {
      expect(other.log()).toMatch(/abstention task blurred in --tasks-file refused: an image-route abstention task \(match imajev_extension\) needs a server started with --image-model/);
    } finally {
      await other.stop();
    }
    expect(JSON.parse(fs.readFileSync(tasksFile, 'utf8')).abstention_tasks.map((t: any) => t.id)).toContain('blurred');
  }, 60_000);

  test('--abstention off: image questions asked the same (the task\'s option appended), the same bytes; only abstained by the default rule', async () => {
    const blurred = (await server.get('/v1/tasks?full=1')).body.abstention_tasks.find((t: any) => t.id === 'blurred');
    // Its threshold made to decide every question (τ = 0): on and off then decide apart wherever the default rule answers.
    const deciding = { ...blurred, applied: true, threshold: 0, record: { ...blurred.record, applied: true, reason: undefined } };
    expect((await server.post('/v1/tasks/import', { abstention_tasks: [deciding] })).body.abstention).toEqual({ loaded: ['blurred'], refused: [] });
    const offFile = path.join(dir, 'off.json');
    fs.copyFileSync(tasksFile, offFile);
    const off = await startServer(['--image-model', 'tiny-qwen2-vl', '--tasks-file', offFile, '--abstention', 'off']);
    try {
      let decidedApart = 0;
      for (let i = 0; i < 6; i++) {
        const body = { state: `Photo ${i}.`, images: [dataUrl(await png(56 + 28 * (i % 2), 56, 300 + i))], questions: { q: questions.kind } };
        const [a, b] = await Promise.all([ask(body), off.post('/v1/systemone', body)]);
        expect([a.headers.get('x-service-tasks'), b.headers.get('x-service-tasks')]).toEqual(['abstention:blurred', null]);
        const [x, y] = [a.body.answers.q, b.body.answers.q];
        expect(JSON.stringify(y.probabilities)).toBe(JSON.stringify(x.probabilities));
        expect(y.unknown_probability).toBe(x.unknown_probability);
        expect(x.abstained).toBe(true);
        // The default rule: the appended option more probable than each other option (its share put back).
        expect(y.abstained).toBe(Object.values(y.probabilities as Record<string, number>).every((p) => y.unknown_probability > p * (1 - y.unknown_probability)));
        if (!y.abstained) decidedApart++;
      }
      expect(decidedApart).toBeGreaterThan(0);
    } finally {
      await off.stop();
    }
  }, 120_000);
});

describe('routing and errors, the server up afterwards', () => {
  test('x-service-route: image answers a text-only request with the image engine; text refuses images', async () => {
    const viaImage = await ask({ state: 'Just words.', questions }, { 'x-service-route': 'image' });
    expect(viaImage.status).toBe(200);
    expect(viaImage.headers.get('x-service-route')).toBe('image');
    const viaText = await ask({ state: 'Just words.', questions });
    expect(viaText.headers.get('x-service-route')).toBe('text');
    expect(JSON.stringify(viaText.body.answers)).not.toBe(JSON.stringify(viaImage.body.answers));
    const refused = await ask({ state: 'x', images: [dataUrl(red)], questions }, { 'x-service-route': 'text' });
    expect(refused.status).toBe(400);
    expect(refused.body.detail).toMatch(/x-service-route: text cannot answer a request with images/);
  });

  test.each([
    ['the image tokens written as text in the state', () => ({ state: 'see <|vision_start|><|image_pad|><|vision_end|>', images: [dataUrl(red)], questions }), /image placeholder tokens/],
    ['three images', () => ({ state: 'x', images: [dataUrl(red), dataUrl(blue), dataUrl(red)], questions }), /at most 2/],
    ['a GIF', () => ({ state: 'x', images: ['data:image/gif;base64,R0lGODlhAQABAAAAACw='], questions }), /GIF/],
  ])('%s: 422 naming the problem', async (_name, body, detail) => {
    const r = await ask(body());
    expect(r.status).toBe(422);
    expect(JSON.stringify(r.body.detail)).toMatch(detail);
  });

  test('a PNG whose header reads but whose pixels do not decode: 422 naming the image', async () => {
    const big = await texture(200, 200, 9).png({ compressionLevel: 0 }).toBuffer();
    const cut = big.subarray(0, Math.floor(big.length / 2));
    const r = await ask({ state: 'x', images: [dataUrl(red), dataUrl(cut)], questions });
    expect(r.status).toBe(422);
    expect(r.body.detail[0].loc).toEqual(['body', 'images', 1]);
    expect(r.body.detail[0].msg).toMatch(/^images\.1 cannot be decoded/);
    expect((await ask({ state: 'still up', images: [dataUrl(red)], questions })).status).toBe(200);
  });

  test('the image engine dying is an engine death: 503, then exit code 70', async () => {
    const pid = (await server.get('/health')).body.image_engine.model.engine_process.pid;
    const h = await killAndAwaitDeadHealth(server, pid);
    expect(h.body.reason).toMatch(/image engine/);
    expect(await server.exited).toBe(70);
  });
});

test('--image-model with a text-only checkpoint fails at start-up, naming it', async () => {
  await expect(startServer(['--image-model', 'tiny-qwen2'])).rejects.toThrow(/not a vision-language model/);
}, 60_000);
