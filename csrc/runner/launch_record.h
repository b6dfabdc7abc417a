// What a CUDA graph would bake in, written down on the CPU. A graph replays
// the launches it captured with their sizes and host arguments as they were;
// a step may replay another's graph only if, run eagerly, it would launch
// exactly the same. On the CPU the same forward runs its ATen ops (and our
// kernels' launch points, marked with RECORD_FUNCTION), so recording each
// one's name and host arguments (tensor sizes and dtypes, scalars) during a
// forward, and comparing two steps' records, checks there what a replay on
// the GPU relies on (runner/step_graphs.h). Tensor contents are not recorded:
// a replay reads them anew.
#pragma once
#include <string>
#include <vector>

namespace tq {

// Records the launches the calling thread makes while it lives (one at a time per thread;
// ops run on other threads, such as a parallel loop's workers, are not launches of their own).
class LaunchRecord {
 public:
  LaunchRecord();
  ~LaunchRecord();
  LaunchRecord(const LaunchRecord&) = delete;
  LaunchRecord& operator=(const LaunchRecord&) = delete;
  // One line per launch, in order: "name(arg, arg, ...)".
  const std::vector<std::string>& launches() const { return launches_; }

 private:
  std::vector<std::string> launches_;
  unsigned long long handle_;
};

// The first place two records differ, "" where they are the same.
std::string first_difference(const std::vector<std::string>& a, const std::vector<std::string>& b);

}  // namespace tq
