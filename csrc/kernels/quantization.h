// How the linear layers' weights are stored and multiplied (--quantization):
//   none: in the compute dtype (bf16 or fp32);
//   int8: int8 per output channel, activations int8 per row, int32 sums (the
//         engine's CPU kernels: kernels/cpu/gemm/int8_linear.h);
//   fp8:  e4m3 per output channel, activations e4m3 per row, fp32 sums on the
//         tensor cores (CUDA, compute capability 8.9+: kernels/aten/fp8_linear.h).
// The embeddings, norms and the lm_head rows the readout reads stay in the
// compute dtype: they are small, and the readout is what the answer is.
#pragma once
#include "common/choices.h"

namespace tq {

enum class Quantization { None, Int8, Fp8 };

template <>
struct ChoiceTable<Quantization> {
  static constexpr const char* option = "quantization";
  static constexpr NamedValue<Quantization> values[] = {{Quantization::None, "none"}, {Quantization::Int8, "int8"}, {Quantization::Fp8, "fp8"}};
};

inline const char* quantization_name(Quantization q) { return choice_name(q); }

// What /health reports as quantized_kernels for fp8 (int8's depends on the CPU: cpu_layer_kernels.h).
constexpr const char* kFp8KernelName = "cuda-mma-e4m3";

}  // namespace tq
