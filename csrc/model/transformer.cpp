#include "model/transformer.h"

#include <cmath>


namespace tq {
namespace {

// Inverse RoPE frequencies in float64, with Llama 3's wavelength-dependent scaling.
at::Tensor inverse_frequencies(const ModelConfig& c) {
  auto idx = at::arange(0, c.head_dim, 2, at::kDouble);
  auto inv = 1.0 / at::pow(c.rope_theta, idx / static_cast<double>(c.head_dim));
  if (!c.rope_scaling) return inv;
  const auto& s = *c.rope_scaling;
  const double old_len = static_cast<double>(s.original_max_position_embeddings);
  const double low_wavelen = old_len / s.low_freq_factor, high_wavelen = old_len / s.high_freq_factor;
  auto wavelen = 2.0 * M_PI / inv;
  auto scaled = at::where(wavelen > low_wavelen, inv / s.factor, inv);
  auto smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  auto smoothed = (1.0 - smooth) * scaled / s.factor + smooth * scaled;
  auto medium = (wavelen >= high_wavelen).logical_and(wavelen <= low_wavelen);
  return at::where(medium, smoothed, scaled);
}

std::string layer_name(int64_t i, const char* rest) { return "model.layers." + std::to_string(i) + "." + rest; }

}  // namespace

Transformer::Transformer(const Checkpoint& ckpt, at::ScalarType dtype, int64_t max_positions, std::unique_ptr<LayerKernels> kernels)
    : config_(ckpt.config()), dtype_(dtype), kernels_(std::move(kernels)) {
  const auto& c = config_;
  const int64_t h = c.hidden_size, q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  const auto f32 = at::kFloat;
  const auto device = kernels_->device();
  // On the CPU a weight stays a view of the memory map; elsewhere it is copied to the device.
  auto on_device = [&](const std::string& name, at::IntArrayRef shape, at::ScalarType type) {
    auto w = ckpt.get(name, shape, type);
    if (device.is_cpu()) return w;
    auto copy = w.to(device);
    ckpt.release(w);
    return copy;
  };
  embed_ = on_device("model.embed_tokens.weight", {c.vocab_size, h}, dtype);
  final_norm_ = on_device("model.norm.weight", {h}, f32);
  if (ckpt.has("lm_head.weight") || !c.tie_word_embeddings) lm_head_ = on_device("lm_head.weight", {c.vocab_size, h}, dtype);
  else lm_head_ = embed_;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    auto weight = [&](const char* rest, at::IntArrayRef shape) { return ckpt.get(layer_name(i, rest), shape, dtype); };
    // Prepares the (stacked) weights for the kernels, then lets their mapped pages go.
    auto linear = [&](const std::vector<at::Tensor>& parts, const at::Tensor& bias) {
      auto prepared = kernels_->linear(parts.size() == 1 ? parts[0] : at::cat(parts), bias);
      for (const auto& w : parts) ckpt.release(w);
      return prepared;
    };
    Layer l;
    l.input_norm = on_device(layer_name(i, "input_layernorm.weight"), {h}, f32);
    l.post_norm = on_device(layer_name(i, "post_attention_layernorm.weight"), {h}, f32);
    at::Tensor qkv_bias;
    if (c.attention_bias) {
      qkv_bias = at::cat({ckpt.get(layer_name(i, "self_attn.q_proj.bias"), {q_dim}, f32), ckpt.get(layer_name(i, "self_attn.k_proj.bias"), {kv_dim}, f32),
                          ckpt.get(layer_name(i, "self_attn.v_proj.bias"), {kv_dim}, f32)});
    }
    // q, k and v come from one GEMM: one call instead of three at every layer.
    l.qkv = linear({weight("self_attn.q_proj.weight", {q_dim, h}), weight("self_attn.k_proj.weight", {kv_dim, h}),
                  weight("self_attn.v_proj.weight", {kv_dim, h})},
                 qkv_bias);
    l.o = linear({weight("self_attn.o_proj.weight", {h, q_dim})}, {});
    l.gate = linear({weight("mlp.gate_proj.weight", {c.intermediate_size, h})}, {});
    l.up = linear({weight("mlp.up_proj.weight", {c.intermediate_size, h})}, {});
    l.down = linear({weight("mlp.down_proj.weight", {h, c.intermediate_size})}, {});
    if (c.qk_norm) {
      l.q_norm = on_device(layer_name(i, "self_attn.q_norm.weight"), {c.head_dim}, f32);
      l.k_norm = on_device(layer_name(i, "self_attn.k_norm.weight"), {c.head_dim}, f32);
    }
    layers_.push_back(std::move(l));
  }
  auto angles = at::outer(at::arange(max_positions, at::kDouble), inverse_frequencies(c));
  auto full = at::cat({angles, angles}, -1);  // rotate-half layout: both halves share a frequency
  cos_ = full.cos().to(device, f32);
  sin_ = full.sin().to(device, f32);
  if (!c.mrope_section.empty()) {
    // transformers' apply_multimodal_rotary_pos_emb: sections [t, h, w] over the frequencies, in both halves.
    std::vector<int64_t> stream;
    for (int half = 0; half < 2; ++half)
      for (int64_t s = 0; s < 3; ++s) stream.insert(stream.end(), c.mrope_section[s], s);
    mrope_stream_ = at::tensor(stream, at::kLong).to(device);
  }
}

Transformer::RopeRows Transformer::rope_rows(const StepBatch& step, const at::Tensor& positions) const {
  if (!step.rope_positions.defined()) return {cos_, sin_, positions};
  const auto device = kernels_->device();
  const auto streams = step.rope_positions.to(device);  // [T, 3]
  const int64_t t = streams.size(0), d = cos_.size(1);
  auto pick = [&](const at::Tensor& table) {
    auto rows = table.index_select(0, streams.reshape({-1})).view({t, 3, d});
    return rows.gather(1, mrope_stream_.view({1, 1, d}).expand({t, 1, d})).squeeze(1).contiguous();
  };
  return {pick(cos_), pick(sin_), at::arange(t, at::TensorOptions().dtype(at::kLong).device(device))};
}

at::Tensor Transformer::norm(const at::Tensor& x, const at::Tensor& w, at::ScalarType out_dtype) const {
  return kernels_->rms_norm(x, w, config_.rms_norm_eps, out_dtype);
}

at::Tensor Transformer::forward(const StepBatch& step, KvCache& cache) const {
  const auto& c = config_;
  const auto& k_ = *kernels_;
  const int64_t n_layers = static_cast<int64_t>(layers_.size());
  const int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  // The step's indices on the device, moved once (the plan is built on the CPU).
  const auto device = k_.device();
  const auto positions = step.positions.to(device), slots = step.slots.to(device), key_slots = step.key_slots.to(device);
  auto x = embed_.index_select(0, step.token_ids.to(device)).to(at::kFloat);
  if (step.image_rows.defined()) x.index_copy_(0, step.image_rows.to(device), step.image_embeds.to(device));
  const auto rope = rope_rows(step, positions);
  const auto attend = k_.plan_attention({step.positions, step.segments, step.parents, step.roots, step.key_end}, step.key_positions,
                                        step.key_segments, c.sliding_window, c.num_heads);
  for (int64_t li = 0; li < n_layers; ++li) {
    const Layer& l = layers_[li];
    const int64_t t = x.size(0);
    auto qkv = (*l.qkv)(norm(x, l.input_norm, dtype_), at::kFloat);
    auto q = qkv.slice(1, 0, q_dim).view({t, c.num_heads, c.head_dim});
    auto k = qkv.slice(1, q_dim, q_dim + kv_dim).view({t, c.num_kv_heads, c.head_dim});
    auto v = qkv.slice(1, q_dim + kv_dim).view({t, c.num_kv_heads, c.head_dim});
    if (c.qk_norm) {
      q = norm(q, l.q_norm, at::kFloat);
      k = norm(k, l.k_norm, at::kFloat);
    }
    cache.write(li, slots, k_.rope(k, rope.cos, rope.sin, rope.index, dtype_), v);
    auto keys = cache.keys(li, key_slots), values = cache.values(li, key_slots);
    at::Tensor attn;
    if (li < n_layers - 1) {
      attn = (*attend)(k_.rope(q, rope.cos, rope.sin, rope.index, dtype_), keys, values);
    } else {
      // Past the last layer's K/V only the output rows matter: the rest of
      // the layer runs for them alone.
      if (step.output_rows.empty()) return at::empty({0, c.hidden_size}, x.options());
      auto rows = at::tensor(at::ArrayRef<int64_t>(step.output_rows), at::TensorOptions().dtype(at::kLong));
      std::vector<int64_t> key_end;
      for (auto r : step.output_rows) key_end.push_back(step.key_end[r]);
      QueryLayout out_queries{step.positions.index_select(0, rows), step.segments.index_select(0, rows), step.parents.index_select(0, rows),
                              step.roots.index_select(0, rows), key_end};
      auto attend_out = k_.plan_attention(out_queries, step.key_positions, step.key_segments, c.sliding_window, c.num_heads);
      const auto device_rows = rows.to(device);
      x = x.index_select(0, device_rows);
      attn = (*attend_out)(k_.rope(q.index_select(0, device_rows), rope.cos, rope.sin, rope.index.index_select(0, device_rows), dtype_), keys, values);
    }
    l.o->add_into(attn.view({x.size(0), q_dim}), x);
    auto h2 = norm(x, l.post_norm, dtype_);
    auto gated = (*l.gate)(h2, dtype_);
    gated = k_.silu_mul(gated, (*l.up)(h2, dtype_));
    l.down->add_into(gated, x);
  }
  return norm(x, final_norm_, at::kFloat);
}

}  // namespace tq
