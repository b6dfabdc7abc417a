// A step's cascade arrays (every tier's index arrays and the merge's) are
// made on the host, once per step, and read at every layer. Moved one by one
// they were ~8 synchronous host-to-device copies a step; the step moves them
// with its own in one (runner/step_inputs.h), as views of one device buffer
// that a CUDA graph's later steps refill in one copy.
#pragma once
#include <ATen/ATen.h>

#include <vector>

#include "kernels/cascade/attention_merge.h"
#include "kernels/cascade/partial_attention.h"
#include "kernels/host_upload.h"

namespace tq {

// Every defined array of the step's tiers and merge, for upload_together.
std::vector<at::Tensor*> step_arrays(std::vector<DeviceTier>& tiers, DeviceMerge& merge);

}  // namespace tq
