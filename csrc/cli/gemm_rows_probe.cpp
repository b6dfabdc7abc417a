#include "cli/gemm_rows_probe.h"

#include <string>

#include "common/errors.h"
#include "kernels/aten/aten_layer_kernels.h"
#include "kernels/aten/few_rows_gemm.h"
#include "kernels/math/few_rows_mma_math.h"

namespace tq {

OwnGemmTrial probe_own_gemm(int64_t rows, int64_t out, int64_t in, at::Device device) {
#if TQ_CUDA
  if (!device.is_cuda()) throw EngineError(code::kBadRequest, "tq_cli gemm-rows runs on a CUDA device (--device cuda)");
  const few_rows_mma::Args shape{nullptr, nullptr, nullptr, static_cast<int>(rows), static_cast<int>(in), static_cast<int>(out)};
  if (!few_rows_mma::fits(shape))
    throw EngineError(code::kBadRequest, "tq_cli gemm-rows: " + std::to_string(rows) + " rows of " + std::to_string(in) + " to " + std::to_string(out) +
                                             " is not a shape the kernel takes (1 to 32 rows, in a multiple of 64, out of 16)");
  keep_gemm_reductions_whole(device);  // as the batch-invariant engine runs cuBLAS: no split-K
  const auto bf16 = at::TensorOptions().dtype(at::kBFloat16).device(device);
  const auto x = at::randn({rows, in}, bf16), w = (at::randn({out, in}, bf16.dtype(at::kFloat)) * 0.02).to(at::kBFloat16);
  // The same rows first among a cold state's kColdRows, as the engine's forms are checked (few_rows_gemm.cpp).
  auto cold_rows = at::zeros({kColdRows, in}, bf16);
  cold_rows.narrow(0, 0, rows).copy_(x);
  const auto cold = at::linear(cold_rows, w).narrow(0, 0, rows).contiguous();
  // The engine's form itself (few_rows_gemm.h): the launch, its checks and the copy of an unaligned x included.
  const auto own = [&] { return gemm_in_form(GemmForm::OwnMma, x, w, at::Tensor()); };
  const auto y = own();
  OwnGemmTrial t{rows, out, in};
  t.own_same_bits = same_bits(y, cold);
  t.own_max_abs_diff = (y.to(at::kFloat) - cold.to(at::kFloat)).abs().max().item<double>();
  t.linear_same_bits = same_bits(at::linear(x, w), cold);
  t.own_us = cuda_call_us([&] { own(); }, device);
  t.linear_us = cuda_call_us([&] { at::linear(x, w); }, device);
  return t;
#else
  (void)rows, (void)out, (void)in, (void)device;
  throw EngineError(code::kBadRequest, "tq_cli gemm-rows needs a CUDA build (this one has none)");
#endif
}

}  // namespace tq
