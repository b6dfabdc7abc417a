// The gated MLP's elementwise part, act(gate) * up (SwiGLU's silu, or Gemma's
// gelu_pytorch_tanh), written in place into gate, with the vectorized exp of
// vec_exp.h (runtime dispatch to AVX-512/AVX2): several times faster than
// this libtorch's silu, which was a tenth of a bf16 prefill.
#pragma once
#include <ATen/ATen.h>

#include "kernels/layer_kernels.h"

namespace tq {

// gate, up: same shape, contiguous, fp32 or bf16. Returns gate.
at::Tensor& gated_mul_(at::Tensor& gate, const at::Tensor& up, GateActivation act);

// x * sigmoid(1.702 x) as x / (1 + exp(-1.702 x)) (QuickGELU, Qwen2-VL's vision MLP), in place. x: contiguous fp32.
at::Tensor& quick_gelu_(at::Tensor& x);

}  // namespace tq
