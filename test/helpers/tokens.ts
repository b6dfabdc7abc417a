import { createHash } from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { ModelTokenizer } from '../../src/tokenizer/tokenizer';
import { modelsDir } from '../../src/testmodels/generate';
import { labelTexts, questionTexts, stateText } from './texts';

export interface TokenizedTexts {
  state: number[];
  questions: number[][];
  labels: number[];
}

const tokenized = new Map<string, Promise<TokenizedTexts>>();
const tokenizers = new Map<string, Promise<ModelTokenizer>>();

/** A model's tokenizer, loaded once per test file (Qwen3's takes a second to load). */
export function modelTokenizer(modelDir: string): Promise<ModelTokenizer> {
  if (!tokenizers.has(modelDir)) tokenizers.set(modelDir, ModelTokenizer.load(modelDir));
  return tokenizers.get(modelDir)!;
}

/**
 * The shared test texts in a model's own tokenizer; each label must be one token. Kept on disk between test files and
 * runs (a tokenizer takes 0.2-2.4 s to load, and a dozen engine suites each asked for a dozen models), under a key of
 * everything the ids come from: the tokenizer package's version, the tokenizer's files, the texts and this code.
 */
export function tokenizeTexts(modelDir: string): Promise<TokenizedTexts> {
  if (!tokenized.has(modelDir)) tokenized.set(modelDir, keptOrTokenized(modelDir));
  return tokenized.get(modelDir)!;
}

const keptDir = path.join(modelsDir, '.tokenized-texts');

async function keptOrTokenized(modelDir: string): Promise<TokenizedTexts> {
  const hash = createHash('sha256').update(`tokenizers ${require('tokenizers/package.json').version}`);
  for (const f of [__filename, path.join(__dirname, 'texts.ts'), path.join(modelDir, 'tokenizer.json'), path.join(modelDir, 'tokenizer_config.json')]) {
    hash.update(f).update(fs.existsSync(f) ? fs.readFileSync(f) : '-');
  }
  const file = path.join(keptDir, `${hash.digest('hex')}.json`);
  if (fs.existsSync(file)) return JSON.parse(fs.readFileSync(file, 'utf8'));
  const texts = await tokenize(modelDir);
  // Written whole under another name, then renamed: a reader in another worker never sees half a file.
  fs.mkdirSync(keptDir, { recursive: true });
  const partial = `${file}.${process.pid}`;
  fs.writeFileSync(partial, JSON.stringify(texts));
  fs.renameSync(partial, file);
  return texts;
}

async function tokenize(modelDir: string): Promise<TokenizedTexts> {
  const tok = await modelTokenizer(modelDir);
  const state = [...(await tok.encode(stateText))];
  const questions = await Promise.all(questionTexts.map(async (q) => [...(await tok.encode(q))]));
  const labels: number[] = [];
  // A label is the one token it becomes after "Answer:" (in context: SentencePiece
  // vocabularies tokenize a bare " A" differently).
  const base = await tok.encode('Answer:');
  for (const l of labelTexts) {
    const ids = await tok.encode('Answer:' + l);
    if (ids.length !== base.length + 1 || base.some((id, i) => ids[i] !== id))
      throw new Error(`label ${JSON.stringify(l)} is not one token after "Answer:" in ${modelDir}`);
    labels.push(ids[ids.length - 1]);
  }
  return { state, questions, labels };
}
