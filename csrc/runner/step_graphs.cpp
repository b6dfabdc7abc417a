#include "runner/step_graphs.h"

#include <ATen/record_function.h>

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
  StepInputs inputs;  // the persistent buffers the graphs read
  at::Tensor out;     // what the last writes
  std::vector<std::string> launches;  // the CPU's record of the first step
  uint64_t last_used = 0;
#if TQ_CUDA
  std::vector<std::unique_ptr<at::cuda::CUDAGraph>> graphs;  // in launch order
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

void begin_capture(at::cuda::CUDAGraph& graph) {
#if TORCH_VERSION_MAJOR >= 2
  graph.capture_begin(shared_pool(), cudaStreamCaptureModeThreadLocal);
#else
  graph.capture_begin(shared_pool());  // libtorch 1.x: global capture mode only
#endif
}
#endif

}  // namespace

std::vector<int64_t> graph_first_layers(int64_t layers, int64_t graphs) {
  std::vector<int64_t> first{0};
  for (int64_t size = 1; static_cast<int64_t>(first.size()) < graphs && first.back() + size < layers; size *= 2)
    first.push_back(first.back() + size);
  return first;
}

StepGraphs::StepGraphs(const Transformer& model, KvCache& cache, int64_t chunks)
    : model_(model), cache_(cache), first_layers_(graph_first_layers(static_cast<int64_t>(model.config().num_layers), chunks)) {}
StepGraphs::~StepGraphs() = default;

at::Tensor StepGraphs::run(StepInputs inputs, GraphStep& step) {
  if (inputs.launch_shape.empty()) throw std::logic_error("StepGraphs::run: a step without a launch shape");
  const auto t0 = std::chrono::steady_clock::now();
  const auto found = graphs_.find(inputs.launch_shape);
  step.replayed = found != graphs_.end();
  ++steps_;
  if (step.replayed) {
    found->second->last_used = steps_;
    refill_step(found->second->inputs, inputs);
    step.host_ms = ms_since(t0);
    return replay(*found->second, step);
  }
  if (graphs_.size() >= kMaxGraphs) drop_least_recent();
  auto g = std::make_unique<Graph>();
  g->last_used = steps_;
  g->inputs = std::move(inputs);
  place_step(g->inputs, model_.kernels().device());
  step.host_ms = ms_since(t0);
  // Kept only once captured: a step that fails leaves no half-made graph behind.
  auto out = capture(*g, step);
  const auto shape = g->inputs.launch_shape;
  graphs_.emplace(shape, std::move(g));
  return out;
}

at::Tensor StepGraphs::run_cut(const Graph& g, const std::function<void()>& cut) const {
  return model_.run(g.inputs, cache_, [&](int64_t next_layer) {
    if (std::find(first_layers_.begin(), first_layers_.end(), next_layer) != first_layers_.end()) cut();
  });
}

at::Tensor StepGraphs::capture(Graph& g, GraphStep& step) {
  step.launches = static_cast<int64_t>(first_layers_.size());
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
      g.graphs.push_back(std::make_unique<at::cuda::CUDAGraph>());
      begin_capture(*g.graphs.back());
      try {
        // At each cut the graph so far ends and the next begins, in the same pool: the tensors the layers pass on
        // (the residual, the next input) stay allocated there, read by the next graph.
        g.out = run_cut(g, [&] {
          g.graphs.back()->capture_end();
          g.graphs.push_back(std::make_unique<at::cuda::CUDAGraph>());
          begin_capture(*g.graphs.back());
        });
      } catch (...) {
        // Ends the capture (and the allocator's routing to the pool), whatever it left; then the step's error.
        try {
          g.graphs.back()->capture_end();
        } catch (...) {
        }
        throw;
      }
      g.graphs.back()->capture_end();
    }
    c10::cuda::device_synchronize();
    // The capture computed nothing: this step is computed now.
    return replay(g, step);
  }
#endif
  LaunchRecord record;
  g.out = run_cut(g, [] { RECORD_FUNCTION("tq::graph_cut", std::vector<c10::IValue>()); });
  g.launches = record.launches();
  return g.out;
}

void StepGraphs::drop_least_recent() {
  const auto oldest = std::min_element(graphs_.begin(), graphs_.end(), [](const auto& a, const auto& b) { return a.second->last_used < b.second->last_used; });
#if TQ_CUDA
  // Its last replay may still be running, reading its buffers: they go back to the pool only once it is done.
  if (!oldest->second->graphs.empty()) c10::cuda::device_synchronize();
#endif
  graphs_.erase(oldest);
}

at::Tensor StepGraphs::replay(Graph& g, GraphStep& step) {
  step.launches = static_cast<int64_t>(first_layers_.size());
  step.launch_ms = 0;
#if TQ_CUDA
  if (!g.graphs.empty()) {
    const auto launching = std::chrono::steady_clock::now();
    for (auto& graph : g.graphs) graph->replay();
    step.launch_ms = ms_since(launching);
    return g.out;
  }
#endif
  // The CPU: the step eagerly, from the graph's buffers, its launches (its cuts among them) checked against the capture's.
  LaunchRecord record;
  g.out = run_cut(g, [] { RECORD_FUNCTION("tq::graph_cut", std::vector<c10::IValue>()); });
  if (const auto diff = first_difference(g.launches, record.launches()); !diff.empty())
    throw std::logic_error("a CUDA graph's replay would launch otherwise than its capture: " + diff);
  return g.out;
}

}  // namespace tq
