// A linear layer with e4m3 weights on CUDA (--quantization fp8): quantized per
// output channel once at load, the activations per row at each call, on the
// engine's own fp8 GEMM (kernels/cuda/fp8_gemm.h: tensor-core mma, fp32 sums
// in a fixed order, so a row's result does not depend on its batch). The
// weights take 1 byte each (bf16: 2) plus a scale per output channel.
#pragma once
#include <memory>

#include "kernels/layer_kernels.h"

namespace tq {

// weight: [out, in] in the compute dtype (on any device); bias: [out] or undefined. Throws on a build
// without CUDA, or a device older than compute capability 8.9 (fp8 mma: Ada, Hopper and newer).
std::unique_ptr<Linear> fp8_linear(const at::Tensor& weight, const at::Tensor& bias, at::Device device);

}  // namespace tq
