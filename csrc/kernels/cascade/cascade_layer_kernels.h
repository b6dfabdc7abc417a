// Attention as a cascade (batch/cascade_plan.h: tiers computed apart, merged
// by log-sum-exp), around another device's layer kernels: the GPU's form of
// the step's attention, and on the CPU the same plan and merge over the
// reference implementation, so that CI checks the cascade against the float64
// reference (`--attention cascade`; docs/gpu.md). Everything but attention is
// the inner kernels'.
#pragma once
#include <memory>

#include "kernels/layer_kernels.h"

namespace tq {

// dtype: the compute dtype (on CUDA it picks FlashAttention-2 or the memory-efficient kernel).
// fixed_shapes: a bucket's steps (batch/step_buckets.h) are planned in the fixed form CUDA graphs
// replay (batch/fixed_cascade.h), where the implementation allows.
std::unique_ptr<LayerKernels> cascade_layer_kernels(std::unique_ptr<LayerKernels> kernels, at::ScalarType dtype, bool fixed_shapes = false);

}  // namespace tq
