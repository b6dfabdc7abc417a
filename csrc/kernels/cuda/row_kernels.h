// The fused row kernels of the CUDA forward pass (`--cuda-forward fused`):
// each replaces a chain of small ATen ops with one launch, and computes every
// row with kernels/row_kernels_math.h, the CPU kernels' arithmetic in their
// order, so a row is the same bits on both devices. Torch-free (raw pointers
// and a stream): CI compiles them with nvcc for sm_90 without a GPU.
//   add_rms_norm    residual += addend (if any), then RMSNorm of the residual
//   qk_norm_rope    per head of q and k: RMSNorm (Qwen3's q/k norms, if any),
//                   rotate-half RoPE; q out, k and v written into their cache slots
//   gated_mul       act(gate) * up over row-strided views (gate and up halves
//                   of one concatenated GEMM's output)
// Elements are fp32 (`float`) or bf16 (bits, `*_bf16` set).
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace tq::cuda {

struct AddRmsNormArgs {
  int rows, n;
  float* residual;  // [rows, n] fp32, row stride n; updated in place when addend is set
  const void* addend;  // [rows, n] row stride addend_stride, or null
  bool addend_bf16;
  int64_t addend_stride;
  const float* weight;  // [n]
  float eps;
  void* out;  // [rows, n] contiguous
  bool out_bf16;
};
cudaError_t launch_add_rms_norm(const AddRmsNormArgs& args, cudaStream_t stream);

struct QkNormRopeArgs {
  int tokens, heads, kv_heads, head_dim;
  const float* qkv;  // [tokens, (heads + 2 kv_heads) head_dim] fp32: q, k, v heads
  const float* q_norm;  // [head_dim] or null (no q/k norm)
  const float* k_norm;  // [head_dim] or null
  float eps;
  const float* cos;  // [table rows, head_dim]
  const float* sin;
  const int64_t* rope_rows;  // [tokens]: each token's table row; null: no RoPE (a NoPE layer)
  void* q_out;       // [tokens, heads, head_dim]
  void* k_cache;     // [slots, kv_heads, head_dim]
  void* v_cache;     // [slots, kv_heads, head_dim]
  const int64_t* slots;  // [tokens]
  bool out_bf16;     // q_out and the caches: bf16 (else fp32)
};
cudaError_t launch_qk_norm_rope(const QkNormRopeArgs& args, cudaStream_t stream);

struct GatedMulArgs {
  int rows, n;
  const void* gate;  // [rows, n], row stride `stride`
  const void* up;    // [rows, n], row stride `stride`
  int64_t stride;
  bool in_bf16, gelu_tanh;
  void* out;  // [rows, n] contiguous, in the input's dtype
};
cudaError_t launch_gated_mul(const GatedMulArgs& args, cudaStream_t stream);

}  // namespace tq::cuda
