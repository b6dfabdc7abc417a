// A step's cascade arrays (every tier's index arrays and the merge's) are
// made on the host, once per step, and read at every layer. Moved one by one
// they were ~8 synchronous host-to-device copies a step; here they go in one:
// packed into one staging buffer (pinned on CUDA, each array at an 8-byte
// aligned offset), copied once without blocking, and each array replaced by a
// view of its part of the device buffer. The views index like the arrays they
// replace, and later steps of a CUDA graph refill them in place.
#pragma once
#include <ATen/ATen.h>

#include <vector>

#include "kernels/cascade/attention_merge.h"
#include "kernels/cascade/partial_attention.h"

namespace tq {

// Every defined array of the step's tiers and merge, for upload_together.
std::vector<at::Tensor*> step_arrays(std::vector<DeviceTier>& tiers, DeviceMerge& merge);

// Moves host tensors to `device` in one copy (nothing to do for the CPU).
void upload_together(const std::vector<at::Tensor*>& tensors, at::Device device);

// The packing itself, on any device (the CPU checks it: test/native/cascade_check.cpp): the tensors' bytes
// in one buffer on `device`, each tensor replaced by its view. Returns the buffer.
at::Tensor pack_into_one(const std::vector<at::Tensor*>& tensors, at::Device device);

}  // namespace tq
