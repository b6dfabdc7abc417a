// A mixture-of-experts MLP (ModelConfig::moe: Qwen3-MoE, Mixtral, Qwen2-MoE), computing only the routed
// experts, with a token's answer independent of its company:
//  - routing is each token's own: its router logits (a row of an invariant GEMM, rounded to the compute dtype
//    as transformers rounds them) go through a float64 softmax on the host with fixed_math's exp, the top k are
//    taken with ties to the lower expert index, renormalised where the family does, and each weight is rounded
//    to the compute dtype (transformers' `routing_weights.to(hidden_states.dtype)`);
//  - each expert computes the rows routed to it through the layer kernels' GEMMs, whose result for a row does
//    not depend on the other rows;
//  - a token's output is the sum of weight x expert output over its k experts in expert-index order (the order
//    of transformers' loop), one fp32 add each, then Qwen2-MoE's shared expert.
// Routing reads the logits on the host: on CUDA a copy and a wait per sparse layer, and steps of a MoE model
// run without CUDA graphs.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/layer_kernels.h"
#include "model/model_config.h"

namespace tq {

// A step's routing: per expert, the rows routed to it (ascending) and their weights.
struct ExpertRoutes {
  std::vector<std::vector<int64_t>> rows;
  std::vector<std::vector<float>> weights;
};

// logits: [T, experts] fp32 on the host. Weights rounded to `dtype` (the compute dtype) and returned as floats.
ExpertRoutes route_tokens(const at::Tensor& logits, int64_t top_k, bool renormalize, at::ScalarType dtype);

// One gated MLP: down(act(gate(x)) * up(x)), an expert's or the shared expert's.
struct GatedMlp {
  std::unique_ptr<Linear> gate, up, down;
  int64_t bytes() const { return gate->bytes() + up->bytes() + down->bytes(); }
};

class MoeBlock {
 public:
  MoeBlock(const MoeConfig& config, const LayerKernels& kernels, at::ScalarType dtype, GateActivation act, std::unique_ptr<Linear> router,
           std::vector<GatedMlp> experts, std::unique_ptr<GatedMlp> shared, std::unique_ptr<Linear> shared_gate);
  // h: [T, hidden] in the compute dtype (the normed input). Returns the block's output [T, hidden] fp32.
  at::Tensor operator()(const at::Tensor& h) const;
  int64_t bytes() const;

 private:
  at::Tensor expert_output(const GatedMlp& mlp, const at::Tensor& x) const;
  at::Tensor shared_output(const at::Tensor& h) const;

  MoeConfig config_;
  const LayerKernels& kernels_;
  at::ScalarType dtype_;
  GateActivation act_;
  std::unique_ptr<Linear> router_;
  std::vector<GatedMlp> experts_;
  std::unique_ptr<GatedMlp> shared_;
  std::unique_ptr<Linear> shared_gate_;
};

// What a model's parameters are, in all and per token (a MoE model's active ones: the router's k experts).
struct ParameterCounts {
  int64_t total = 0, active = 0;
};
ParameterCounts parameter_counts(const ModelConfig& config);

}  // namespace tq
