#include "kernels/cpu/gemm/invariant_gemm.h"

#include <ATen/Parallel.h>

#include "kernels/cpu/gemm/gemm_kernels.h"
#include "kernels/cpu/gemm/weight_memory.h"

namespace tq {
namespace {

// Chosen per call from small values; the kernels themselves are plain functions.
gemm::Kernel kernel_for(Isa isa, bool bf16) {
  return invariant_gemm::level_for(isa, bf16) == Isa::Avx512Bf16 ? gemm::dpbf16_kernel() : gemm::fma_kernel(isa, bf16);
}
// The native bf16 kernel: on the tiles, or on their model under the test instrument TQ_AMX_MODEL=1
// (gemm::native_bf16_available says which runs).
gemm::Kernel native_kernel() { return gemm::cpu_has_amx_bf16() ? gemm::amx_bf16_kernel() : gemm::amx_bf16_model_kernel(); }

}  // namespace

namespace invariant_gemm {

Isa level_for(Isa isa, bool bf16) { return isa == Isa::Avx512Bf16 && !bf16 ? Isa::Avx512 : isa; }

size_t packed_bytes(Isa isa, bool bf16, int64_t n, int64_t k) { return kernel_for(isa, bf16).packed_bytes(n, k); }

void pack(Isa isa, const void* const* rows, bool along_k, bool bf16, int64_t n, int64_t k, void* dst) {
  kernel_for(isa, bf16).pack(gemm::PackSource{rows, along_k}, n, k, dst);
}

void multiply(Isa isa, const void* a, int64_t lda, bool bf16, const void* packed, int64_t m, int64_t k, int64_t n, float* out, int64_t ldc,
              bool accumulate) {
  if (m == 0) return;
  const auto kernel = kernel_for(isa, bf16);
  kernel.run(gemm::GemmOperands{a, packed, out, nullptr, m, k, n, lda, ldc, accumulate}, 0, kernel.panels(n));
}

}  // namespace invariant_gemm

InvariantGemm::InvariantGemm(const at::Tensor& weight, const at::Tensor& bias, Isa isa, bool native)
    : in_(weight.size(1)), out_(weight.size(0)), dtype_(weight.scalar_type()), isa_(isa), native_(native) {
  TORCH_CHECK(dtype_ == at::kFloat || dtype_ == at::kBFloat16, "InvariantGemm: fp32 or bf16 weights, got ", dtype_);
  TORCH_CHECK(!native || dtype_ == at::kBFloat16, "InvariantGemm: the native arithmetic is bf16's");
  const auto kernel = native_ ? native_kernel() : kernel_for(isa_, dtype_ == at::kBFloat16);
  auto w = weight.contiguous();
  panels_ = weight_buffer(static_cast<int64_t>(kernel.packed_bytes(out_, in_)));
  const auto rows = gemm::rows_every(w.data_ptr(), out_, in_ * w.element_size());
  kernel.pack(gemm::PackSource{rows.data(), /*along_k=*/true}, out_, in_, panels_.data_ptr());
  if (bias.defined()) {
    bias_ = at::zeros({kernel.panels(out_) * kernel.width}, at::kFloat);
    bias_.slice(0, 0, out_).copy_(bias.to(at::kFloat).reshape({out_}));
  }
}

void InvariantGemm::run(const at::Tensor& x, at::Tensor& out, bool accumulate) const {
  TORCH_CHECK(x.scalar_type() == dtype_ && x.dim() == 2 && x.size(1) == in_ && x.is_contiguous(), "InvariantGemm: input ", x.sizes(), " ",
              x.scalar_type(), " for weights [", out_, ", ", in_, "] ", dtype_);
  const bool out_bf16 = out.scalar_type() == at::kBFloat16;
  TORCH_CHECK((out.scalar_type() == at::kFloat || (out_bf16 && !accumulate)) && out.is_contiguous() && out.dim() == 2 &&
                  out.size(0) == x.size(0) && out.size(1) == out_,
              "InvariantGemm: output ", out.sizes(), " ", out.scalar_type(), accumulate ? " to accumulate onto" : "");
  const int64_t m = x.size(0);
  if (m == 0) return;
  const auto kernel = native_ ? native_kernel() : kernel_for(isa_, dtype_ == at::kBFloat16);
  // A bf16 output is rounded tile by tile when K fits one of the family's k
  // blocks (every K the vdpbf16ps family meets up to 2,048); else it goes
  // through an fp32 copy, rounded after, which gives the same bits. In a
  // 1,000-token prefill the fp32 copies of the gate and up projections were
  // 78 MB written, read and freed per layer: 6% of the time in page faults.
  if (out_bf16 && in_ > kernel.block_k) {
    auto wide = at::empty(out.sizes(), out.options().dtype(at::kFloat));
    run(x, wide, false);
    out.copy_(wide);
    return;
  }
  const gemm::GemmOperands job{x.data_ptr(), panels_.data_ptr(), out.data_ptr(), bias_.defined() ? bias_.data_ptr<float>() : nullptr,
                      m, in_, out_, in_, out_, accumulate, out_bf16};
  // Columns are split between threads: no output is ever summed by two of them.
  at::parallel_for(0, kernel.panels(out_), 1, [&](int64_t a, int64_t b) { kernel.run(job, a, b); });
}

}  // namespace tq
