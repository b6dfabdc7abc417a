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

/** Whether layer i's MLP is the mixture of experts: transformers' rule for the Qwen families (Mixtral: every layer). */
export function sparseLayer(spec: TestModelSpec, i: number): boolean {
  return spec.moe !== undefined && !(spec.moe.mlpOnlyLayers ?? []).includes(i);
}

/** A sparse layer's router and experts (and Qwen2-MoE's shared expert), under `p` (model.layers.i.). */
function moeTensors(spec: TestModelSpec, p: string, normal: Normal): NamedTensor[] {
  const m = spec.moe!, h = spec.hiddenSize, w = m.expertIntermediate;
  const mixtral = spec.architecture === 'MixtralForCausalLM';
  const block = p + (mixtral ? 'block_sparse_moe.' : 'mlp.');
  // The router's scores spread wide enough (std about 2.4 over a normed input; 0.3 at the tiny models' width 64)
  // that the top k differ from token to token.
  const routerStd = 2.4 / Math.sqrt(h);
  const out = [normal(block + 'gate.weight', [m.experts, h], routerStd)];
  if (m.layout === 'stacked') {
    out.push(normal(block + 'experts.gate_up_proj', [m.experts, 2 * w, h]), normal(block + 'experts.down_proj', [m.experts, h, w]));
  } else {
    const [gate, up, down] = mixtral ? ['w1', 'w3', 'w2'] : ['gate_proj', 'up_proj', 'down_proj'];
    for (let e = 0; e < m.experts; e++) {
      const q = `${block}experts.${e}.`;
      out.push(normal(`${q}${gate}.weight`, [w, h]), normal(`${q}${up}.weight`, [w, h]), normal(`${q}${down}.weight`, [h, w]));
    }
  }
  if (m.sharedIntermediate) {
    const s = m.sharedIntermediate;
    out.push(normal(block + 'shared_expert.gate_proj.weight', [s, h]), normal(block + 'shared_expert.up_proj.weight', [s, h]));
    out.push(normal(block + 'shared_expert.down_proj.weight', [h, s]), normal(block + 'shared_expert_gate.weight', [1, h], routerStd));
  }
  return out;
}

/** Decoder layer i's tensors (under model.layers.i.). */
export function layerTensors(spec: TestModelSpec, i: number, normal: Normal, norm: Norm): NamedTensor[] {
  const p = `model.layers.${i}.`;
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
  if (arch === 'Qwen2ForCausalLM' || arch === 'Qwen2MoeForCausalLM' || spec.vision) {
    out.push(normal(p + 'self_attn.q_proj.bias', [q]), normal(p + 'self_attn.k_proj.bias', [kv]), normal(p + 'self_attn.v_proj.bias', [kv]));
  }
  if (arch === 'Qwen3ForCausalLM' || arch === 'Qwen3MoeForCausalLM') {
    out.push(norm(p + 'self_attn.q_norm.weight', spec.headDim), norm(p + 'self_attn.k_norm.weight', spec.headDim));
  }
  if (arch === 'Gemma3ForCausalLM') out.push(gemmaNorm(p + 'self_attn.q_norm.weight', spec.headDim), gemmaNorm(p + 'self_attn.k_norm.weight', spec.headDim));
  if (arch === 'Olmo2ForCausalLM') out.push(norm(p + 'self_attn.q_norm.weight', q), norm(p + 'self_attn.k_norm.weight', kv));
  if (sparseLayer(spec, i)) return [...out, ...moeTensors(spec, p, normal)];
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
  Qwen3MoeForCausalLM: 'qwen3_moe',
  MixtralForCausalLM: 'mixtral',
  Qwen2MoeForCausalLM: 'qwen2_moe',
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
  if (spec.moe) return moeConfig(spec);
  return {};
}

/** The experts' config.json fields, as each family's config class names them. */
function moeConfig(spec: TestModelSpec): Record<string, unknown> {
  const m = spec.moe!;
  if (spec.architecture === 'MixtralForCausalLM') {
    return { num_local_experts: m.experts, num_experts_per_tok: m.topK, intermediate_size: m.expertIntermediate, router_jitter_noise: 0,
      use_sliding_window: undefined };
  }
  return {
    num_experts: m.experts, num_experts_per_tok: m.topK, moe_intermediate_size: m.expertIntermediate, norm_topk_prob: m.normTopkProb,
    decoder_sparse_step: 1, mlp_only_layers: m.mlpOnlyLayers ?? [], output_router_logits: false,
    ...(m.sharedIntermediate ? { shared_expert_intermediate_size: m.sharedIntermediate, qkv_bias: true } : {}),
  };
}
