#include "cli/gemm_rows_probe.h"

#include <string>

#include "common/errors.h"
#include "kernels/aten/aten_layer_kernels.h"
#include "kernels/aten/few_rows_gemm.h"
#include "kernels/math/few_rows_mma_math.h"

namespace tq {

OwnGemmTrial probe_own_gemm(int64_t rows, int64_t out, int64_t in, at::Device device, bool timed) {
#if TQ_CUDA
  if (!device.is_cuda()) throw EngineError(code::kBadRequest, "tq_cli gemm-rows runs on a CUDA device (--device cuda)");
  const auto bf16 = at::TensorOptions().dtype(at::kBFloat16).device(device);
  const auto x = at::randn({rows, in}, bf16), w = (at::randn({out, in}, bf16.dtype(at::kFloat)) * 0.02).to(at::kBFloat16);
  if (!gemm_form_applies(kOwnForms[0], x, w))  // the first tiling's blocks are the widest: a shape it takes, they all take
    throw EngineError(code::kBadRequest, "tq_cli gemm-rows: " + std::to_string(rows) + " rows of " + std::to_string(in) + " to " + std::to_string(out) +
                                             " is not a shape the kernel takes (1 to " + std::to_string(few_rows_mma::kMaxRows) +
                                             " rows, in a multiple of 64, out of 16)");
  keep_gemm_reductions_whole(device);  // as the batch-invariant engine runs cuBLAS: no split-K
  // The same rows first among a cold state's kColdRows, as the engine's forms are checked (few_rows_gemm.cpp).
  auto cold_rows = at::zeros({kColdRows, in}, bf16);
  cold_rows.narrow(0, 0, rows).copy_(x);
  const auto cold = at::linear(cold_rows, w).narrow(0, 0, rows).contiguous();
  OwnGemmTrial t{rows, out, in};
  t.linear_same_bits = same_bits(at::linear(x, w), cold);
  if (timed) t.linear_us = cuda_call_us([&] { at::linear(x, w); }, device);
  // Each tiling as the engine's form runs it (few_rows_gemm.h): the launch, its checks and the copy of an unaligned x.
  for (const auto form : kOwnForms) {
    if (!gemm_form_applies(form, x, w)) continue;
    const auto own = [&] { return gemm_in_form(form, x, w, at::Tensor()); };
    const auto y = own();
    t.own.push_back({gemm_form_name(form), same_bits(y, cold), (y.to(at::kFloat) - cold.to(at::kFloat)).abs().max().item<double>(),
                     timed ? cuda_call_us([&] { own(); }, device) : 0.0});
  }
  return t;
#else
  (void)rows, (void)out, (void)in, (void)device, (void)timed;
  throw EngineError(code::kBadRequest, "tq_cli gemm-rows needs a CUDA build (this one has none)");
#endif
}

}  // namespace tq
