// A GEMM whose every output is one fixed chain of steps over k, in k order,
// started from its initial value, so a row's result depends on that row and
// the weights only: not on how many rows are computed with it, where it sits
// among them, how K is blocked or how the columns are split between threads
// (the families and their loops: gemm_kernels.h). oneDNN's kernels lack that
// property: one row's output takes different values over M and over its place
// in the M tail (bench/README.md), so a question's answer changed with the
// batch it was computed in.
//
// Which family runs depends on the level (isa.h) and the dtype: bf16 on
// avx512-bf16 runs the vdpbf16ps family (two k per step, as oneDNN's bf16
// matmuls do); everything else the FMA family (one k per step, fp32 products).
// Weights are packed for one (level, dtype) and multiplied at the same.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>

#include "kernels/cpu/isa.h"

namespace tq {

namespace invariant_gemm {
// The level a GEMM of this dtype runs at: the vdpbf16ps family only for bf16.
Isa level_for(Isa isa, bool bf16);
// Bytes of w (n x k) packed for (isa, bf16).
size_t packed_bytes(Isa isa, bool bf16, int64_t n, int64_t k);
// Packs an n x k matrix (bf16 or fp32 values) given as rows, each of contiguous values wherever it lies: along k
// (row j holds element (j, kk) at kk) or along n (row kk holds it at j); into packed_bytes(...) bytes at dst,
// zero-padded.
void pack(Isa isa, const void* const* rows, bool along_k, bool bf16, int64_t n, int64_t k, void* dst);
// out[m, n] (rows ldc apart) = (accumulate ? out : 0) + a[m, k] (rows lda apart, fp32 or
// bf16 as the packed values) times the packed matrix transposed, on the calling thread.
void multiply(Isa isa, const void* a, int64_t lda, bool bf16, const void* packed, int64_t m, int64_t k, int64_t n, float* out,
              int64_t ldc, bool accumulate);
}  // namespace invariant_gemm

// A linear layer on the kernel above, weights packed once; columns split between threads.
class InvariantGemm {
 public:
  InvariantGemm() = default;
  // weight: [N, K] in fp32 or bf16 (the activations must come in the same dtype); bias: [N] or undefined.
  // native: bf16 on AMX tiles (gemm_amx_bf16.cpp), the native arithmetic (docs/arithmetic.md), whatever the level.
  InvariantGemm(const at::Tensor& weight, const at::Tensor& bias, Isa isa, bool native = false);

  // out[M, N] = init + x W^T for x [M, K]: init is out itself when
  // accumulate (a residual, fp32), else the bias, else 0. out in fp32, or in
  // bf16 (each output rounded to nearest even, as at::BFloat16).
  void run(const at::Tensor& x, at::Tensor& out, bool accumulate) const;
  int64_t bytes() const { return panels_.nbytes() + (bias_.defined() ? bias_.nbytes() : 0); }

 private:
  int64_t in_ = 0, out_ = 0;
  at::ScalarType dtype_ = at::kFloat;
  Isa isa_ = Isa::Generic;
  bool native_ = false;
  at::Tensor panels_;  // packed_bytes(isa_, ...) bytes
  at::Tensor bias_;    // [panels * width] fp32, zero-padded, or undefined
};

}  // namespace tq
