// The fused row kernels of the CUDA forward pass (`--cuda-forward fused`):
// each replaces a chain of small ATen ops with one launch, and computes every
// row with kernels/math/row_kernels_math.h, the CPU kernels' arithmetic in their
// order, so a row is the same bits on both devices. Torch-free (raw pointers
// and a stream): CI compiles them with nvcc for sm_90 without a GPU. Their host
// forms (kernels/fused/row_kernels_host.h) take the same arguments.
//   add_rms_norm    residual += addend (if any), then RMSNorm of the residual
//   qk_norm_rope    per head of q and k: RMSNorm (Qwen3's q/k norms, if any),
//                   rotate-half RoPE; q out, k and v written into their cache slots
//   gated_mul       act(gate) * up over row-strided views (gate and up halves
//                   of one concatenated GEMM's output)
#pragma once
#include <cuda_runtime_api.h>

#include "kernels/math/row_kernel_args.h"

namespace tq::cuda {

cudaError_t launch_add_rms_norm(const rows::AddRmsNormArgs& args, cudaStream_t stream);
cudaError_t launch_qk_norm_rope(const rows::QkNormRopeArgs& args, cudaStream_t stream);
cudaError_t launch_gated_mul(const rows::GatedMulArgs& args, cudaStream_t stream);

}  // namespace tq::cuda
