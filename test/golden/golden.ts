/**
 * Golden answers: the exact bits of label logits for fixed requests, recorded once in answers.json
 * (test/golden/record.ts) and checked at every instruction set level this CPU runs
 * (test/engine/golden.test.ts). The engine's arithmetic is one (docs/arithmetic.md), so the bits are
 * the same on every x86 CPU, level, thread count, batch and cache state; CI on another CPU kind
 * checks that machines agree.
 *
 * For each tiny model (every text and vision-language family) and each of fp32, bf16 and bf16 with
 * int8 weights, four calls on one engine, in order: a cold state with three questions; the same
 * state again (cached) with the questions reordered and a fourth; another state whose questions
 * share their leading tokens (an option list); and three states in one batch. The requests are
 * stored as token ids (and, for the vision models, an image's size and the seed of its pixels), so
 * that a tokenizer's release cannot change them.
 */
import * as fs from 'fs';
import * as path from 'path';
import { Engine } from '../../src/engine/engine';
import { Dtype, IsaLevel, NativeAnswerRequest, NativeImage, Quantization } from '../../src/engine/native';
import { uniformStream } from '../../src/common/prng';
import { tinyModelNames, visionModelNames } from '../../src/testmodels/specs';
import { bits } from '../helpers/engines';
import { tinyModel } from '../helpers/models';
import { modelTokenizer, tokenizeTexts } from '../helpers/tokens';

export const goldenFile = path.join(__dirname, 'answers.json');
export const goldenModels = [...tinyModelNames, ...visionModelNames];
export const goldenConfigs: { name: string; dtype: Dtype; quantization?: Quantization }[] = [
  { name: 'fp32', dtype: 'fp32' },
  { name: 'bf16', dtype: 'bf16' },
  { name: 'bf16+int8', dtype: 'bf16', quantization: 'int8' },
];

/** An image as stored: its pixels are a PRNG's bytes (sides multiples of 28, as the recipe sizes them). */
export interface GoldenImage {
  width: number;
  height: number;
  seed: number;
}
export interface GoldenRequest {
  state: number[];
  images?: GoldenImage[];
  questions: { tokens: number[]; labelIds: number[] }[];
}
export type GoldenCall = GoldenRequest[];
/** Per call, per request, per question: the label logits' fp32 bytes as hex. */
export type GoldenBits = string[][][];

export interface GoldenFile {
  recorded: { commit: string; cpu: string; levels: string[]; date: string };
  models: Record<string, { calls: GoldenCall[]; answers: Record<string, GoldenBits> }>;
}

export function readGolden(): GoldenFile {
  return JSON.parse(fs.readFileSync(goldenFile, 'utf8'));
}

export function imageOf(im: GoldenImage): NativeImage {
  const rnd = uniformStream(im.seed);
  const rgb = new Uint8Array(im.width * im.height * 3);
  for (let i = 0; i < rgb.length; i++) rgb[i] = Math.floor(rnd() * 256);
  return { rgb, width: im.width, height: im.height, key: [im.seed, im.width, im.height].map((v) => v.toString(16).padStart(8, '0')).join('').padEnd(64, '0') };
}

/** The four calls for a model, from the shared test texts in its own tokenizer (recording only). */
export async function goldenCalls(model: string): Promise<GoldenCall[]> {
  const dir = tinyModel(model);
  const t = await tokenizeTexts(dir);
  const tok = await modelTokenizer(dir);
  const vision = visionModelNames.includes(model);
  const engine = vision ? await Engine.open({ path: dir, threads: 1 }) : undefined;
  const pad = engine?.info.vision;
  await engine?.close();
  // A vision model's states hold an image between their sentences.
  const withImage = (state: number[], seed: number): Pick<GoldenRequest, 'state' | 'images'> =>
    pad ? { state: [...state.slice(0, 9), pad.visionStartId, pad.imagePadId, pad.visionEndId, ...state.slice(9)], images: [{ width: 56, height: 28, seed }] }
      : { state };
  const q = (tokens: number[]) => ({ tokens, labelIds: t.labels });
  const other = [...(await tok.encode('A second note: the shipment to Porto left Rotterdam on Tuesday, a day late, without its invoice.'))];
  const third = [...(await tok.encode('Third: no refund was asked for.'))];
  const options = t.questions[1].slice(0, -3);  // a question's leading tokens, shared by the next ones
  return [
    [{ ...withImage(t.state, 1), questions: [q(t.questions[0]), q(t.questions[1]), q(t.questions[2])] }],
    [{ ...withImage(t.state, 1), questions: [q(t.questions[2]), q(t.questions[1]), q(t.questions[3]), q(t.questions[0])] }],
    [{ ...withImage(other, 2), questions: [q([...options, ...t.questions[0].slice(-3)]), q([...options, ...t.questions[3].slice(-4)]), q(t.questions[1])] }],
    [
      { ...withImage(t.state, 1), questions: [q(t.questions[3])] },
      { ...withImage(other, 2), questions: [q(t.questions[0]), q(t.questions[2])] },
      { ...withImage(third, 3), questions: [q(t.questions[1])] },
    ],
  ];
}

/** The calls answered in order on one engine (prefix cache on) at level isa (default: the engine's choice). */
export async function answerBits(model: string, calls: GoldenCall[], config: (typeof goldenConfigs)[number], isa?: IsaLevel, threads = 2): Promise<GoldenBits> {
  const engine = await Engine.open({ path: tinyModel(model), threads, dtype: config.dtype, quantization: config.quantization, isa });
  try {
    const out: GoldenBits = [];
    for (const call of calls) {
      const requests: NativeAnswerRequest[] = call.map((r) => ({ state: r.state, images: r.images?.map(imageOf), questions: r.questions }));
      const results = await engine.answerBatch(requests);
      out.push(results.map((r) => r.answers.map((a) => bits(a.labelLogits))));
    }
    return out;
  } finally {
    await engine.close();
  }
}
