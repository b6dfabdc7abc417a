// A test instrument: another device's layer kernels, run with every tensor
// they read, and the residual stream they add into, copied to `shift` bytes
// past a 64-byte boundary (the CPU allocator gives 64-byte aligned tensors
// only). A kernel whose result depends on where its operands lie (a compiler's
// loop peeled to an alignment, a vector path taken only for aligned rows)
// then answers with other bits than at shift 0, which the invariance tests
// compare on whatever CPU runs them (test/engine/random-batches.test.ts). Slower:
// every operand is copied; not for serving.
#pragma once
#include <memory>

#include "kernels/layer_kernels.h"

namespace tq {

// Throws std::invalid_argument unless shift is a multiple of 4 bytes in [0, 64].
void check_buffer_shift(int64_t shift);
// 0 returns `kernels` as they are.
std::unique_ptr<LayerKernels> shifted_layer_kernels(std::unique_ptr<LayerKernels> kernels, int64_t shift);

}  // namespace tq
