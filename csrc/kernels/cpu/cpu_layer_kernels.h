// The engine's own CPU kernels behind the transformer's LayerKernels: packed
// linear layers (the invariant GEMM, or oneDNN's), one-pass RMSNorm and RoPE,
// the vectorized SwiGLU, and chunked attention over a step's plan.
#pragma once
#include "kernels/cpu/isa.h"
#include "kernels/layer_kernels.h"
#include "kernels/quantization.h"

namespace tq {

// invariant: a row's result never depends on the other rows of the batch (invariant_gemm.h).
// isa: the highest level the kernels may use; for fp32 that is at most avx512 (the
// vdpbf16ps GEMM is bf16's), and name() says the level that runs.
// quantization: none, or int8 (int8_linear.h: on AMX tiles or AVX-512 VNNI where the CPU has them and
// isa is avx512 or above, else on AVX2 or the generic loop, the same bits); fp8 is CUDA's.
// native: the linear layers in bf16 on AMX tiles (gemm_amx_bf16.cpp), the native arithmetic: bits of
// their own (docs/arithmetic.md); invariant bf16 without quantization only.
std::unique_ptr<LayerKernels> cpu_layer_kernels(bool invariant, Isa isa, at::ScalarType dtype, Quantization quantization = Quantization::None,
                                                bool native = false);
// Whether the native arithmetic can run here (AMX-BF16, or the tiles' model under TQ_AMX_MODEL=1).
bool native_arithmetic_available();
// The int8 GEMM's path at this level: "amx-int8", "avx512-vnni", "avx2" or "generic".
const char* int8_kernel_name(Isa isa);

// What the CPU kernels keep between calls, process-wide, with its limits (for /health):
// attention's per-thread buffers (attention.h) and oneDNN's cached primitives (packed_linear.h).
struct CpuKernelMemory {
  int64_t attention_buffer_bytes = 0, attention_buffer_kept_bytes = 0;
  int64_t cached_primitives = 0, cached_primitives_max = 0;
};
CpuKernelMemory cpu_kernel_memory();

// Whether bf16 can run without batch invariance, on oneDNN's matmuls: they need AVX-512, and
// a build without oneDNN has none.
bool cpu_bf16_without_invariance();

}  // namespace tq
