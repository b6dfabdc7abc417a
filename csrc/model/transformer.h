// The decoder-only transformer shared by Llama, Mistral, Qwen2, Qwen3 and
// Qwen2-VL's text model: RMSNorm, GQA attention with rotate-half RoPE
// (optionally llama3-scaled, or M-RoPE's three position streams),
// optional QKV bias (Qwen2) and per-head q/k norms (Qwen3), SwiGLU MLP.
// The residual stream is kept in fp32; matmuls run in the compute dtype. The
// arithmetic itself is the LayerKernels' (kernels/layer_kernels.h): the
// engine's CPU kernels, or ATen's ops on the chosen device (CUDA). The
// transformer only computes: the caller gives it a planned step and the cache.
#pragma once
#include <ATen/ATen.h>

#include <vector>

#include "batch/step_plan.h"
#include "cache/kv_cache.h"
#include "kernels/layer_kernels.h"
#include "model/checkpoint.h"

namespace tq {

class Transformer {
 public:
  // Weights are prepared by `kernels` and live on its device.
  Transformer(const Checkpoint& ckpt, at::ScalarType compute_dtype, int64_t max_positions, std::unique_ptr<LayerKernels> kernels);
  const ModelConfig& config() const { return config_; }
  at::ScalarType dtype() const { return dtype_; }
  const at::Tensor& lm_head() const { return lm_head_; }
  const LayerKernels& kernels() const { return *kernels_; }
  // Writes the step's keys and values into the cache (on the kernels' device) and returns
  // the final (normed) hidden states of the output rows, [R, hidden] fp32 on that device.
  at::Tensor forward(const StepBatch& step, KvCache& cache) const;

 private:
  struct Layer {
    at::Tensor input_norm, post_norm;  // fp32
    std::unique_ptr<Linear> qkv;       // q, k, v stacked; bias only with attention_bias
    std::unique_ptr<Linear> o, gate, up, down;
    at::Tensor q_norm, k_norm;  // undefined unless qk_norm
  };
  at::Tensor norm(const at::Tensor& x, const at::Tensor& w, at::ScalarType out_dtype) const;
  // RoPE's tables for a step and the row of each new token in them: cos_/sin_ by position,
  // or with M-RoPE one row per token, each frequency taken from its section's position stream.
  struct RopeRows {
    at::Tensor cos, sin, index;
  };
  RopeRows rope_rows(const StepBatch& step, const at::Tensor& positions) const;

  ModelConfig config_;
  at::ScalarType dtype_;
  std::unique_ptr<LayerKernels> kernels_;
  at::Tensor embed_, final_norm_, lm_head_;
  at::Tensor cos_, sin_;  // [max_positions, head_dim] fp32, computed in float64
  at::Tensor mrope_stream_;  // M-RoPE: [head_dim] int64, the position stream (t 0, h 1, w 2) of each column
  std::vector<Layer> layers_;
};

}  // namespace tq
