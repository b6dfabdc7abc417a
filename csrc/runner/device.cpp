#include "runner/device.h"

#include <torch/version.h>

#include "common/errors.h"

#if TQ_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace tq {

at::Device parse_device(const std::string& name) {
  if (name == "cpu") return at::kCPU;
  if (name == "cuda" || name.rfind("cuda:", 0) == 0) {
#if !TQ_CUDA
    throw EngineError(code::kBadRequest, "device " + name + ": this engine was built without CUDA (docs/gpu.md)");
#else
    if (!at::hasCUDA() || c10::cuda::device_count() == 0) throw EngineError(code::kBadRequest, "device " + name + ": no CUDA device is visible");
    const int64_t index = name == "cuda" ? 0 : std::stoll(name.substr(5));
    if (index < 0 || index >= c10::cuda::device_count())
      throw EngineError(code::kBadRequest, "device " + name + ": there are " + std::to_string(c10::cuda::device_count()) + " CUDA devices");
    return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
#endif
  }
  throw EngineError(code::kBadRequest, "device must be cpu or cuda (or cuda:N), got " + name);
}

DeviceInfo describe_device(const at::Device& device) {
  DeviceInfo d;
  d.torch_version = TORCH_VERSION;
  d.mode = device.is_cuda() ? "cuda" : "cpu";
  d.name = "cpu";
#if TQ_CUDA
  d.cuda_version = std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10);
  if (device.is_cuda()) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, device.index()) == cudaSuccess) {
      d.name = p.name;
      d.capability = std::to_string(p.major) + "." + std::to_string(p.minor);
    }
    size_t free = 0, total = 0;
    c10::cuda::CUDAGuard guard(device.index());
    if (cudaMemGetInfo(&free, &total) == cudaSuccess) {
      d.free_bytes = static_cast<int64_t>(free);
      d.total_bytes = static_cast<int64_t>(total);
    }
  }
#endif
  return d;
}

void synchronize(const at::Device& device) {
#if TQ_CUDA
  if (device.is_cuda()) c10::cuda::device_synchronize();
#else
  (void)device;
#endif
}

int64_t free_device_bytes(const at::Device& device) {
#if TQ_CUDA
  if (device.is_cuda()) {
    c10::cuda::CUDAGuard guard(device.index());
    c10::cuda::device_synchronize();
    c10::cuda::CUDACachingAllocator::emptyCache();
  }
#endif
  return describe_device(device).free_bytes;
}

}  // namespace tq
