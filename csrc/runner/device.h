// The device an engine runs on: parsing `--device`, what /health reports
// about it, and waiting for it (CUDA work is asynchronous: a step's time is
// only known once the device has finished it).
#pragma once
#include <ATen/ATen.h>

#include <chrono>
#include <string>
#include <vector>

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
// Makes `device` the calling thread's current CUDA device (nothing on the CPU). CUDA keeps one per thread, and it is
// device 0 until set: our kernels go into the engine's device's stream, and a launch into a stream of another device
// than the current one fails; the graphs' capture and replay and the device-wide waits also act on the current one.
// An engine's thread calls it as it opens, so `--device cuda:1` runs on device 1 throughout.
void use_device(const at::Device& device);
DeviceInfo describe_device(const at::Device& device);
void synchronize(const at::Device& device);
// Times a call's steps without waiting between them. On CUDA by events on the current stream, read once the last
// step is done (finish): the host prepares and launches a step while the device still runs the one before, where
// a wait after each step left the device idle for each step's host work. On the CPU by the clock, a step being
// done when its forward returns.
class StepTimer {
 public:
  explicit StepTimer(const at::Device& device);
  ~StepTimer();
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;
  void step_launched();  // after a step's work is queued
  // Waits for the device's last step; each step's milliseconds, in order (from the timer's start to the first).
  std::vector<double> finish();

 private:
  bool cuda_;
  std::vector<std::chrono::steady_clock::time_point> clock_;  // the CPU's: the start, then each step's end
  std::vector<void*> events_;                                // CUDA's (cudaEvent_t): the same marks
};

// A point in the device's queue of work, marked when made: reached once everything queued before it is done
// (at once on the CPU, whose work is done when the call that queued it returns). Polled, it never waits; wait()
// waits for this point only, not for what was queued after it (the next call's work, with calls in flight).
class DeviceMark {
 public:
  explicit DeviceMark(const at::Device& device);
  ~DeviceMark();
  DeviceMark(const DeviceMark&) = delete;
  DeviceMark& operator=(const DeviceMark&) = delete;
  bool reached() const;
  void wait() const;

 private:
  void* event_ = nullptr;  // CUDA's (cudaEvent_t)
};

// `t` copied into pinned host memory by a copy queued on the current stream, without waiting for it (the CPU's
// tensor as it is). Read it once a DeviceMark made after this call is reached. A blocking copy (`.cpu()`) made
// later would wait for everything queued by then: with calls in flight, the next call's forward pass too.
at::Tensor queue_copy_to_host(const at::Tensor& t);

// The device memory free now, after handing back what torch's caching allocator holds unused
// (a CUDA device; 0 on the CPU).
int64_t free_device_bytes(const at::Device& device);

}  // namespace tq
