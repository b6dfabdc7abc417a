// Softmax over the last dimension of a contiguous fp32 tensor, in place, with
// the vectorized exp of vec_exp.h: this libtorch's softmax runs a scalar exp
// and was about a quarter of a bf16 prefill. Entries at -inf (masked keys)
// come out exactly 0.
#pragma once
#include <ATen/ATen.h>

namespace tq {

at::Tensor& softmax_lastdim_(at::Tensor& x);

}  // namespace tq
