#include "kernels/cpu/gemm/int8_linear.h"

#include <ATen/Parallel.h>

#include <vector>

#include "kernels/cpu/gemm/weight_memory.h"

namespace tq {

Int8Linear::Int8Linear(const at::Tensor& weight, const at::Tensor& bias, int8_gemm::Kernel kernel)
    : kernel_(kernel), in_(weight.size(1)), out_(weight.size(0)) {
  TORCH_CHECK(in_ <= int8_gemm::kMaxK, "int8 weights: K = ", in_, " is over ", int8_gemm::kMaxK, " (the int32 sums' bound)");
  const int64_t padded = int8_gemm::panels(out_) * int8_gemm::kWidth;
  panels_ = weight_buffer(padded * int8_gemm::steps(in_) * int8_gemm::kDepth).view(at::kChar);
  offset_ = at::zeros({padded}, at::kInt);
  w_scale_ = at::zeros({padded}, at::kFloat);
  // One fp32 copy of this matrix at a time, freed when packed.
  const auto w = weight.to(at::kFloat).contiguous();
  at::parallel_for(0, out_, 64, [&](int64_t a, int64_t b) {
    int8_gemm::pack(w.data_ptr<float>(), in_, a, b, panels_.data_ptr<int8_t>(), offset_.data_ptr<int32_t>(), w_scale_.data_ptr<float>());
  });
  if (bias.defined()) {
    bias_ = at::zeros({padded}, at::kFloat);
    bias_.slice(0, 0, out_).copy_(bias.to(at::kFloat).reshape({out_}));
  }
}

void Int8Linear::run(const at::Tensor& x, at::Tensor& out, bool accumulate) const {
  TORCH_CHECK(x.dim() == 2 && x.size(1) == in_ && (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16), "Int8Linear: input ",
              x.sizes(), " ", x.scalar_type(), " for weights [", out_, ", ", in_, "]");
  const int64_t m = x.size(0);
  if (m == 0) return;
  const auto input = x.contiguous();
  const int64_t width = int8_gemm::steps(in_) * int8_gemm::kDepth;
  // The engine thread's buffers, grown to the largest step and kept.
  thread_local std::vector<uint8_t> rows;
  thread_local std::vector<float> scales;
  rows.resize(static_cast<size_t>(m * width));
  scales.resize(static_cast<size_t>(m));
  const bool bf16 = input.scalar_type() == at::kBFloat16;
  const auto* data = static_cast<const char*>(input.data_ptr());
  const int64_t item = input.element_size();
  // Pointers, not the names: in the workers a thread_local name is their own (empty) buffer.
  uint8_t* const quantized = rows.data();
  float* const row_scales = scales.data();
  at::parallel_for(0, m, 16, [&](int64_t a, int64_t b) {
    kernel_.quantize(data + a * in_ * item, bf16, b - a, in_, in_, quantized + a * width, row_scales + a);
  });
  int8_gemm::Int8GemmOperands job{quantized, width, row_scales, panels_.data_ptr<int8_t>(), offset_.data_ptr<int32_t>(), w_scale_.data_ptr<float>(),
                     bias_.defined() ? bias_.data_ptr<float>() : nullptr, out.data_ptr(), out_, m, in_, out_, accumulate,
                     out.scalar_type() == at::kBFloat16};
  if (kernel_.tiled_x) {
    thread_local std::vector<uint8_t> tiles;
    tiles.resize(static_cast<size_t>(int8_gemm::tiled_bytes(m, in_)));
    uint8_t* const tiled = tiles.data();
    at::parallel_for(0, int8_gemm::tile_blocks(m), 1, [&](int64_t a, int64_t b) { int8_gemm::arrange_tiles(job, a, b, tiled); });
    job.x_tiles = tiled;
  }
  // Columns are split between threads, as in the bf16 GEMM.
  at::parallel_for(0, int8_gemm::panels(out_), 1, [&](int64_t a, int64_t b) { kernel_.panels(job, a, b); });
}

at::Tensor Int8Linear::operator()(const at::Tensor& x, at::ScalarType out_dtype) const {
  TORCH_CHECK(out_dtype == at::kFloat || out_dtype == at::kBFloat16, "Int8Linear: fp32 or bf16 output, got ", out_dtype);
  auto out = at::empty({x.size(0), out_}, x.options().dtype(out_dtype));
  run(x, out, /*accumulate=*/false);
  return out;
}

void Int8Linear::add_into(const at::Tensor& x, at::Tensor& residual) const {
  TORCH_CHECK(residual.scalar_type() == at::kFloat && residual.is_contiguous() && residual.size(0) == x.size(0) && residual.size(1) == out_,
              "Int8Linear::add_into: residual ", residual.sizes());
  run(x, residual, /*accumulate=*/true);
}

}  // namespace tq
