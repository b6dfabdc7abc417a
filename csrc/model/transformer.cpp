#include "model/transformer.h"

#include <cmath>
#include <stdexcept>

#include "common/profile_scope.h"

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

Transformer::RopeRows Transformer::rope_rows(const StepInputs& step, const RotaryTables& tables) const {
  if (!step.rope_positions.defined()) {
    if (!step.long_rope.defined() || tables.long_offset == 0) return {tables.cos, tables.sin, step.positions};
    // longrope: a long sequence's tokens read the rows of the long factors.
    return {tables.cos, tables.sin, step.positions + step.long_rope * tables.long_offset};
  }
  const auto& streams = step.rope_positions;  // [T, 3]
  const int64_t t = streams.size(0), d = tables.cos.size(1);
  auto pick = [&](const at::Tensor& table) {
    auto rows = table.index_select(0, streams.reshape({-1})).view({t, 3, d});
    return rows.gather(1, mrope_stream_.view({1, 1, d}).expand({t, 1, d})).squeeze(1).contiguous();
  };
  return {pick(tables.cos), pick(tables.sin), at::arange(t, streams.options())};
}

at::Tensor Transformer::rotate(const at::Tensor& x, const RopeRows& rope) const {
  const int64_t rd = config_.rotary_dim, hd = x.size(-1);
  if (rd == hd) return kernels_->rope(x, rope.cos, rope.sin, rope.index, dtype_);
  // Partial rotary (Phi-4-mini): the first rd dims turn, the rest pass as they are.
  return at::cat({kernels_->rope(x.narrow(-1, 0, rd), rope.cos, rope.sin, rope.index, dtype_), x.narrow(-1, rd, hd - rd).to(dtype_)}, -1);
}

at::Tensor Transformer::norm(const at::Tensor& x, const at::Tensor& w, at::ScalarType out_dtype) const {
  return kernels_->rms_norm(x, w, config_.rms_norm_eps, out_dtype);
}

void Transformer::add_output(const Linear& proj, const at::Tensor& in, const at::Tensor& out_norm, at::Tensor& x) const {
  if (!out_norm.defined()) return proj.add_into(in, x);
  x.add_(norm(proj(in, at::kFloat), out_norm, at::kFloat));
}

void Transformer::record(int64_t layer, const char* what, const at::Tensor& t) const {
  if (trace_) trace_->tensors.emplace_back("layer " + std::to_string(layer) + " " + what, t.detach().to(at::kCPU, at::kFloat).clone());
}

at::Tensor Transformer::input(const at::Tensor& x, const at::Tensor& norm_weight) const {
  return norm_weight.defined() ? norm(x, norm_weight, dtype_) : x.to(dtype_);
}

at::Tensor Transformer::add_then_input(const Linear& proj, const at::Tensor& in, const at::Tensor& out_norm, at::Tensor& x,
                                       const at::Tensor& next_norm) const {
  const auto* fused = kernels_->fused_rows();
  if (fused && !out_norm.defined() && next_norm.defined()) return fused->add_rms_norm(x, proj(in, dtype_), next_norm, config_.rms_norm_eps, dtype_);
  add_output(proj, in, out_norm, x);
  return input(x, next_norm);
}

at::Tensor Transformer::add_mlp_then_input(const Layer& l, const at::Tensor& h, at::Tensor& x, const at::Tensor& next_norm, bool last) const {
  if (l.moe) {
    const auto y = (*l.moe)(h);
    x.add_(l.ffn_out_norm.defined() ? norm(y, l.ffn_out_norm, at::kFloat) : y);
    return last ? at::Tensor() : input(x, next_norm);
  }
  if (!last) return add_then_input(*l.down, gated(l, h), l.ffn_out_norm, x, next_norm);
  add_output(*l.down, gated(l, h), l.ffn_out_norm, x);
  return {};
}

at::Tensor Transformer::gated(const Layer& l, const at::Tensor& h) const {
  const auto act = config_.activation == Activation::GeluTanh ? GateActivation::GeluTanh : GateActivation::Silu;
  if (l.gate_up) return kernels_->fused_rows()->gated_mul_halves((*l.gate_up)(h, dtype_), act);
  auto gate = (*l.gate)(h, dtype_);
  return kernels_->gated_mul(gate, (*l.up)(h, dtype_), act);
}

bool Transformer::fuses_qk(const Layer& l) const {
  return kernels_->fused_rows() && config_.qk_norm != QkNorm::Whole && (!l.kind.rotary || config_.rotary_dim == config_.head_dim);
}

at::Tensor Transformer::rope_if_rotary(const Layer& l, const at::Tensor& y, const RopeRows& rope) const {
  // A layer without RoPE (SmolLM3) keys and queries by content alone.
  return l.kind.rotary ? rotate(y, rope) : y.to(dtype_).contiguous();
}

Transformer::Queries Transformer::project(const Layer& l, int64_t li, const at::Tensor& qkv, const RopeRows& rope, const at::Tensor& slots,
                                          KvCache& cache) const {
  const auto& c = config_;
  if (fuses_qk(l)) {
    const bool norms = c.qk_norm == QkNorm::PerHead;
    const at::Tensor none;
    return {{}, kernels_->fused_rows()->qk_norm_rope_store(qkv, c.num_heads, c.num_kv_heads, norms ? l.q_norm : none, norms ? l.k_norm : none,
                                                           c.rms_norm_eps, l.kind.rotary ? rope.cos : none, l.kind.rotary ? rope.sin : none,
                                                           l.kind.rotary ? rope.index : none, cache.key_layer(li), cache.value_layer(li), slots, dtype_)};
  }
  const int64_t t = qkv.size(0), q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  auto q = qkv.slice(1, 0, q_dim), k = qkv.slice(1, q_dim, q_dim + kv_dim);
  auto v = qkv.slice(1, q_dim + kv_dim).view({t, c.num_kv_heads, c.head_dim});
  if (c.qk_norm == QkNorm::Whole) {
    q = norm(q, l.q_norm, at::kFloat);
    k = norm(k, l.k_norm, at::kFloat);
  }
  q = q.view({t, c.num_heads, c.head_dim});
  k = k.view({t, c.num_kv_heads, c.head_dim});
  if (c.qk_norm == QkNorm::PerHead) {
    q = norm(q, l.q_norm, at::kFloat);
    k = norm(k, l.k_norm, at::kFloat);
  }
  cache.write(li, slots, rope_if_rotary(l, k, rope), v);
  return {q, {}};
}

at::Tensor Transformer::query_rows(const Layer& l, const Queries& q, const RopeRows& rope, const at::Tensor& rows) const {
  if (!rows.defined()) return q.turned.defined() ? q.turned : rope_if_rotary(l, q.raw, rope);
  if (q.turned.defined()) return q.turned.index_select(0, rows);
  return rope_if_rotary(l, q.raw.index_select(0, rows), {rope.cos, rope.sin, rope.index.index_select(0, rows)});
}

StepInputs Transformer::prepare(const StepBatch& step, bool fixed_shape) const {
  const auto& c = config_;
  const auto device = kernels_->device();
  auto on_device = [&](const at::Tensor& t) { return t.defined() ? t.to(device) : t; };
  StepInputs in;
  in.token_ids = on_device(step.token_ids);
  in.positions = on_device(step.positions);
  in.slots = on_device(step.slots);
  in.key_slots = on_device(step.key_slots);
  in.rope_positions = on_device(step.rope_positions);
  in.long_rope = on_device(step.long_rope);
  in.image_rows = on_device(step.image_rows);
  in.image_embeds = on_device(step.image_embeds);
  // One plan per attention rule the layers use: with and without the window (Gemma 3 has both).
  auto plan = [&](const QueryLayout& q, bool sliding) {
    return kernels_->plan_attention(q, step.key_positions, step.key_segments, sliding ? c.sliding_window : std::nullopt, c.num_heads);
  };
  const QueryLayout queries{step.positions, step.segments, step.parents, step.roots, step.key_end};
  // A step whose plans launch alike whatever its layout: a graph's (image rows vary in number; a mixture of
  // experts routes on the host, its rows per expert varying too).
  bool fixed = fixed_shape && !step.image_rows.defined() && !c.moe;
  for (const auto& l : layers_) {
    auto& attend = in.attend[l.kind.sliding];
    if (attend) continue;
    attend = plan(queries, l.kind.sliding);
    const auto shape = attend->launch_shape();
    fixed = fixed && !shape.empty();
    in.launch_shape.insert(in.launch_shape.end(), shape.begin(), shape.end());
  }
  if (fixed) {
    for (const auto* t : {&in.token_ids, &in.key_slots, &in.rope_positions, &in.long_rope}) in.launch_shape.push_back(t->defined() ? t->size(0) : -1);
    return in;
  }
  in.launch_shape.clear();
  // Past the last layer's K/V only the output rows matter: the rest of that layer runs for them alone.
  auto rows = at::tensor(at::ArrayRef<int64_t>(step.output_rows), at::TensorOptions().dtype(at::kLong));
  in.output_rows = rows.to(device);
  if (step.output_rows.empty()) return in;
  std::vector<int64_t> key_end;
  for (auto r : step.output_rows) key_end.push_back(step.key_end[r]);
  const QueryLayout out_queries{step.positions.index_select(0, rows), step.segments.index_select(0, rows), step.parents.index_select(0, rows),
                                step.roots.index_select(0, rows), key_end};
  const bool sliding = layers_.back().kind.sliding;
  in.attend_output[sliding] = plan(out_queries, sliding);
  return in;
}

void Transformer::refill(StepInputs& into, const StepInputs& from) {
  if (into.launch_shape.empty() || into.launch_shape != from.launch_shape) throw std::logic_error("refill: steps of another launch shape");
  for (auto [a, b] : {std::pair{&into.token_ids, &from.token_ids}, {&into.positions, &from.positions}, {&into.slots, &from.slots},
                      {&into.key_slots, &from.key_slots}, {&into.rope_positions, &from.rope_positions}, {&into.long_rope, &from.long_rope}})
    if (a->defined()) a->copy_(*b);
  for (int sliding = 0; sliding < 2; ++sliding)
    if (into.attend[sliding]) into.attend[sliding]->refill_from(*from.attend[sliding]);
}

at::Tensor Transformer::run(const StepInputs& in, KvCache& cache) const {
  const auto& c = config_;
  const int64_t n_layers = static_cast<int64_t>(layers_.size());
  const int64_t q_dim = c.num_heads * c.head_dim;
  auto embedded = embed_.index_select(0, in.token_ids);
  // Gemma: times sqrt(hidden), the scale rounded to the weights' dtype and the product taken in it, as transformers does.
  if (c.scale_embeddings) embedded = embedded.mul(at::scalar_tensor(std::sqrt(static_cast<double>(c.hidden_size)), embedded.options()));
  auto x = embedded.to(at::kFloat);
  if (in.image_rows.defined()) x.index_copy_(0, in.image_rows, in.image_embeds);
  const auto rope = rope_rows(in, rope_);
  const auto local_rope = local_rope_.cos.defined() ? rope_rows(in, local_rope_) : rope;
  // Each sublayer's input is made where the residual add before it ends (fused there, where the kernels can).
  auto h = input(x, layers_[0].attn_in_norm);
  for (int64_t li = 0; li < n_layers; ++li) {
    TQ_PROFILE_SCOPE("tq::layer");
    const Layer& l = layers_[li];
    const auto& layer_rope = l.kind.local_rope ? local_rope : rope;
    // The fused rows read q, k and v as the GEMM rounded them (no fp32 copy); the other paths take them in fp32.
    const auto q = project(l, li, (*l.qkv)(h, fuses_qk(l) ? l.qkv->natural_dtype() : at::kFloat), layer_rope, in.slots, cache);
    record(li, "input", h);
    auto keys = cache.keys(li, in.key_slots), values = cache.values(li, in.key_slots);
    record(li, "keys", keys);
    record(li, "values", values);
    at::Tensor attn;
    if (li < n_layers - 1 || !in.output_rows.defined()) {
      const auto q_in = query_rows(l, q, layer_rope, {});
      record(li, "query", q_in);
      attn = (*in.attend[l.kind.sliding])(q_in, keys, values);
    } else {
      if (in.output_rows.size(0) == 0) return at::empty({0, c.hidden_size}, x.options());
      x = x.index_select(0, in.output_rows);
      const auto out_q = query_rows(l, q, layer_rope, in.output_rows);
      record(li, "query", out_q);
      attn = (*in.attend_output[l.kind.sliding])(out_q, keys, values);
    }
    record(li, "attention", attn);
    const auto h2 = add_then_input(*l.o, attn.view({x.size(0), q_dim}), l.attn_out_norm, x, l.ffn_in_norm);
    record(li, "mlp input", h2);
    const bool last = li + 1 == n_layers;
    h = add_mlp_then_input(l, h2, x, last ? at::Tensor() : layers_[li + 1].attn_in_norm, last);
    record(li, "residual", x);
  }
  return norm(x, final_norm_, at::kFloat);
}

}  // namespace tq
