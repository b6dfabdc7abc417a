// The engine's own CPU kernels behind the transformer's LayerKernels: packed
// linear layers (the invariant GEMM, or oneDNN's), one-pass RMSNorm and RoPE,
// the vectorized SwiGLU, and chunked attention over a step's plan.
#pragma once
#include "kernels/cpu/isa.h"
#include "kernels/layer_kernels.h"

namespace tq {

// invariant: a row's result never depends on the other rows of the batch (invariant_gemm.h).
// isa: the highest level the kernels may use; for fp32 that is at most avx512 (the
// vdpbf16ps GEMM is bf16's), and name() says the level that runs.
std::unique_ptr<LayerKernels> cpu_layer_kernels(bool invariant, Isa isa, at::ScalarType dtype);

}  // namespace tq
