// A GEMM whose every output is one fixed chain of fused multiply-adds over k,
// in k order, started from its initial value:
//   y[i][j] = fma(x[i][K-1], w[j][K-1], ... fma(x[i][0], w[j][0], init[i][j]))
// so a row's result depends on that row and the weights only: not on how many
// rows are computed with it, where it sits among them, how K is blocked or how
// the columns are split between threads. oneDNN's kernels lack that property:
// measured here (AVX2, fp32, K = 4864), one row's output took 5 different
// values over M from 1 to 2048 and over its place in the M tail (up to 2.7e-4
// apart), so a question's answer changed with the batch it was computed in.
//
// Vectors run along the output columns (one lane = one column), so no sum is
// ever split across lanes. (The portable build, for CPUs without FMA, has
// separate multiplies and adds: another fixed chain, so invariant all the same.) Weights are packed once into panels of kPanel
// columns, [K][kPanel] each, in fp32 or bf16; bf16 values widen to fp32
// exactly, so a bf16 product is exact and only the accumulation rounds.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>

namespace tq {

namespace invariant_gemm {
// Which instruction set the kernel runs with on this CPU: "avx512", "avx2" or "portable".
const char* isa();
// Columns per panel on this CPU, and panels for n columns.
int64_t panel_width();
inline int64_t panels(int64_t n) { return (n + panel_width() - 1) / panel_width(); }
// Packs w, n x k with element (j, kk) at w[j * stride_n + kk * stride_k] (bf16
// or fp32 values), into panels(n) * k * panel_width() values at dst, zero-padded.
void pack(const void* w, bool bf16, int64_t n, int64_t k, int64_t stride_n, int64_t stride_k, void* dst);
// out[m, n] (rows ldc apart) = (accumulate ? out : 0) + a[m, k] (rows lda apart, fp32 or
// bf16 as the packed values) times the packed matrix transposed, on the calling thread.
void multiply(const void* a, int64_t lda, bool bf16, const void* packed, int64_t m, int64_t k, int64_t n, float* out, int64_t ldc,
              bool accumulate);
}  // namespace invariant_gemm

// A linear layer on the kernel above, weights packed once; columns split between threads.
class InvariantGemm {
 public:
  InvariantGemm() = default;
  // weight: [N, K] in fp32 or bf16 (the activations must come in the same dtype); bias: [N] or undefined.
  InvariantGemm(const at::Tensor& weight, const at::Tensor& bias);

  // out[M, N] fp32 = init + x W^T for x [M, K]: init is out itself when
  // accumulate (a residual), else the bias, else 0.
  void run(const at::Tensor& x, at::Tensor& out, bool accumulate) const;

 private:
  int64_t in_ = 0, out_ = 0;
  at::ScalarType dtype_ = at::kFloat;
  at::Tensor panels_;  // [ceil(N / panel), K, panel] in dtype_, zero-padded columns
  at::Tensor bias_;    // [ceil(N / panel) * panel] fp32, zero-padded, or undefined
};

}  // namespace tq
