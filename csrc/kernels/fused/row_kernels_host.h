// The fused row kernels' host forms: the same arguments and the same
// per-row functions (kernels/math/row_kernels_math.h) as the CUDA launches
// (kernels/cuda/row_kernels.h), run over the rows with the CPU's threads. With
// them the fused forward runs whole on the CPU, where CI checks it.
#pragma once
#include "kernels/math/row_kernel_args.h"

namespace tq::rows {

void add_rms_norm_host(const AddRmsNormArgs& args);
void qk_norm_rope_host(const QkNormRopeArgs& args);
void gated_mul_host(const GatedMulArgs& args);

}  // namespace tq::rows
