// The readout kernel's body and launch shape (label_readout.cu launches it; its head says how it works), apart from the
// launch so that a host compiler builds it too: the CPU checks run this body through host_emulation.h
// (test/native/cuda_bodies_check.cpp). One translation unit of a program includes this.
#pragma once
#include <cstdint>

#include "kernels/cuda/host_emulation.h"
#include "kernels/math/label_readout_args.h"
#include "kernels/math/label_readout_math.h"

namespace tq::cuda {
namespace {

constexpr int kReadoutWarps = 8;

template <typename W>
__global__ void label_readout_kernel(LabelReadoutArgs a) {
  // a.hidden: [questions, hidden_size]; a.lm_head: [vocab, hidden_size]
  __shared__ float logits[readout::kMaxLabels];
  block_shared(logits);
  const int q = blockIdx.x;
  const int lane = threadIdx.x % readout::kLanes, warp = threadIdx.x / readout::kLanes;
  const int first = a.offsets[q], n = a.offsets[q + 1] - first;
  const float* hidden = a.hidden + static_cast<int64_t>(q) * a.hidden_size;
  const W* head = static_cast<const W*>(a.lm_head);
  for (int label = warp; label < n; label += kReadoutWarps) {
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

// The launch's grid and blocks: a block per question, kReadoutWarps warps over its labels.
dim3 label_readout_grid(const LabelReadoutArgs& a) { return dim3(static_cast<unsigned>(a.questions)); }
dim3 label_readout_block() { return dim3(kReadoutWarps * readout::kLanes); }

}  // namespace
}  // namespace tq::cuda
