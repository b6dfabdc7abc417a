#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/profile_scope.h"

namespace tq {

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
                                          KvCache& cache, StepKeys& step) const {
  const auto& c = config_;
  if (fuses_qk(l)) {
    const bool norms = c.qk_norm == QkNorm::PerHead;
    const at::Tensor none;
    return {{}, kernels_->fused_rows()->qk_norm_rope_store(qkv, c.num_heads, c.num_kv_heads, norms ? l.q_norm : none, norms ? l.k_norm : none,
                                                           c.rms_norm_eps, l.kind.rotary ? rope.cos : none, l.kind.rotary ? rope.sin : none,
                                                           l.kind.rotary ? rope.index : none, cache.key_layer(li), cache.value_layer(li), slots, dtype_,
                                                           step)};
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

StepKeys Transformer::step_keys(const StepInputs& in, int64_t tokens) const {
  int64_t rows = 0;
  for (const auto* plans : {&in.attend, &in.attend_output})
    for (const auto& plan : *plans)
      if (plan) rows = std::max(rows, plan->step_key_rows());
  // Written by the fused rows only; a layer they do not take (fuses_qk) writes the store alone, and its plans then read
  // nothing here: asked for where every layer's keys come through them.
  const bool written = kernels_->fused_rows() && std::all_of(layers_.begin(), layers_.end(), [&](const Layer& l) { return fuses_qk(l); });
  if (rows == 0 || !written) return {};
  const auto options = at::TensorOptions().dtype(dtype_).device(kernels_->device());
  const auto shape = std::vector<int64_t>{std::max(rows, tokens), config_.num_kv_heads, config_.head_dim};
  return {at::empty(shape, options), at::empty(shape, options)};
}

at::Tensor Transformer::run(const StepInputs& in, KvCache& cache, const BetweenLayers& between) const {
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
  // Each layer writes them before its attention reads them, so one pair serves every layer.
  auto step_keys = this->step_keys(in, in.token_ids.size(0));
  for (int64_t li = 0; li < n_layers; ++li) {
    if (li > 0 && between) between(li);
    TQ_PROFILE_SCOPE("tq::layer");
    const Layer& l = layers_[li];
    const auto& layer_rope = l.kind.local_rope ? local_rope : rope;
    // The fused rows read q, k and v as the GEMM rounded them (no fp32 copy); the other paths take them in fp32.
    const auto q = project(l, li, (*l.qkv)(h, fuses_qk(l) ? l.qkv->natural_dtype() : at::kFloat), layer_rope, in.slots, cache, step_keys);
    record(li, "input", h);
    // The keys and values stay where they lie in the cache: the attention reads the step's there (over_store).
    const auto &k_store = cache.key_layer(li), &v_store = cache.value_layer(li);
    if (trace_) {
      record(li, "keys", cache.keys(li, in.key_slots));
      record(li, "values", cache.values(li, in.key_slots));
    }
    at::Tensor attn;
    if (li < n_layers - 1 || !in.output_rows.defined()) {
      const auto q_in = query_rows(l, q, layer_rope, {});
      record(li, "query", q_in);
      attn = in.attend[l.kind.sliding]->over_store(q_in, k_store, v_store, in.key_slots, step_keys);
    } else {
      if (in.output_rows.size(0) == 0) return at::empty({0, c.hidden_size}, x.options());
      x = x.index_select(0, in.output_rows);
      const auto out_q = query_rows(l, q, layer_rope, in.output_rows);
      record(li, "query", out_q);
      attn = in.attend_output[l.kind.sliding]->over_store(out_q, k_store, v_store, in.key_slots, step_keys);
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
