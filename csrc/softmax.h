// Softmax over the last dimension of a contiguous fp32 tensor of scores, with
// a vectorized exp (vec_exp.h): this libtorch's softmax runs a scalar exp and
// was about a quarter of a bf16 prefill. Entries at -inf (masked keys) come
// out exactly 0.
#pragma once
#include <ATen/ATen.h>

namespace tq {

// Overwrites `scores`; returns the probabilities in out_dtype (fp32: `scores`
// itself; bf16: written by the same pass, with no separate conversion).
at::Tensor softmax_lastdim(at::Tensor& scores, at::ScalarType out_dtype);

}  // namespace tq
