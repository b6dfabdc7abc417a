// The arguments of the fused row kernels (row_kernels_math.h has their arithmetic): one
// struct per kernel, read by the CUDA launch (kernels/cuda/row_kernels.h) and by its host
// form (kernels/fused/row_kernels_host.h) alike. Plain pointers, no CUDA or torch types.
// Elements are fp32 (`float`) or bf16 (bits, `*_bf16` set).
#pragma once
#include <cstdint>

namespace tq::rows {

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
struct QkNormRopeArgs {
  int tokens, heads, kv_heads, head_dim;  // kv_heads 0: q alone (RoPE of one tensor's heads)
  const void* qkv;  // [tokens, (heads + 2 kv_heads) head_dim]: q, k, v heads; row stride token_stride
  bool qkv_bf16;    // qkv in bf16 (bits: the GEMM's own output, widened here), else fp32
  int64_t token_stride;
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
  void* k_step;      // [at least tokens, kv_heads, head_dim]: the same keys at each token's row, or null
  void* v_step;      // likewise the values (StepKeys, kernels/layer_kernels.h)
  bool out_bf16;     // q_out, the caches and the step's keys: bf16 (else fp32)
};
struct GatedMulArgs {
  int rows, n;
  const void* gate;  // [rows, n], row stride `stride`
  const void* up;    // [rows, n], row stride `stride`
  int64_t stride;
  bool in_bf16, gelu_tanh;
  void* out;  // [rows, n] contiguous, in the input's dtype
};

}  // namespace tq::rows
