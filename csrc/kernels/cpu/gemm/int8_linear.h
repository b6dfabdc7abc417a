// A linear layer with int8 weights (--quantization int8): quantized per output
// channel and packed once at load, the activations quantized per row at each
// call, on the int8 GEMM (int8_gemm.h). A row's result depends on that row
// alone, whatever the batch and on every path, so batch invariance holds as
// with the bf16 kernels. The weights take 1 byte each (bf16: 2).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>

#include "kernels/cpu/gemm/int8_gemm.h"
#include "kernels/layer_kernels.h"

namespace tq {

class Int8Linear : public Linear {
 public:
  // weight: [out, in] (bf16 or fp32); bias: [out] or undefined. kernel: the path it runs
  // on (int8_gemm.h: AVX-512 VNNI, AVX2 or generic, the same bits at different speeds).
  Int8Linear(const at::Tensor& weight, const at::Tensor& bias, int8_gemm::Kernel kernel);

  at::Tensor operator()(const at::Tensor& x, at::ScalarType out_dtype) const override;
  void add_into(const at::Tensor& x, at::Tensor& residual) const override;
  int64_t bytes() const override {
    return panels_.nbytes() + offset_.nbytes() + w_scale_.nbytes() + (bias_.defined() ? bias_.nbytes() : 0);
  }

 private:
  void run(const at::Tensor& x, at::Tensor& out, bool accumulate) const;

  int8_gemm::Kernel kernel_;
  int64_t in_ = 0, out_ = 0;
  at::Tensor panels_;  // int8, int8_gemm's panel layout
  at::Tensor offset_;  // int32, padded
  at::Tensor w_scale_, bias_;  // fp32, padded (bias_ undefined without a bias)
};

}  // namespace tq
