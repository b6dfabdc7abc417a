// The fp8 GEMM behind --quantization fp8 on CUDA (kernels/aten/fp8_linear.h):
// e4m3 weights quantized once per output channel, activations per row at each
// call, products on the tensor cores (mma.sync m16n8k32 e4m3, sm_89 and up).
//
//   weights, row j:     s_w[j] = max_k |W[j,k]| / 448,  q_w[j,k] = e4m3(W[j,k] * (448 / max_k |W[j,k]|))
//   activations, row i: s_x[i] and q_x[i,k] likewise
//   acc[i,j] = sum over k blocks b of (sum_{k in b} q_x[i,k] q_w[j,k])   (fp32)
//   y[i,j]   = fma(acc[i,j], s_x[i] * s_w[j], init[i,j])   (init: bias, residual or 0)
//
// e4m3: round to nearest even, saturating at +-448 (its largest finite value);
// a row of zeros has scale 0. k is padded with zeros to a multiple of kFp8Align.
//
// Each block of kFp8Align k is summed by tensor-core mma from zero, and the
// blocks' sums are added in fp32 on the CUDA cores, in k order: the H100's fp8
// mma accumulates with fewer mantissa bits than fp32 (about 14, DeepSeek-V3
// report, section 3.3.2, which promotes every 128), so long chains inside the
// tensor core would lose precision.
//
// Why a row's result does not depend on its batch: q_x and s_x come from the
// row alone, and every output is one fixed chain (the same mma instructions
// over the same k blocks in the same order, no split-K) whatever M and
// wherever the row falls in a tile. (Through the engine on CUDA, cuBLAS and
// SDPA still choose their reductions by shape: docs/gpu.md.)
//
// Torch-free (raw pointers and a stream) so that nvcc compiles it alone: CI
// builds it for sm_90 without a GPU or a CUDA libtorch.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace tq::cuda {

constexpr int64_t kFp8Align = 64;  // k per block: a row's bytes are padded to a multiple of this
constexpr float kFp8Max = 448.0f;  // e4m3's largest finite value

inline int64_t fp8_padded_k(int64_t k) { return (k + kFp8Align - 1) / kFp8Align * kFp8Align; }

// rows of x (fp32, or bf16 where x_bf16; rows ldx elements apart) into e4m3
// rows of fp8_padded_k(k) bytes (ldq apart) and one scale per row.
struct Fp8QuantizeArgs {
  const void* x;
  bool x_bf16;
  int64_t rows, k, ldx;
  uint8_t* q;
  int64_t ldq;
  float* scale;
};

struct Fp8GemmArgs {
  const uint8_t* x;      // [m, ld] e4m3, rows ld bytes apart (ld = fp8_padded_k(k), 16-byte aligned)
  const float* x_scale;  // [m]
  const uint8_t* w;      // [n, ld] e4m3
  const float* w_scale;  // [n]
  const float* bias;     // [n] or null
  void* out;             // [m, n], rows ldc apart: fp32, or bf16 where out_bf16
  int64_t ldc, m, n, ld;
  bool accumulate;       // onto out (fp32 only)
  bool out_bf16;         // rounded to nearest even
};

cudaError_t launch_fp8_quantize(const Fp8QuantizeArgs& args, cudaStream_t stream);
cudaError_t launch_fp8_gemm(const Fp8GemmArgs& args, cudaStream_t stream);

}  // namespace tq::cuda
