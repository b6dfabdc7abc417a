// The decoder-only transformer shared by Llama, Mistral, Qwen2 and Qwen3:
// RMSNorm, GQA attention with rotate-half RoPE (optionally llama3-scaled),
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

  ModelConfig config_;
  at::ScalarType dtype_;
  std::unique_ptr<LayerKernels> kernels_;
  at::Tensor embed_, final_norm_, lm_head_;
  at::Tensor cos_, sin_;  // [max_positions, head_dim] fp32, computed in float64
  std::vector<Layer> layers_;
};

}  // namespace tq
