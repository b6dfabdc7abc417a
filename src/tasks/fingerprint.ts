/**
 * The fingerprint: a hash over everything a task's fitted numbers depend on. A task fitted
 * under another fingerprint is refused on import, naming the components that differ.
 *   model:       config.json and every safetensors header (names, shapes, dtypes, offsets)
 *                of the checkpoint; other weight files by name and size;
 *   tokenizer:   tokenizer.json and tokenizer_config.json (the chat template is in it);
 *   rendering:   the prompt profile and the temperatures (the baseline is tempered);
 *   readout:     the rule that turns label logits into the baseline;
 *   head_engine: where hidden states come from (its model, by the same hash, and its tap);
 *   format:      the stored form's version;
 *   quantization: the weights' quantization (--quantization), present unless none: int8 weights move
 *                the label probabilities by up to ~1e-2 (docs/quantization.md), so a task fitted on one
 *                is refused on the other, either way. Absent for none, so older fingerprints still hold.
 * The compute dtype is not part of it (recorded in the task only).
 */
import { createHash, Hash } from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { PromptProfile, Temperatures } from '../rendering/profile';
import { TASKS_FORMAT } from './task';

export const READOUT_RULE = 'label logits at the label position of one forward pass; softmax of logits / T over the labels; averaged over the orders asked';
export const HIDDEN_TAP = 'final-norm hidden state at the readout position (options as sent)';

const sha = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');

function safetensorsHeader(file: string): Buffer {
  const fd = fs.openSync(file, 'r');
  try {
    const len = Buffer.alloc(8);
    fs.readSync(fd, len, 0, 8, 0);
    const n = Number(len.readBigUInt64LE());
    const header = Buffer.alloc(Math.min(n, 100 << 20));
    fs.readSync(fd, header, 0, header.length, 8);
    return header;
  } finally {
    fs.closeSync(fd);
  }
}

/** The checkpoint's configuration and weight layout, not its 10+ GB of weights. */
export function modelHash(checkpoint: string): string {
  const h = createHash('sha256');
  const files = fs.statSync(checkpoint).isDirectory() ? fs.readdirSync(checkpoint).sort().map((f) => path.join(checkpoint, f)) : [checkpoint];
  for (const file of files) {
    const name = path.basename(file);
    if (name === 'config.json') h.update(name).update(fs.readFileSync(file));
    else if (name.endsWith('.safetensors')) h.update(name).update(safetensorsHeader(file));
    else if (/\.(pt|bin|gguf)$/.test(name)) h.update(`${name}:${fs.statSync(file).size}`);
  }
  return h.digest('hex');
}

/**
 * `file`'s bytes into `h`, a mebibyte at a time: a tokenizer.json read whole (about 11 MB for Qwen3) put every page
 * of a new buffer through a fault, several times the hash's own time, at each server's start (bench/README.md,
 * "Where a start's time goes").
 */
function hashFile(h: Hash, file: string): void {
  const chunk = Buffer.allocUnsafe(1 << 20);
  const fd = fs.openSync(file, 'r');
  try {
    for (let n; (n = fs.readSync(fd, chunk, 0, chunk.length, null)) > 0; ) h.update(chunk.subarray(0, n));
  } finally {
    fs.closeSync(fd);
  }
}

function tokenizerHash(checkpoint: string): string {
  const h = createHash('sha256');
  for (const name of ['tokenizer.json', 'tokenizer_config.json']) {
    const file = path.join(checkpoint, name);
    if (fs.existsSync(file)) hashFile(h.update(name), file);
  }
  return h.digest('hex');
}

export interface Fingerprint {
  hash: string;
  components: Record<string, string>;
}

/**
 * `imageRecipe`: an image-route abstention task's (imajev_extension), fitted on the image engine:
 * the checkpoint, profile and temperatures are then the image engine's, and the image recipe with
 * its pixel budget is one more component.
 */
export function computeFingerprint(o: { checkpoint: string; profile: PromptProfile; temperatures: Temperatures; headEngine: { checkpoint: string } | null; imageRecipe?: string; quantization?: string }): Fingerprint {
  const model = modelHash(o.checkpoint);
  const components: Record<string, string> = {
    model,
    tokenizer: tokenizerHash(o.checkpoint),
    rendering: sha(JSON.stringify([o.profile, o.temperatures])),
    readout: sha(READOUT_RULE),
    head_engine: sha(JSON.stringify([o.headEngine ? modelHash(o.headEngine.checkpoint) : 'serving engine', HIDDEN_TAP])),
    format: sha(TASKS_FORMAT),
    ...(o.imageRecipe ? { image_recipe: sha(o.imageRecipe) } : {}),
    ...(o.quantization && o.quantization !== 'none' ? { quantization: sha(o.quantization) } : {}),
  };
  for (const k of Object.keys(components)) components[k] = components[k].slice(0, 16);
  return { hash: sha(JSON.stringify(components)).slice(0, 32), components };
}

/** The components of `theirs` that differ from `ours` (or that only one of them has), for a refusal's reason. */
export function differingComponents(ours: Fingerprint, theirs: Record<string, unknown> | undefined): string[] {
  if (!theirs || typeof theirs !== 'object') return Object.keys(ours.components);
  const names = [...new Set([...Object.keys(ours.components), ...Object.keys(theirs)])];
  return names.filter((k) => theirs[k] !== ours.components[k]);
}
