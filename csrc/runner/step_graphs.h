// Steps through CUDA graphs (`--cuda-graphs on`; docs/gpu.md, "CUDA
// graphs"). A bucketed step (batch/step_buckets.h) planned in the fixed form
// (batch/fixed_cascade.h) launches the same kernels with the same sizes and
// host arguments as every other step of its launch shape; only the contents
// of its inputs differ. So the first step of each launch shape keeps its
// inputs (StepInputs, runner/step_inputs.h) as the shape's persistent buffers
// and, on CUDA, is captured into a graph; every later step of that shape has
// its inputs copied into those buffers (refill_step) and replays it.
//
// On CUDA: the capture runs on a side stream (a graph cannot be captured on
// the default one) after an eager warm-up there (cuBLAS makes its handle and
// workspace on first use, which a capture cannot), into one memory pool
// shared by every graph; replays run on the current stream. Graphs are
// captured at a shape's first step rather than at start: a shape is known
// only from a step (the own tier's keys grow with shared option lists).
//
// The graphs kept are bounded (kMaxGraphs): past that, a new shape's capture
// first drops the graph used least recently (a shape's inputs and output are
// kept with its graph; a prefill's output alone is megabytes).
//
// On the CPU nothing is captured: each step runs from the persistent buffers
// eagerly, and its launches (runner/launch_record.h) are compared with those
// of the shape's first step. A difference, which on the GPU would be a replay
// computing something other than the step, throws: the check CI runs.
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <vector>

#include "cache/kv_cache.h"
#include "model/transformer.h"

namespace tq {

class StepGraphs {
 public:
  static constexpr size_t kMaxGraphs = 256;

  StepGraphs(const Transformer& model, KvCache& cache);
  ~StepGraphs();
  // The final hidden states of every row of the step `inputs` holds (which has a launch shape),
  // [T, hidden] fp32; `replayed`: whether it replayed a graph an earlier step captured. The tensor
  // is the shape's: read it before the next step of that shape. `host_ms`: its host work before the
  // launches (a kept graph's buffers refilled, or a new step's arrays placed), which the engine counts
  // as planning (ForwardInfo::plan_ms). `launch_ms`: the host's time in launching its graph (cudaGraphLaunch; 0 on
  // the CPU, whose replay runs the step eagerly): the device waits for a launch before the graph's first kernel.
  at::Tensor run(StepInputs inputs, bool& replayed, double& host_ms, double& launch_ms);

 private:
  struct Graph;
  // A shape's first step, computed and captured (on the CPU: computed, its launches recorded).
  at::Tensor capture(Graph& g, double& launch_ms);
  // A later step, its inputs already in g's buffers; launch_ms as run()'s.
  at::Tensor replay(Graph& g, double& launch_ms);
  // Drops the graph used least recently, once no step still runs on it.
  void drop_least_recent();
  const Transformer& model_;
  KvCache& cache_;
  std::map<std::vector<int64_t>, std::unique_ptr<Graph>> graphs_;  // by launch shape
  uint64_t steps_ = 0;  // steps run: a graph's last use is the step that last ran it
};

}  // namespace tq
