// The decoder-only transformer shared by Llama, Mistral, Qwen2 and Qwen3:
// RMSNorm, GQA attention with rotate-half RoPE (optionally llama3-scaled),
// optional QKV bias (Qwen2) and per-head q/k norms (Qwen3), SwiGLU MLP.
// The residual stream is kept in fp32; matmuls run in the compute dtype on
// weights packed once for oneDNN (packed_linear.h).
#pragma once
#include <ATen/ATen.h>

#include <vector>

#include "checkpoint.h"
#include "attention.h"
#include "kv_cache.h"
#include "packed_linear.h"

namespace tq {

// The tokens one forward step computes and the cached tokens they may attend to.
struct StepBatch {
  at::Tensor token_ids, positions, segments, parents, roots, slots;  // [T] int64, the new tokens
  std::vector<int64_t> key_end;                       // [T] 1 + index of each new token's own key
  at::Tensor key_slots, key_positions, key_segments;  // [Tk] int64, includes the new tokens
  std::vector<int64_t> output_rows;                   // indices into the new tokens, ascending
};

class Transformer {
 public:
  // invariant: batch-invariant kernels (a row's result independent of the other rows), else oneDNN's.
  Transformer(const Checkpoint& ckpt, at::ScalarType compute_dtype, int64_t max_positions, bool invariant);
  const ModelConfig& config() const { return config_; }
  at::ScalarType dtype() const { return dtype_; }
  const at::Tensor& lm_head() const { return lm_head_; }
  // Writes the step's keys and values into the cache and returns the final
  // (normed) hidden states of the output rows, [R, hidden] fp32.
  at::Tensor forward(const StepBatch& step, KvCache& cache) const;

 private:
  struct Layer {
    at::Tensor input_norm, post_norm;  // fp32
    PackedLinear qkv;                  // q, k, v stacked; bias only with attention_bias
    PackedLinear o, gate, up, down;
    at::Tensor q_norm, k_norm;  // undefined unless qk_norm
  };
  at::Tensor norm(const at::Tensor& x, const at::Tensor& w, at::ScalarType out_dtype) const;

  ModelConfig config_;
  at::ScalarType dtype_;
  bool invariant_;
  at::Tensor embed_, final_norm_, lm_head_;
  at::Tensor cos_, sin_;  // [max_positions, head_dim] fp32, computed in float64
  std::vector<Layer> layers_;
};

}  // namespace tq
