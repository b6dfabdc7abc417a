// tq_cli answer --profile FILE: the calls of the last repetition recorded by libtorch's profiler (CPU ops, and on
// CUDA the kernels, copies and runtime calls through Kineto), each call inside a user scope named "tq_cli call N", and
// written as a Chrome trace (bench/gpu/kernel_profile.py reads it; Perfetto and chrome://tracing open it).
#pragma once
#include <memory>
#include <string>

namespace tq::cli {

class CallProfile {
 public:
  // Starts recording; with_cuda also records the GPU's activity (a CUDA build on a GPU).
  CallProfile(std::string path, bool with_cuda);
  ~CallProfile();  // stops recording if stop() was not reached (an error mid-call)
  // Stops recording and writes the trace. Kineto's own writer where this libtorch has Kineto; else (Debian's 1.13)
  // the same format written here from the recorded CPU events.
  void stop();

 private:
  std::string path_;
  bool recording_ = false;
};

// The user scope each call runs in, so that a trace's events can be told apart by call.
std::string call_scope_name(size_t call);

}  // namespace tq::cli
