/**
 * What a generated test model's family changes in its tensors and its config.json, beside the
 * Llama layout that generate.ts writes for every family: each family's names, shapes and config
 * fields as transformers' own classes read them (Gemma3TextConfig, Phi3Config, Olmo2Config,
 * SmolLM3Config), so that the same folder loads in transformers for the cross-check.
 */
import { NamedTensor } from './safetensors-writer';
import { TestModelSpec } from './specs';

type Normal = (name: string, shape: number[], std?: number) => NamedTensor;
type Norm = (name: string, size: number) => NamedTensor;

/** One decoder layer's tensors under the prefix `p` (model.layers.i.). */
export function layerTensors(spec: TestModelSpec, p: string, normal: Normal, norm: Norm): NamedTensor[] {
  const h = spec.hiddenSize, q = spec.heads * spec.headDim, kv = spec.kvHeads * spec.headDim, inter = spec.intermediateSize;
  const out: NamedTensor[] = [];
  const arch = spec.architecture;
  // Norms: before each sublayer (Llama), after (OLMo 2), or both (Gemma 3). Gemma's scale by 1 + weight: centred on 0.
  const gemmaNorm = (name: string, size: number) => normal(name, [size], 0.1);
  if (arch === 'Gemma3ForCausalLM') {
    for (const n of ['input_layernorm', 'post_attention_layernorm', 'pre_feedforward_layernorm', 'post_feedforward_layernorm']) out.push(gemmaNorm(`${p}${n}.weight`, h));
  } else if (arch === 'Olmo2ForCausalLM') {
    out.push(norm(p + 'post_attention_layernorm.weight', h), norm(p + 'post_feedforward_layernorm.weight', h));
  } else {
    out.push(norm(p + 'input_layernorm.weight', h), norm(p + 'post_attention_layernorm.weight', h));
  }
  if (arch === 'Phi3ForCausalLM') {
    out.push(normal(p + 'self_attn.qkv_proj.weight', [q + 2 * kv, h]), normal(p + 'self_attn.o_proj.weight', [h, q]));
    out.push(normal(p + 'mlp.gate_up_proj.weight', [2 * inter, h]), normal(p + 'mlp.down_proj.weight', [h, inter]));
    return out;
  }
  out.push(normal(p + 'self_attn.q_proj.weight', [q, h]), normal(p + 'self_attn.k_proj.weight', [kv, h]));
  out.push(normal(p + 'self_attn.v_proj.weight', [kv, h]), normal(p + 'self_attn.o_proj.weight', [h, q]));
  if (arch === 'Qwen2ForCausalLM' || spec.vision) {
    out.push(normal(p + 'self_attn.q_proj.bias', [q]), normal(p + 'self_attn.k_proj.bias', [kv]), normal(p + 'self_attn.v_proj.bias', [kv]));
  }
  if (arch === 'Qwen3ForCausalLM') out.push(norm(p + 'self_attn.q_norm.weight', spec.headDim), norm(p + 'self_attn.k_norm.weight', spec.headDim));
  if (arch === 'Gemma3ForCausalLM') out.push(gemmaNorm(p + 'self_attn.q_norm.weight', spec.headDim), gemmaNorm(p + 'self_attn.k_norm.weight', spec.headDim));
  if (arch === 'Olmo2ForCausalLM') out.push(norm(p + 'self_attn.q_norm.weight', q), norm(p + 'self_attn.k_norm.weight', kv));
  out.push(normal(p + 'mlp.gate_proj.weight', [inter, h]), normal(p + 'mlp.up_proj.weight', [inter, h]));
  out.push(normal(p + 'mlp.down_proj.weight', [h, inter]));
  return out;
}

/** The final norm (Gemma's centred on 0, as its layers'). */
export function finalNorm(spec: TestModelSpec, normal: Normal, norm: Norm): NamedTensor {
  return spec.gemma ? normal('model.norm.weight', [spec.hiddenSize], 0.1) : norm('model.norm.weight', spec.hiddenSize);
}

export const modelTypes: Record<TestModelSpec['architecture'], string> = {
  LlamaForCausalLM: 'llama',
  MistralForCausalLM: 'mistral',
  Qwen2ForCausalLM: 'qwen2',
  Qwen3ForCausalLM: 'qwen3',
  Gemma3ForCausalLM: 'gemma3_text',
  Phi3ForCausalLM: 'phi3',
  Olmo2ForCausalLM: 'olmo2',
  SmolLM3ForCausalLM: 'smollm3',
  Qwen2VLForConditionalGeneration: 'qwen2_vl',
  Qwen2_5_VLForConditionalGeneration: 'qwen2_5_vl',
};

/** config.json fields of the family beyond the Llama ones (which they replace where named alike). */
export function familyConfig(spec: TestModelSpec): Record<string, unknown> {
  if (spec.gemma) {
    const g = spec.gemma;
    return {
      hidden_act: undefined,
      hidden_activation: 'gelu_pytorch_tanh',
      query_pre_attn_scalar: g.queryPreAttnScalar,
      layer_types: g.layerTypes,
      sliding_window: spec.slidingWindow,
      use_sliding_window: undefined,
      rope_local_base_freq: g.localRopeTheta,
      rope_scaling: { rope_type: 'linear', factor: g.linearRopeFactor },
      attn_logit_softcapping: null,
      final_logit_softcapping: g.finalLogitSoftcap,
      attention_bias: false,
    };
  }
  if (spec.phi) {
    const f = spec.phi;
    return {
      partial_rotary_factor: f.partialRotaryFactor,
      original_max_position_embeddings: f.originalMaxPositions,
      max_position_embeddings: 4096,
      rope_scaling: { type: 'longrope', short_factor: f.shortFactor, long_factor: f.longFactor },
      sliding_window: null,
      use_sliding_window: undefined,
    };
  }
  if (spec.ropeLayers) return { no_rope_layers: spec.ropeLayers, no_rope_layer_interval: spec.ropeLayers.length };
  return {};
}
