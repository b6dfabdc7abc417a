// The device an engine runs on: parsing `--device`, what /health reports
// about it, and waiting for it (CUDA work is asynchronous: a step's time is
// only known once the device has finished it).
#pragma once
#include <ATen/ATen.h>

#include <string>

namespace tq {

struct DeviceInfo {
  std::string mode;          // "cpu" | "cuda"
  std::string name;          // the GPU's name, or "cpu"
  int64_t total_bytes = 0;   // GPU memory (0 on the CPU)
  int64_t free_bytes = 0;    // free on the whole GPU, as the driver reports it
  std::string capability;    // e.g. "9.0" (CUDA)
  std::string cuda_version;  // the CUDA runtime libtorch was built with, or ""
  std::string torch_version;
};

// "cpu", "cuda" or "cuda:N". Throws BAD_REQUEST for anything else, and when this
// build or machine has no CUDA.
at::Device parse_device(const std::string& name);
DeviceInfo describe_device(const at::Device& device);
void synchronize(const at::Device& device);
// The device memory free now, after handing back what torch's caching allocator holds unused
// (a CUDA device; 0 on the CPU).
int64_t free_device_bytes(const at::Device& device);

}  // namespace tq
