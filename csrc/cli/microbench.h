// Measurements the benchmark reports next to the engine's own speed: the
// machine's GEMM rate in the engine's dtype, and the readout's cost against a
// full vocabulary projection on the loaded lm_head.
#pragma once
#include <ATen/ATen.h>

#include "kernels/cpu/isa.h"

namespace tq {

struct GemmRate {
  double gflops = 0;
  double ms = 0;  // fastest of the iterations
};
// invariant: on the batch-invariant GEMM at level isa, else oneDNN's (as the engine's linear layers run);
// int8: on the int8 GEMM instead (int8_linear.h; its rate counts a multiply-add as 2 operations).
// native: bf16 on AMX tiles (the native arithmetic, cpu_layer_kernels.h).
GemmRate measure_gemm(int64_t m, int64_t k, int64_t n, at::ScalarType dtype, int iterations, bool invariant, Isa isa, bool int8 = false,
                      bool native = false);

struct ReadoutTiming {
  double readout_ms = 0;  // median, the label readout of one question with `labels` labels
  double full_ms = 0;     // median, hidden @ lm_head^T
};
ReadoutTiming measure_readout(const at::Tensor& lm_head, int64_t labels, int iterations);

}  // namespace tq
