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
// A step may be captured as several graphs, cut between layers
// (`--cuda-graph-chunks`): the first holds the embedding and one layer, each
// next twice the layers of the one before, the last the rest. A graph's first
// kernel waits for its launch on the host, which takes longer the more kernels
// it holds; cut so, the device runs each graph while the host launches the
// next, larger one, and waits only for the first's launch. The graphs share
// the pool and replay in capture order, so one's intermediates may be the
// next's inputs.
//
// On the CPU nothing is captured: each step runs from the persistent buffers
// eagerly, and its launches (runner/launch_record.h), the cuts between its
// graphs among them, are compared with those of the shape's first step. A
// difference, which on the GPU would be a replay computing something other
// than the step, throws: the check CI runs.
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <vector>

#include "cache/kv_cache.h"
#include "model/transformer.h"

namespace tq {

// The first layer of each graph a step of `layers` layers is cut into, for at most `graphs` graphs: 0, 1, 3, 7, ...
// (each graph twice the layers of the one before), the last holding the rest; fewer where the layers run out.
std::vector<int64_t> graph_first_layers(int64_t layers, int64_t graphs);

// What a step through its graphs took on the host.
struct GraphStep {
  bool replayed = false;  // it replayed graphs an earlier step captured
  // Its host work before the launches (a kept graph's buffers refilled, or a new step's arrays placed), which the
  // engine counts as planning (ForwardInfo::plan_ms).
  double host_ms = 0;
  // The host's time in launching its graphs (cudaGraphLaunch; 0 on the CPU, whose replay runs the step eagerly).
  double launch_ms = 0;
  int64_t launches = 0;  // its graphs launched (on the CPU, those a GPU would launch)
};

class StepGraphs {
 public:
  static constexpr size_t kMaxGraphs = 256;
  static constexpr int64_t kMaxChunks = 8;  // graphs a step may be cut into

  // chunks: the graphs a step is cut into, at most (graph_first_layers).
  StepGraphs(const Transformer& model, KvCache& cache, int64_t chunks = 1);
  ~StepGraphs();
  // The final hidden states of every row of the step `inputs` holds (which has a launch shape),
  // [T, hidden] fp32. The tensor is the shape's: read it before the next step of that shape.
  at::Tensor run(StepInputs inputs, GraphStep& step);

 private:
  struct Graph;
  // A shape's first step, computed and captured (on the CPU: computed, its launches recorded).
  at::Tensor capture(Graph& g, GraphStep& step);
  // A later step, its inputs already in g's buffers.
  at::Tensor replay(Graph& g, GraphStep& step);
  // The step run eagerly, `cut` called where a graph ends and the next begins (at graph_first_layers_).
  at::Tensor run_cut(const Graph& g, const std::function<void()>& cut) const;
  // Drops the graph used least recently, once no step still runs on it.
  void drop_least_recent();
  const Transformer& model_;
  KvCache& cache_;
  std::vector<int64_t> first_layers_;  // each graph's first layer (graph_first_layers)
  std::map<std::vector<int64_t>, std::unique_ptr<Graph>> graphs_;  // by launch shape
  uint64_t steps_ = 0;  // steps run: a graph's last use is the step that last ran it
};

}  // namespace tq
