// One block per question, one warp per label at a time: each lane runs
// lane_partial over its strided share of the label's lm_head row (32 lanes
// read 32 consecutive elements: coalesced), the warp combines the partial sums
// with shuffles in the fixed tree of combine_lanes, and one thread turns the
// question's logits into log-probabilities. Same functions, same order as the
// CPU readout: a question's logits do not depend on its batch.
#include "kernels/cuda/label_readout.h"
#include "kernels/cuda/label_readout.cuh"

namespace tq::cuda {

cudaError_t launch_label_readout(const LabelReadoutArgs& args, cudaStream_t stream) {
  if (args.questions == 0) return cudaSuccess;
  const dim3 grid = label_readout_grid(args), block = label_readout_block();
  if (args.lm_head_bf16) label_readout_kernel<uint16_t><<<grid, block, 0, stream>>>(args);
  else label_readout_kernel<float><<<grid, block, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace tq::cuda
