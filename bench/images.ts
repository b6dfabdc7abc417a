/**
 * Image benchmark (not a test): `npm run bench:images`. (docs/images.md.)
 *   1. Preprocessing (the recipe, src/images/preprocess.ts: sharp decode, EXIF orientation, sRGB,
 *      flatten, smart_resize and cubic resize to raw RGB) per image by size and format, within the
 *      default budget of --image-max-tokens 1024: the median of 7 runs, in this process.
 *   2. Through the real server over HTTP with --image-model bench-qwen2-vl (random weights: Qwen2-0.5B's
 *      text shape, and 8 ViT blocks of Qwen2-VL-2B's width 1280, a quarter of its 32), a 1024 x 768
 *      JPEG (999 image tokens) with two questions: a cold image question (decode + ViT + prefill), the
 *      same image again (its KV blocks from the prefix cache), the same image after other text (the
 *      vision-output cache, the image's tokens computed again), and the same question about text only
 *      for scale. Each the median of 5 fresh images (cold) or repeats, with the server's stages.
 *   3. The peer: llama.cpp's image path through node-llama-cpp, if its binding can run this family.
 * IMAGES_PARTS (comma-separated numbers, default 1,2,3) chooses the parts.
 */
import * as fs from 'fs';
import * as path from 'path';
import { performance } from 'perf_hooks';
import { budgetOfTokens, preprocessImage } from '../src/images/preprocess';
import { generateTestModel } from '../src/testmodels/generate';
import { dataUrl, texture } from '../test/helpers/images';
import { startServerProcess } from '../test/helpers/server-process';
import { serviceStages } from './workload';

const f = (x: number, d = 1) => x.toFixed(d);
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

async function preprocessing() {
  console.log('\n## 1. Preprocessing per image (sharp 0.35.5, budget 1024 tokens)\n');
  console.log('| input | bytes | resized to | tokens | median ms |');
  console.log('|---|---|---|---|---|');
  const budget = budgetOfTokens(1024);
  const cases: [string, () => Promise<Buffer>][] = [
    ['PNG 256 x 256', () => texture(256, 256, 1).png().toBuffer()],
    ['JPEG 1024 x 768', () => texture(1024, 768, 2).jpeg({ quality: 90 }).toBuffer()],
    ['WebP 1024 x 768', () => texture(1024, 768, 3).webp({ quality: 90 }).toBuffer()],
    ['JPEG 2048 x 1536 (3 MP)', () => texture(2048, 1536, 4).jpeg({ quality: 90 }).toBuffer()],
    ['JPEG 4032 x 3024 (12 MP, phone photo)', () => texture(4032, 3024, 5).jpeg({ quality: 90 }).toBuffer()],
    ['PNG 4032 x 3024 with alpha (over the 20 MB request limit: the recipe alone)', () => texture(4032, 3024, 6, 4).png().toBuffer()],
  ];
  for (const [name, make] of cases) {
    const bytes = await make();
    const times: number[] = [];
    let out;
    for (let i = 0; i < 7; i++) {
      const t0 = performance.now();
      out = await preprocessImage(bytes, budget);
      times.push(performance.now() - t0);
    }
    console.log(`| ${name} | ${(bytes.length / 1e6).toFixed(2)} MB | ${out!.width} x ${out!.height} | ${(out!.width / 28) * (out!.height / 28)} | ${f(median(times))} |`);
  }
}

async function served() {
  console.log('\n## 2. Image questions through the server (--image-model bench-qwen2-vl, bf16, 2 threads)\n');
  generateTestModel('bench-qwen2-vl');
  const s = await startServerProcess(['--port', '0', '--base', 'tiny-qwen3', '--image-model', 'bench-qwen2-vl', '--dtype', 'bf16']);
  try {
    const questions = { photo: { type: 'noul', instructions: 'Is this a photograph?' }, kind: { type: 'choice', criteria: { cat: 'a cat', dog: 'a dog', car: 'a car', none: 'none of these' } } };
    const image = async (seed: number) => dataUrl(await texture(1024, 768, seed).jpeg({ quality: 90 }).toBuffer(), 'image/jpeg');
    const ask = async (body: object, headers: Record<string, string> = {}) => {
      const t0 = performance.now();
      const r = await s.post('/v1/systemone', body, headers);
      if (r.status !== 200) throw new Error(JSON.stringify(r.body));
      const stages = serviceStages(String(r.headers['x-service-stages']));
      return { ms: performance.now() - t0, stages, tokens: r.body.usage.input_tokens as number };
    };
    await ask({ state: 'warm-up', images: [await image(99)], questions });
    const rows: [string, { ms: number; stages: Record<string, number>; tokens: number }[]][] = [];
    const cold = [];
    for (let i = 0; i < 5; i++) cold.push(await ask({ state: `Photo ${i}.`, images: [await image(i)], questions }));
    rows.push(['cold: a new image (decode + ViT + prefill)', cold]);
    const same = await image(0);
    const again = [];
    for (let i = 0; i < 5; i++) again.push(await ask({ state: 'Photo 0.', images: [same], questions }));
    rows.push(['the same image again (KV blocks cached)', again]);
    const other = [];
    for (let i = 0; i < 5; i++) other.push(await ask({ state: `Another caption ${i}: ${same}`, questions }));
    rows.push(['the same image after other text (vision cache; its tokens recomputed)', other]);
    const text = [];
    for (let i = 0; i < 5; i++) text.push(await ask({ state: `A caption with no picture, number ${i}.`, questions }, { 'x-service-route': 'image' }));
    rows.push(['text only, same questions, image route (for scale)', text]);
    console.log('| request | input tokens | median ms (client) | prepare (decode) | warm (ViT + state) | questions | readout |');
    console.log('|---|---|---|---|---|---|---|');
    for (const [name, rs] of rows) {
      const m = (k: string) => f(median(rs.map((r) => r.stages[k])));
      console.log(`| ${name} | ${rs[0].tokens} | ${f(median(rs.map((r) => r.ms)))} | ${m('prepare')} | ${m('warm')} | ${m('questions')} | ${m('readout')} |`);
    }
    const h = (await s.get('/health')).body.image_engine.cache;
    console.log(`\nCaches after the run: prefix ${h.prefix.hit_tokens} hit / ${h.prefix.miss_tokens} missed tokens; vision outputs ${h.vision_outputs.hits} hits, ${h.vision_outputs.misses} misses.`);
  } finally {
    await s.stop();
  }
}

function peer() {
  console.log('\n## 3. Peer: llama.cpp\n');
  const version = JSON.parse(fs.readFileSync(path.resolve(__dirname, '..', 'node_modules', 'node-llama-cpp', 'package.json'), 'utf8')).version;
  console.log(
    `Not measured. node-llama-cpp ${version} (the prebuilt llama.cpp this project can install offline) exposes no image input: its JS API ` +
      'has no multimodal (mtmd / mmproj) call and its addon links no mtmd entry point, and no llama-mtmd-cli binary ships with it. ' +
      "A Qwen2-VL GGUF and its mmproj would also need llama.cpp's Python converter, which needs PyPI (unreachable here).",
  );
}

async function main() {
  const parts = new Set((process.env.IMAGES_PARTS ?? '1,2,3').split(','));
  if (parts.has('1')) await preprocessing();
  if (parts.has('2')) await served();
  if (parts.has('3')) peer();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
