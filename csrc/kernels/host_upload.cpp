#include "kernels/host_upload.h"

#include <cstring>

namespace tq {
namespace {

constexpr int64_t kAlign = 8;  // the widest element packed (int64): every view starts aligned for its type

int64_t aligned(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

at::Tensor pack_into_one(const std::vector<at::Tensor*>& tensors, at::Device device) {
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (const at::Tensor* t : tensors) {
    TORCH_CHECK(t->device().is_cpu(), "pack_into_one: a host tensor, not one on ", t->device());
    offsets.push_back(total);
    total = aligned(total + static_cast<int64_t>(t->nbytes()));
  }
  auto host = at::empty({total}, at::TensorOptions().dtype(at::kByte).pinned_memory(device.is_cuda()));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto t = tensors[i]->contiguous();
    if (t.nbytes() > 0) std::memcpy(host.data_ptr<uint8_t>() + offsets[i], t.data_ptr(), t.nbytes());
  }
  // From pinned memory the copy does not block; the caching host allocator keeps the staging buffer until it is done.
  auto buffer = device.is_cpu() ? host : host.to(device, /*non_blocking=*/true);
  for (size_t i = 0; i < tensors.size(); ++i) {
    at::Tensor& t = *tensors[i];
    t = buffer.narrow(0, offsets[i], static_cast<int64_t>(t.nbytes())).view(t.scalar_type()).view(t.sizes());
  }
  return buffer;
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
