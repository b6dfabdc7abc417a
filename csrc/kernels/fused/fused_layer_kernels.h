// The fused forward (`--cuda-forward fused`; docs/gpu.md): another device's
// kernels (ATen's: cuBLAS GEMMs) with the row work done by the engine's own
// fused row kernels, one launch for what ATen runs as a chain of small ops:
// RMSNorm (with the residual add before it), q/k norm + RoPE + the K/V cache
// write, SiLU/GELU(gate) * up over one concatenated gate/up GEMM. On CUDA the
// launches of kernels/cuda/row_kernels.h; on the CPU their host forms with the
// same arguments and arithmetic, so the whole path runs and is checked in CI.
#pragma once
#include <memory>

#include "kernels/layer_kernels.h"

namespace tq {

std::unique_ptr<LayerKernels> fused_layer_kernels(std::unique_ptr<LayerKernels> gemms);

}  // namespace tq
