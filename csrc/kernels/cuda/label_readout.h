// The readout on the GPU, in one launch for a whole batch of questions (one
// block per question). Torch-free (raw pointers and a stream) so that nvcc
// compiles it alone: CI builds it for sm_90 without a GPU or a CUDA libtorch.
// The arithmetic is kernels/math/label_readout_math.h, shared with the CPU readout.
#pragma once
#include <cuda_runtime_api.h>

#include "kernels/math/label_readout_args.h"

namespace tq::cuda {

cudaError_t launch_label_readout(const LabelReadoutArgs& args, cudaStream_t stream);

}  // namespace tq::cuda
