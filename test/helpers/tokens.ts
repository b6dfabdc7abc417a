import { ModelTokenizer } from '../../src/tokenizer/tokenizer';
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

/** The shared test texts in a model's own tokenizer (loaded once per model and test file: Qwen3's takes 1 s); each label must be one token. */
export function tokenizeTexts(modelDir: string): Promise<TokenizedTexts> {
  if (!tokenized.has(modelDir)) tokenized.set(modelDir, tokenize(modelDir));
  return tokenized.get(modelDir)!;
}

async function tokenize(modelDir: string): Promise<TokenizedTexts> {
  const tok = await modelTokenizer(modelDir);
  const state = await tok.encode(stateText);
  const questions = await Promise.all(questionTexts.map((q) => tok.encode(q)));
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
