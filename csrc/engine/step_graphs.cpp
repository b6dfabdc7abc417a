#include "engine/step_graphs.h"

#include <stdexcept>

#include "engine/launch_record.h"
#if TQ_CUDA
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

at::Tensor StepGraphs::run(StepInputs inputs) {
  if (inputs.launch_shape.empty()) throw std::logic_error("StepGraphs::run: a step without a launch shape");
  auto& kept = graphs_[inputs.launch_shape];
  const bool first = !kept;
  if (first) {
    kept = std::make_unique<Graph>();
    kept->inputs = std::move(inputs);
  } else {
    Transformer::refill(kept->inputs, inputs);
    ++replays_;
  }
  Graph& g = *kept;
#if TQ_CUDA
  if (g.inputs.token_ids.is_cuda()) {
    if (first) {
      const auto device = g.inputs.token_ids.device();
      // Inputs were copied on the current stream: the side stream starts after them.
      c10::cuda::device_synchronize();
      auto side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
      {
        c10::cuda::CUDAStreamGuard on_side(side);
        model_.run(g.inputs, cache_);  // warm-up: handles, workspaces, lazily loaded kernels
        side.synchronize();
        g.graph = std::make_unique<at::cuda::CUDAGraph>();
        g.graph->capture_begin(shared_pool(), cudaStreamCaptureModeThreadLocal);
        g.out = model_.run(g.inputs, cache_);
        g.graph->capture_end();
      }
      c10::cuda::device_synchronize();
    }
    g.graph->replay();
    return g.out;
  }
#endif
  // The CPU: the same step eagerly, from the same buffers, its launches checked against the first's.
  LaunchRecord record;
  g.out = model_.run(g.inputs, cache_);
  if (first) g.launches = record.launches();
  else if (const auto diff = first_difference(g.launches, record.launches()); !diff.empty())
    throw std::logic_error("a CUDA graph's replay would launch otherwise than its capture: " + diff);
  return g.out;
}

}  // namespace tq
