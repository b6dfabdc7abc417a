// Memory for packed weights, which live as long as the model and are streamed by every GEMM.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>

namespace tq {

// `bytes` zeros as a kByte tensor. On Linux, a buffer of a huge page or more is an anonymous mapping whose start is 2
// MiB-aligned and which is advised for transparent huge pages (MADV_HUGEPAGE), so that a load faults it in 2 MiB at a
// time as it packs the weights, not 4 KiB (bench/README.md, "Measurements behind the CPU kernels"). Else at::zeros'.
at::Tensor weight_buffer(int64_t bytes);

}  // namespace tq
