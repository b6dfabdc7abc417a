// Attention as a cascade (batch/cascade_plan.h: tiers computed apart, merged
// by log-sum-exp), around another device's layer kernels: the GPU's form of
// the step's attention, and on the CPU the same plan and merge over the
// reference implementation, so that CI checks the cascade against the float64
// reference (`--attention cascade`; docs/gpu.md). Everything but attention is
// the inner kernels'.
#pragma once
#include <memory>

#include "common/choices.h"
#include "kernels/layer_kernels.h"

namespace tq {

// What computes the state tier (each row over all of its state's keys): the varlen kernel that computes the
// other tiers (FlashAttention-2 or the memory-efficient kernel on CUDA, the plain reference on the CPU), its keys
// and values gathered first; or our split-key kernel (kernels/math/split_key_math.h), which reads them in place.
enum class StateAttention { Varlen, SplitKey };
template <>
struct ChoiceTable<StateAttention> {
  static constexpr const char* option = "stateAttention";
  static constexpr NamedValue<StateAttention> values[] = {{StateAttention::Varlen, "varlen"}, {StateAttention::SplitKey, "split-key"}};
};

// dtype: the compute dtype (on CUDA it picks FlashAttention-2 or the memory-efficient kernel).
// fixed_shapes: a bucket's steps (batch/step_buckets.h) are planned in the fixed form CUDA graphs
// replay (batch/fixed_cascade.h), where the implementation allows.
std::unique_ptr<LayerKernels> cascade_layer_kernels(std::unique_ptr<LayerKernels> kernels, at::ScalarType dtype, bool fixed_shapes = false,
                                                   StateAttention state = StateAttention::Varlen);

}  // namespace tq
