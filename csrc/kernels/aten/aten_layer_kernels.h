// The transformer's LayerKernels as ATen's device-generic ops: what the CUDA
// engine runs (cuBLAS GEMMs in the compute dtype, SDPA attention with the
// step's visibility mask), and what the CPU runs with `kernels: "aten"` so that
// this path is checked against the float64 reference where CI has no GPU.
//
// Attention takes boolean masks built once per step from the engine's
// visibility rule, one per state in the step (a state's queries see only its
// keys), shared by every layer. It is right whatever the step holds: a cached
// prefix, several states, shared question text. SDPA's is_causal would not be
// (it aligns the causal triangle top-left, which is wrong once queries follow
// a cached prefix). The cascade (kernels/cascade/: FlashAttention-2 varlen
// tiers merged by log-sum-exp) skips the masked work; it is built, and to be
// measured against this path by the GPU check (docs/gpu.md).
#pragma once
#include "kernels/layer_kernels.h"
#include "kernels/quantization.h"

namespace tq {

// quantization: none (weights in the compute dtype, cuBLAS) or fp8 (CUDA only: fp8_linear.h).
// batch_invariant: on CUDA, cuBLAS never splits a bf16 or fp16 GEMM along K (a row's bits then do not depend
// on the rows beside it); process-wide. And on few rows such a GEMM runs in the form measured fastest among those
// that keep a cold state's bits (few_rows_gemm.h); own_gemm: our kernel among those forms too.
std::unique_ptr<LayerKernels> aten_layer_kernels(at::Device device, Quantization quantization = Quantization::None, bool batch_invariant = false,
                                                 bool own_gemm = false);

// cuBLAS's GEMMs on `device` (a CUDA one; nothing elsewhere) never split their reduction along K, for the process: what
// the batch-invariant engine sets, so that a row's bits do not depend on the rows beside it.
void keep_gemm_reductions_whole(const at::Device& device);

}  // namespace tq
