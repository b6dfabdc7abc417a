// A kernel launch's own error, named by its step. cudaGetLastError() after a
// launch also returns an error an earlier asynchronous op left (a faulting
// ATen kernel, a failed copy), which would then be blamed on this launch: so
// that is read first, and reported as what it is, before the launch.
#pragma once
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace tq::cuda {

// "" on success; else the error, naming `step`. Launch: a callable returning the launch's cudaError_t.
template <typename Launch>
std::string launch_error(const char* step, Launch&& launch) {
  if (const cudaError_t earlier = cudaGetLastError(); earlier != cudaSuccess)
    return std::string("before ") + step + ": an earlier CUDA error: " + cudaGetErrorString(earlier) +
           " (run again with CUDA_LAUNCH_BLOCKING=1 to name the op that failed)";
  if (const cudaError_t own = launch(); own != cudaSuccess) return std::string(step) + ": " + cudaGetErrorString(own);
  return {};
}

// The same, thrown as a std::runtime_error (the readout throws its own error kind with launch_error).
template <typename Launch>
void check_launch(const char* step, Launch&& launch) {
  if (auto error = launch_error(step, launch); !error.empty()) throw std::runtime_error(error);
}

}  // namespace tq::cuda
