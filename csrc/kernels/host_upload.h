// Host arrays moved to the device without blocking. A tensor's plain `.to(device)` from pageable memory
// waits for the device's stream to drain first: the host then cannot prepare the next step, or the next
// call, while the device runs this one. Here the arrays are packed into one staging buffer (pinned on
// CUDA, each array at an 8-byte aligned offset), copied once without blocking, and each array replaced
// by a view of its part of the device buffer. The views index like the arrays they replace.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace tq {

// Moves host tensors to `device` in one copy (nothing to do for the CPU).
void upload_together(const std::vector<at::Tensor*>& tensors, at::Device device);

// The packing itself, on any device (the CPU checks it: test/native/cascade_check.cpp): the tensors' bytes
// in one buffer on `device`, each tensor replaced by its view. Returns the buffer.
at::Tensor pack_into_one(const std::vector<at::Tensor*>& tensors, at::Device device);

// Host tensors copied into `buffer`, which pack_into_one made from tensors of the same sizes and types in the
// same order, in one copy that does not block (a CUDA graph's buffers refilled for a later step). Throws
// std::logic_error where the tensors would not fill the buffer exactly as its own did.
void copy_into_packed(const std::vector<const at::Tensor*>& tensors, const at::Tensor& buffer);

// An index list as an int64 tensor on `device`, copied there without blocking.
at::Tensor index_on(at::Device device, const std::vector<int64_t>& index);

}  // namespace tq
