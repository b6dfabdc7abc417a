// The transformer's weights, read from a checkpoint at construction: the embeddings and final norm, each
// layer's norms, attention and MLP (a mixture of experts' router and experts among them), in the stacked
// forms the kernels take, and the rotary tables. The forward pass that uses them is transformer.cpp.
#include "model/transformer.h"

namespace tq {
namespace {

std::string layer_name(int64_t i, const char* rest) { return "model.layers." + std::to_string(i) + "." + rest; }

}  // namespace

// Where the constructor takes weights from: the checkpoint, put on the kernels' device and
// prepared for them.
struct CheckpointWeights {
  const Checkpoint& ckpt;
  const ModelConfig& config;
  at::ScalarType dtype;
  const LayerKernels& kernels;

  // On the CPU a weight stays a view of the memory map; elsewhere it is copied to the device.
  at::Tensor on_device(const std::string& name, at::IntArrayRef shape, at::ScalarType type) const {
    auto w = ckpt.get(name, shape, type);
    if (kernels.device().is_cpu()) return w;
    auto copy = w.to(kernels.device());
    ckpt.release(w);
    return copy;
  }
  // Gemma's norms scale by (1 + weight): the sum is taken once here, in fp32 as transformers does.
  at::Tensor norm(const std::string& name, int64_t size) const {
    auto w = on_device(name, {size}, at::kFloat);
    return config.norm_weight_offset == 0 ? w : w + config.norm_weight_offset;
  }
  at::Tensor of_layer(int64_t i, const char* rest, at::IntArrayRef shape) const { return ckpt.get(layer_name(i, rest), shape, dtype); }
  // Prepares the (stacked) weights for the kernels, then lets their mapped pages go.
  std::unique_ptr<Linear> linear(const std::vector<at::Tensor>& parts, const at::Tensor& bias) const {
    auto prepared = kernels.linear(parts.size() == 1 ? parts[0] : at::cat(parts), bias);
    for (const auto& w : parts) ckpt.release(w);
    return prepared;
  }
};

Transformer::Transformer(const Checkpoint& ckpt, at::ScalarType dtype, int64_t max_positions, std::unique_ptr<LayerKernels> kernels)
    : config_(ckpt.config()), dtype_(dtype), kernels_(std::move(kernels)) {
  const auto& c = config_;
  const CheckpointWeights weights{ckpt, c, dtype, *kernels_};
  embed_ = weights.on_device("model.embed_tokens.weight", {c.vocab_size, c.hidden_size}, dtype);
  final_norm_ = weights.norm("model.norm.weight", c.hidden_size);
  if (ckpt.has("lm_head.weight") || !c.tie_word_embeddings) lm_head_ = weights.on_device("lm_head.weight", {c.vocab_size, c.hidden_size}, dtype);
  else lm_head_ = embed_;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    Layer l;
    l.kind = c.layers[i];
    load_norms(weights, i, l);
    load_attention(weights, i, l);
    load_mlp(weights, i, l);
    layers_.push_back(std::move(l));
  }
  load_rotary(max_positions);
}

// The layer's norms where its NormPlacement has them (pre, post, or Gemma 3's sandwich).
void Transformer::load_norms(const CheckpointWeights& w, int64_t i, Layer& l) const {
  const auto& c = config_;
  const int64_t h = c.hidden_size;
  if (c.norms != NormPlacement::Post) l.attn_in_norm = w.norm(layer_name(i, "input_layernorm.weight"), h);
  if (c.norms != NormPlacement::Pre) {
    l.attn_out_norm = w.norm(layer_name(i, "post_attention_layernorm.weight"), h);
    l.ffn_out_norm = w.norm(layer_name(i, "post_feedforward_layernorm.weight"), h);
  }
  if (c.norms == NormPlacement::Pre) l.ffn_in_norm = w.norm(layer_name(i, "post_attention_layernorm.weight"), h);
  if (c.norms == NormPlacement::Sandwich) l.ffn_in_norm = w.norm(layer_name(i, "pre_feedforward_layernorm.weight"), h);
}

// q, k and v stacked, the output projection, and the q/k norms where the family has them.
void Transformer::load_attention(const CheckpointWeights& w, int64_t i, Layer& l) const {
  const auto& c = config_;
  const int64_t h = c.hidden_size, q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  at::Tensor qkv_bias;
  if (c.attention_bias) {
    const auto bias = [&](const char* rest, int64_t size) { return w.ckpt.get(layer_name(i, rest), {size}, at::kFloat); };
    qkv_bias = at::cat({bias("self_attn.q_proj.bias", q_dim), bias("self_attn.k_proj.bias", kv_dim), bias("self_attn.v_proj.bias", kv_dim)});
  }
  // q, k and v come from one GEMM: one call instead of three at every layer (Phi-3 stores them so).
  if (c.fused_projections) l.qkv = w.linear({w.of_layer(i, "self_attn.qkv_proj.weight", {q_dim + 2 * kv_dim, h})}, qkv_bias);
  else
    l.qkv = w.linear({w.of_layer(i, "self_attn.q_proj.weight", {q_dim, h}), w.of_layer(i, "self_attn.k_proj.weight", {kv_dim, h}),
                      w.of_layer(i, "self_attn.v_proj.weight", {kv_dim, h})},
                     qkv_bias);
  l.o = w.linear({w.of_layer(i, "self_attn.o_proj.weight", {h, q_dim})}, {});
  if (c.qk_norm != QkNorm::None) {
    const bool whole = c.qk_norm == QkNorm::Whole;
    l.q_norm = w.norm(layer_name(i, "self_attn.q_norm.weight"), whole ? q_dim : c.head_dim);
    l.k_norm = w.norm(layer_name(i, "self_attn.k_norm.weight"), whole ? kv_dim : c.head_dim);
    // Gemma 3's attention scale (query_pre_attn_scalar^-1/2 where the kernels use head_dim^-1/2),
    // carried by the query's norm: the scores come out scaled as transformers scales them.
    if (c.query_scale != 1.0) l.q_norm = l.q_norm * c.query_scale;
  }
}

// The gated MLP: gate and up (stacked for the fused row kernels), and down.
void Transformer::load_mlp(const CheckpointWeights& w, int64_t i, Layer& l) const {
  const auto& c = config_;
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  if (l.kind.sparse) {
    l.moe = load_moe(w, i);
    return;
  }
  if (kernels_->fused_rows()) {
    // One GEMM for both, its output's halves gated by one fused launch (Phi-3 stores them so).
    if (c.fused_projections) l.gate_up = w.linear({w.of_layer(i, "mlp.gate_up_proj.weight", {2 * inter, h})}, {});
    else l.gate_up = w.linear({w.of_layer(i, "mlp.gate_proj.weight", {inter, h}), w.of_layer(i, "mlp.up_proj.weight", {inter, h})}, {});
  } else if (c.fused_projections) {
    // Phi-3's gate_up_proj: the gate's rows, then up's.
    auto fused = w.of_layer(i, "mlp.gate_up_proj.weight", {2 * inter, h});
    l.gate = kernels_->linear(fused.narrow(0, 0, inter), {});
    l.up = kernels_->linear(fused.narrow(0, inter, inter), {});
    w.ckpt.release(fused);
  } else {
    l.gate = w.linear({w.of_layer(i, "mlp.gate_proj.weight", {inter, h})}, {});
    l.up = w.linear({w.of_layer(i, "mlp.up_proj.weight", {inter, h})}, {});
  }
  l.down = w.linear({w.of_layer(i, "mlp.down_proj.weight", {h, inter})}, {});
}

// A sparse layer's experts, under the names transformers 4 and the released checkpoints use (Mixtral's
// block_sparse_moe.experts.E.w1/w3/w2, the Qwen families' mlp.experts.E.gate_proj/up_proj/down_proj), or
// transformers 5's stacked mlp.experts.gate_up_proj [experts, 2 width, hidden] and down_proj [experts, hidden, width].
std::unique_ptr<MoeBlock> Transformer::load_moe(const CheckpointWeights& w, int64_t i) const {
  const auto& c = config_;
  const auto& m = *c.moe;
  const int64_t h = c.hidden_size, inter = m.expert_intermediate;
  const bool mixtral_names = w.ckpt.has(layer_name(i, "block_sparse_moe.gate.weight"));
  const std::string block = mixtral_names ? "block_sparse_moe." : "mlp.";
  auto router = kernels_->unquantized_linear(w.of_layer(i, (block + "gate.weight").c_str(), {m.num_experts, h}));
  std::vector<GatedMlp> experts;
  if (w.ckpt.has(layer_name(i, "mlp.experts.gate_up_proj"))) {
    const auto gate_up = w.of_layer(i, "mlp.experts.gate_up_proj", {m.num_experts, 2 * inter, h});
    const auto down = w.of_layer(i, "mlp.experts.down_proj", {m.num_experts, h, inter});
    for (int64_t e = 0; e < m.num_experts; ++e) {
      const auto own = gate_up.select(0, e);
      experts.push_back({kernels_->linear(own.narrow(0, 0, inter), {}), kernels_->linear(own.narrow(0, inter, inter), {}),
                         kernels_->linear(down.select(0, e), {})});
    }
    w.ckpt.release(gate_up);
    w.ckpt.release(down);
  } else {
    const char* names[3] = {"gate_proj", "up_proj", "down_proj"};
    if (mixtral_names) names[0] = "w1", names[1] = "w3", names[2] = "w2";
    for (int64_t e = 0; e < m.num_experts; ++e) {
      const auto name = [&](int which) { return block + "experts." + std::to_string(e) + "." + names[which] + ".weight"; };
      experts.push_back({w.linear({w.of_layer(i, name(0).c_str(), {inter, h})}, {}), w.linear({w.of_layer(i, name(1).c_str(), {inter, h})}, {}),
                         w.linear({w.of_layer(i, name(2).c_str(), {h, inter})}, {})});
    }
  }
  std::unique_ptr<GatedMlp> shared;
  std::unique_ptr<Linear> shared_gate;
  if (m.shared_intermediate > 0) {
    const int64_t s = m.shared_intermediate;
    shared = std::make_unique<GatedMlp>(GatedMlp{w.linear({w.of_layer(i, "mlp.shared_expert.gate_proj.weight", {s, h})}, {}),
                                                 w.linear({w.of_layer(i, "mlp.shared_expert.up_proj.weight", {s, h})}, {}),
                                                 w.linear({w.of_layer(i, "mlp.shared_expert.down_proj.weight", {h, s})}, {})});
    shared_gate = kernels_->unquantized_linear(w.of_layer(i, "mlp.shared_expert_gate.weight", {1, h}));
  }
  const auto act = c.activation == Activation::GeluTanh ? GateActivation::GeluTanh : GateActivation::Silu;
  return std::make_unique<MoeBlock>(m, *kernels_, dtype_, act, std::move(router), std::move(experts), std::move(shared), std::move(shared_gate));
}

// RoPE's tables (and Gemma 3's local ones), and M-RoPE's position stream of each column.
void Transformer::load_rotary(int64_t max_positions) {
  const auto& c = config_;
  const auto device = kernels_->device();
  rope_ = rotary_tables(c.rope, c.rotary_dim, max_positions, device);
  if (c.local_rope) local_rope_ = rotary_tables(*c.local_rope, c.rotary_dim, max_positions, device);
  if (!c.mrope_section.empty()) {
    // transformers' apply_multimodal_rotary_pos_emb: sections [t, h, w] over the frequencies, in both halves.
    std::vector<int64_t> stream;
    for (int half = 0; half < 2; ++half)
      for (int64_t s = 0; s < 3; ++s) stream.insert(stream.end(), c.mrope_section[s], s);
    mrope_stream_ = at::tensor(stream, at::kLong).to(device);
  }
}

int64_t Transformer::linear_bytes() const {
  int64_t total = 0;
  for (const auto& l : layers_)
    for (const auto* linear : {l.qkv.get(), l.o.get(), l.gate.get(), l.up.get(), l.gate_up.get(), l.down.get()})
      if (linear) total += linear->bytes();
  for (const auto& l : layers_)
    if (l.moe) total += l.moe->bytes();
  return total;
}

}  // namespace tq
