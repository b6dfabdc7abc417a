// One block per question, one warp per label at a time: each lane runs
// lane_partial over its strided share of the label's lm_head row (32 lanes
// read 32 consecutive elements: coalesced), the warp combines the partial sums
// with shuffles in the fixed tree of combine_lanes, and one thread turns the
// question's logits into log-probabilities. Same functions, same order as the
// CPU readout: a question's logits do not depend on its batch.
#include "kernels/cuda/label_readout.h"
#include "kernels/math/label_readout_math.h"

namespace tq::cuda {
namespace {

constexpr int kWarps = 8;

template <typename W>
__global__ void label_readout_kernel(LabelReadoutArgs a) {
  // a.hidden: [questions, hidden_size]; a.lm_head: [vocab, hidden_size]
  __shared__ float logits[readout::kMaxLabels];
  const int q = blockIdx.x;
  const int lane = threadIdx.x % readout::kLanes, warp = threadIdx.x / readout::kLanes;
  const int first = a.offsets[q], n = a.offsets[q + 1] - first;
  const float* hidden = a.hidden + static_cast<int64_t>(q) * a.hidden_size;
  const W* head = static_cast<const W*>(a.lm_head);
  for (int label = warp; label < n; label += kWarps) {
    const W* row = head + a.label_ids[first + label] * a.hidden_size;
    float partial = readout::lane_partial(row, hidden, a.hidden_size, lane);
    // combine_lanes, as shuffles: lane l adds lane l + offset.
    for (int offset = readout::kLanes / 2; offset > 0; offset /= 2)
      partial = readout::add(partial, __shfl_down_sync(0xffffffffu, partial, offset));
    if (lane == 0) logits[label] = readout::soft_cap(partial, a.softcap);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 0; i < n; ++i) a.logits[first + i] = logits[i];
    readout::log_probs(logits, n, a.temperatures[q], a.log_probs + first);
  }
}

}  // namespace

cudaError_t launch_label_readout(const LabelReadoutArgs& args, cudaStream_t stream) {
  if (args.questions == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(args.questions)), block(kWarps * readout::kLanes);
  if (args.lm_head_bf16) label_readout_kernel<uint16_t><<<grid, block, 0, stream>>>(args);
  else label_readout_kernel<float><<<grid, block, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace tq::cuda
