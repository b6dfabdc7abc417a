// A step's host work, apart from its forward pass (Transformer::run, which reads nothing from the host): its
// index tensors moved to the transformer's device and its attention planned, one plan per rule the layers use
// (with and without the sliding window); and, for a CUDA graph (runner/step_graphs.h), another step's inputs
// of the same launch shape copied into the graph's buffers.
#pragma once
#include "model/transformer.h"

namespace tq {

// fixed_shape: plans of a fixed launch shape where the step allows them (a graph's); off, the last layer computes
// the output rows alone, as a traced forward must to be compared with another path layer by layer.
StepInputs prepare_step(const Transformer& transformer, const StepBatch& step, bool fixed_shape = true);
// Copies `from` into `into`'s tensors and plans, which keep their memory (same launch_shape).
void refill_step(StepInputs& into, const StepInputs& from);

}  // namespace tq
