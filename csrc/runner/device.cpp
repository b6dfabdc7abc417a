#include "runner/device.h"

#include <torch/version.h>

#include "common/errors.h"

#if TQ_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
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
    const auto digits = name == "cuda" ? std::string("0") : name.substr(5);
    if (digits.empty() || digits.size() > 4 || digits.find_first_not_of("0123456789") != std::string::npos)
      throw EngineError(code::kBadRequest, "device must be cpu or cuda (or cuda:N), got " + name);
    const int64_t index = std::stoll(digits);
    if (index >= c10::cuda::device_count())
      throw EngineError(code::kBadRequest, "device " + name + ": there are " + std::to_string(c10::cuda::device_count()) + " CUDA devices");
    return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
#endif
  }
  throw EngineError(code::kBadRequest, "device must be cpu or cuda (or cuda:N), got " + name);
}

void use_device(const at::Device& device) {
#if TQ_CUDA
  if (device.is_cuda()) c10::cuda::set_device(device.index());
#else
  (void)device;
#endif
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

#if TQ_CUDA
namespace {
cudaEvent_t recorded_event() {
  cudaEvent_t event = nullptr;
  C10_CUDA_CHECK(cudaEventCreate(&event));
  C10_CUDA_CHECK(cudaEventRecord(event, c10::cuda::getCurrentCUDAStream()));
  return event;
}
}  // namespace
#endif

// The start is marked as a step's end is.
StepTimer::StepTimer(const at::Device& device) : cuda_(device.is_cuda()) { step_launched(); }

StepTimer::~StepTimer() {
#if TQ_CUDA
  for (void* event : events_) cudaEventDestroy(static_cast<cudaEvent_t>(event));
#endif
}

void StepTimer::step_launched() {
#if TQ_CUDA
  if (cuda_) {
    events_.push_back(recorded_event());
    return;
  }
#endif
  clock_.push_back(std::chrono::steady_clock::now());
}

DeviceMark::DeviceMark(const at::Device& device) {
#if TQ_CUDA
  if (device.is_cuda()) event_ = recorded_event();
#else
  (void)device;
#endif
}

DeviceMark::~DeviceMark() {
#if TQ_CUDA
  if (event_) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
#endif
}

void DeviceMark::wait() const {
#if TQ_CUDA
  if (event_) C10_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
#endif
}

at::Tensor queue_copy_to_host(const at::Tensor& t) {
  if (t.is_cpu()) return t;
  auto host = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true));
  host.copy_(t, /*non_blocking=*/true);
  return host;
}

bool DeviceMark::reached() const {
#if TQ_CUDA
  if (event_) {
    const auto status = cudaEventQuery(static_cast<cudaEvent_t>(event_));
    if (status == cudaErrorNotReady) return false;
    C10_CUDA_CHECK(status);
  }
#endif
  return true;
}

std::vector<double> StepTimer::finish() {
  std::vector<double> ms;
#if TQ_CUDA
  if (cuda_) {
    C10_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(events_.back())));
    for (size_t i = 1; i < events_.size(); ++i) {
      float elapsed = 0;
      C10_CUDA_CHECK(cudaEventElapsedTime(&elapsed, static_cast<cudaEvent_t>(events_[i - 1]), static_cast<cudaEvent_t>(events_[i])));
      ms.push_back(elapsed);
    }
    return ms;
  }
#endif
  for (size_t i = 1; i < clock_.size(); ++i) ms.push_back(std::chrono::duration<double, std::milli>(clock_[i] - clock_[i - 1]).count());
  return ms;
}

}  // namespace tq
