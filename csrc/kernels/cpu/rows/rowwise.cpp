#include "kernels/cpu/rows/rowwise.h"

#include <ATen/Parallel.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/rows/row_math.h"

namespace tq {
namespace {

// Rows of a 2-D or 3-D tensor with a contiguous last dimension.
struct Rows {
  const float* base;
  int64_t count, length, inner, outer_stride, inner_stride;
  explicit Rows(const at::Tensor& x) : base(x.data_ptr<float>()), length(x.size(-1)) {
    TORCH_CHECK(x.scalar_type() == at::kFloat && x.stride(-1) == 1 && (x.dim() == 2 || x.dim() == 3), "row kernel: fp32 rows, got ",
                x.sizes(), " strides ", x.strides());
    inner = x.dim() == 3 ? x.size(1) : 1;
    count = x.size(0) * inner;
    outer_stride = x.stride(0);
    inner_stride = x.dim() == 3 ? x.stride(1) : 0;
  }
  const float* operator[](int64_t r) const { return base + (r / inner) * outer_stride + (r % inner) * inner_stride; }
};

// Runs row(r, fp32 scratch) over all rows in parallel and stores each row in out's dtype.
template <typename RowFn>
void for_rows(const Rows& rows, at::Tensor& out, RowFn&& row) {
  const int64_t n = rows.length;
  const bool bf16 = out.scalar_type() == at::kBFloat16;
  TORCH_CHECK(bf16 || out.scalar_type() == at::kFloat, "row kernel: fp32 or bf16 output");
  char* base = static_cast<char*>(out.data_ptr());
  const int64_t item = out.element_size();
  at::parallel_for(0, rows.count, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n)), [&](int64_t a, int64_t b) {
    std::vector<float> scratch(n);
    for (int64_t r = a; r < b; ++r) {
      row(r, scratch.data());
      void* dst = base + r * n * item;
      if (bf16) store_scaled(scratch.data(), 1.0f, n, static_cast<uint16_t*>(dst));
      else store_scaled(scratch.data(), 1.0f, n, static_cast<float*>(dst));
    }
  });
}

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, at::ScalarType out_dtype) {
  const Rows rows(x);
  TORCH_CHECK(weight.scalar_type() == at::kFloat && weight.is_contiguous() && weight.numel() == rows.length, "rms_norm: weight ", weight.sizes());
  auto out = at::empty(x.sizes(), x.options().dtype(out_dtype));
  const float* w = weight.data_ptr<float>();
  for_rows(rows, out, [&](int64_t r, float* y) { rms_norm_row(rows[r], w, static_cast<float>(eps), rows.length, y); });
  return out;
}

at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps) {
  const auto rows_of = x.contiguous();
  const Rows rows(rows_of);
  for (const auto* t : {&weight, &bias})
    TORCH_CHECK(t->scalar_type() == at::kFloat && t->is_contiguous() && t->numel() == rows.length, "layer_norm: weight and bias of ", rows.length);
  auto out = at::empty(x.sizes(), x.options().dtype(at::kFloat));
  const float *w = weight.data_ptr<float>(), *b = bias.data_ptr<float>();
  for_rows(rows, out, [&](int64_t r, float* y) { layer_norm_row(rows[r], w, b, static_cast<float>(eps), rows.length, y); });
  return out;
}

at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& positions, at::ScalarType out_dtype) {
  const Rows rows(x);
  TORCH_CHECK(x.dim() == 3 && cos.is_contiguous() && sin.is_contiguous() && cos.size(1) == rows.length && positions.scalar_type() == at::kLong &&
                  positions.is_contiguous() && positions.numel() == x.size(0),
              "rope: x ", x.sizes(), " tables ", cos.sizes(), " positions ", positions.sizes());
  auto out = at::empty(x.sizes(), x.options().dtype(out_dtype));
  const int64_t* pos = positions.data_ptr<int64_t>();
  const float *c = cos.data_ptr<float>(), *s = sin.data_ptr<float>();
  for_rows(rows, out, [&](int64_t r, float* y) {
    const int64_t p = pos[r / rows.inner];
    rope_row(rows[r], c + p * rows.length, s + p * rows.length, rows.length, y);
  });
  return out;
}

}  // namespace tq
