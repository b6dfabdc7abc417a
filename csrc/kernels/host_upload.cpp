#include "kernels/host_upload.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace tq {
namespace {

constexpr int64_t kAlign = 8;  // the widest element packed (int64): every view starts aligned for its type

int64_t aligned(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Where each tensor's bytes start in the packed buffer; the last entry is the buffer's size.
std::vector<int64_t> packed_offsets(const std::vector<const at::Tensor*>& tensors) {
  std::vector<int64_t> offsets{0};
  for (const at::Tensor* t : tensors) {
    TORCH_CHECK(t->device().is_cpu(), "packing arrays for the device: a host tensor, not one on ", t->device());
    offsets.push_back(aligned(offsets.back() + static_cast<int64_t>(t->nbytes())));
  }
  return offsets;
}

// The tensors' bytes written at their offsets from `to`, in host memory.
void write_packed(const std::vector<const at::Tensor*>& tensors, const std::vector<int64_t>& offsets, uint8_t* to) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto t = tensors[i]->contiguous();
    if (t.nbytes() > 0) std::memcpy(to + offsets[i], t.data_ptr(), t.nbytes());
  }
}

// The tensors packed into a new host buffer (pinned where it is copied to a GPU: the copy then does not block, and
// the caching host allocator keeps the buffer until the copy is done).
at::Tensor staged(const std::vector<const at::Tensor*>& tensors, const std::vector<int64_t>& offsets, bool pinned) {
  auto host = at::empty({offsets.back()}, at::TensorOptions().dtype(at::kByte).pinned_memory(pinned));
  write_packed(tensors, offsets, host.data_ptr<uint8_t>());
  return host;
}

}  // namespace

at::Tensor pack_into_one(const std::vector<at::Tensor*>& tensors, at::Device device) {
  const std::vector<const at::Tensor*> from(tensors.begin(), tensors.end());
  const auto offsets = packed_offsets(from);
  const auto host = staged(from, offsets, device.is_cuda());
  auto buffer = device.is_cpu() ? host : host.to(device, /*non_blocking=*/true);
  for (size_t i = 0; i < tensors.size(); ++i) {
    at::Tensor& t = *tensors[i];
    t = buffer.narrow(0, offsets[i], static_cast<int64_t>(t.nbytes())).view(t.scalar_type()).view(t.sizes());
  }
  return buffer;
}

void copy_into_packed(const std::vector<const at::Tensor*>& tensors, const at::Tensor& buffer) {
  const auto offsets = packed_offsets(tensors);
  if (offsets.back() != buffer.numel())
    throw std::logic_error("copy_into_packed: " + std::to_string(offsets.back()) + " bytes of arrays for a buffer of " + std::to_string(buffer.numel()));
  if (buffer.is_cpu()) return write_packed(tensors, offsets, buffer.data_ptr<uint8_t>());
  buffer.copy_(staged(tensors, offsets, buffer.is_cuda()), /*non_blocking=*/true);
}

void upload_together(const std::vector<at::Tensor*>& tensors, at::Device device) {
  if (!device.is_cpu()) pack_into_one(tensors, device);
}

at::Tensor index_on(at::Device device, const std::vector<int64_t>& index) {
  auto t = at::tensor(at::ArrayRef<int64_t>(index), at::TensorOptions().dtype(at::kLong));
  upload_together({&t}, device);
  return t;
}

}  // namespace tq
