#include "runner/step_graphs.h"

#include <algorithm>
#include <stdexcept>

#include "common/clock.h"
#include "runner/launch_record.h"
#include "runner/step_inputs.h"
#if TQ_CUDA
#include <torch/version.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace tq {

struct StepGraphs::Graph {
  StepInputs inputs;  // the persistent buffers the graph reads
  at::Tensor out;     // what it writes
  std::vector<std::string> launches;  // the CPU's record of the first step
  uint64_t last_used = 0;
#if TQ_CUDA
  std::unique_ptr<at::cuda::CUDAGraph> graph;
#endif
};

namespace {

#if TQ_CUDA
// One pool for every graph's intermediate tensors. Graphs replay one at a time and each graph's
// output stays allocated, so one graph's intermediates may reuse another's.
auto shared_pool() {
  static const auto pool = at::cuda::graph_pool_handle();
  return pool;
}
#endif

}  // namespace

StepGraphs::StepGraphs(const Transformer& model, KvCache& cache) : model_(model), cache_(cache) {}
StepGraphs::~StepGraphs() = default;

at::Tensor StepGraphs::run(StepInputs inputs, bool& replayed, double& host_ms, double& launch_ms) {
  if (inputs.launch_shape.empty()) throw std::logic_error("StepGraphs::run: a step without a launch shape");
  const auto t0 = std::chrono::steady_clock::now();
  const auto found = graphs_.find(inputs.launch_shape);
  replayed = found != graphs_.end();
  ++steps_;
  if (replayed) {
    found->second->last_used = steps_;
    refill_step(found->second->inputs, inputs);
    host_ms = ms_since(t0);
    return replay(*found->second, launch_ms);
  }
  if (graphs_.size() >= kMaxGraphs) drop_least_recent();
  auto g = std::make_unique<Graph>();
  g->last_used = steps_;
  g->inputs = std::move(inputs);
  place_step(g->inputs, model_.kernels().device());
  host_ms = ms_since(t0);
  // Kept only once captured: a step that fails leaves no half-made graph behind.
  auto out = capture(*g, launch_ms);
  const auto shape = g->inputs.launch_shape;
  graphs_.emplace(shape, std::move(g));
  return out;
}

at::Tensor StepGraphs::capture(Graph& g, double& launch_ms) {
#if TQ_CUDA
  if (g.inputs.token_ids.is_cuda()) {
    const auto device = g.inputs.token_ids.device();
    // Inputs were copied on the current stream: the side stream starts after them.
    c10::cuda::device_synchronize();
    auto side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
    {
      c10::cuda::CUDAStreamGuard on_side(side);
      model_.run(g.inputs, cache_);  // warm-up: handles, workspaces, lazily loaded kernels
      side.synchronize();
      g.graph = std::make_unique<at::cuda::CUDAGraph>();
#if TORCH_VERSION_MAJOR >= 2
      g.graph->capture_begin(shared_pool(), cudaStreamCaptureModeThreadLocal);
#else
      g.graph->capture_begin(shared_pool());  // libtorch 1.x: global capture mode only
#endif
      try {
        g.out = model_.run(g.inputs, cache_);
      } catch (...) {
        // Ends the capture (and the allocator's routing to the pool), whatever it left; then the step's error.
        try {
          g.graph->capture_end();
        } catch (...) {
        }
        throw;
      }
      g.graph->capture_end();
    }
    c10::cuda::device_synchronize();
    const auto launching = std::chrono::steady_clock::now();
    g.graph->replay();  // the capture computed nothing: this step is computed now
    launch_ms = ms_since(launching);
    return g.out;
  }
#endif
  LaunchRecord record;
  g.out = model_.run(g.inputs, cache_);
  g.launches = record.launches();
  return g.out;
}

void StepGraphs::drop_least_recent() {
  const auto oldest = std::min_element(graphs_.begin(), graphs_.end(), [](const auto& a, const auto& b) { return a.second->last_used < b.second->last_used; });
#if TQ_CUDA
  // Its last replay may still be running, reading its buffers: they go back to the pool only once it is done.
  if (oldest->second->graph) c10::cuda::device_synchronize();
#endif
  graphs_.erase(oldest);
}

at::Tensor StepGraphs::replay(Graph& g, double& launch_ms) {
#if TQ_CUDA
  if (g.graph) {
    const auto launching = std::chrono::steady_clock::now();
    g.graph->replay();
    launch_ms = ms_since(launching);
    return g.out;
  }
#endif
  launch_ms = 0;
  // The CPU: the step eagerly, from the graph's buffers, its launches checked against the capture's.
  LaunchRecord record;
  g.out = model_.run(g.inputs, cache_);
  if (const auto diff = first_difference(g.launches, record.launches()); !diff.empty())
    throw std::logic_error("a CUDA graph's replay would launch otherwise than its capture: " + diff);
  return g.out;
}

}  // namespace tq
