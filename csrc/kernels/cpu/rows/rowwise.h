// Row-wise kernels of the transformer: RMSNorm and RoPE, one pass per row,
// written straight in the output dtype, with one arithmetic on every CPU
// (row_math.*, docs/arithmetic.md). As ATen's chains of small ops (RMSNorm:
// pow, mean, rsqrt, two muls and a cast; RoPE: cat, two muls, an add and a
// cast) each op would be an OpenMP region and a pass over memory, whose
// wake-ups cost as much as the arithmetic on a few cores.
#pragma once
#include <ATen/ATen.h>

namespace tq {

// x / sqrt(mean(x^2) + eps) * weight over the last dimension. x: fp32, 2-D or
// 3-D with a contiguous last dimension (views of a wider matrix are fine);
// weight: fp32 [last]. Returns a contiguous tensor of x's shape in out_dtype.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, at::ScalarType out_dtype);

// (x - mean) / sqrt(var + eps) * weight + bias over the last dimension (the mean
// and the variance summed as rms_norm sums its squares). x: fp32 [rows, n];
// weight, bias: fp32 [n]. Returns a contiguous fp32 tensor of x's shape.
at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps);

// Rotate-half RoPE. x: fp32 [T, heads, dim] with a contiguous last dimension;
// cos, sin: fp32 [max_positions, dim]; positions: int64 [T]. Returns a
// contiguous [T, heads, dim] tensor in out_dtype.
at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& positions, at::ScalarType out_dtype);

}  // namespace tq
