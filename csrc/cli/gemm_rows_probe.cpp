#include "cli/gemm_rows_probe.h"

#include <string>

#include "common/errors.h"
#include "kernels/aten/aten_layer_kernels.h"
#include "kernels/aten/few_rows_gemm.h"

#if TQ_CUDA
#include <c10/cuda/CUDAStream.h>

#include "kernels/cuda/few_rows_mma.h"
#endif

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
  auto y = at::empty({rows, out}, bf16);
  const few_rows_mma::Args args{static_cast<const uint16_t*>(x.data_ptr()), static_cast<const uint16_t*>(w.data_ptr()),
                                static_cast<uint16_t*>(y.data_ptr()), shape.rows, shape.k, shape.n};
  const auto stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  const auto own = [&] {
    if (const cudaError_t e = cuda::launch_few_rows_mma(args, stream); e != cudaSuccess)
      throw EngineError(code::kInternal, std::string("the few-row GEMM's launch: ") + cudaGetErrorString(e));
  };
  own();
  OwnGemmTrial t{rows, out, in};
  t.own_same_bits = same_bits(y, cold);
  t.own_max_abs_diff = (y.to(at::kFloat) - cold.to(at::kFloat)).abs().max().item<double>();
  t.linear_same_bits = same_bits(at::linear(x, w), cold);
  t.own_us = cuda_call_us(own, device);
  t.linear_us = cuda_call_us([&] { at::linear(x, w); }, device);
  return t;
#else
  (void)rows, (void)out, (void)in, (void)device;
  throw EngineError(code::kBadRequest, "tq_cli gemm-rows needs a CUDA build (this one has none)");
#endif
}

}  // namespace tq
