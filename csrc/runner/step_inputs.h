// A step's host work, apart from its forward pass (Transformer::run, which reads nothing from the host): its
// attention planned, one plan per rule the layers use (with and without the sliding window), and its arrays, its
// own and its plans', moved to the transformer's device in one copy that does not block (kernels/host_upload.h);
// or, for a CUDA graph (runner/step_graphs.h), copied in one copy into the buffers of the graph of its launch
// shape. One copy, where a graph's step copied each array apart: about twenty device copies, each a launch the
// host makes before the graph's (bench/README.md, "The host's planning of a call").
#pragma once
#include "model/transformer.h"

namespace tq {

// The step's inputs and plans, their arrays on the host. fixed_shape: plans of a fixed launch shape where the step
// allows them (a graph's); off, the last layer computes the output rows alone, as a traced forward must to be
// compared with another path layer by layer.
StepInputs prepare_step(const Transformer& transformer, const StepBatch& step, bool fixed_shape = true);
// Moves a prepared step's arrays to `device`, as views of one buffer (StepInputs::placed).
void place_step(StepInputs& in, at::Device device);
// Copies a prepared step's arrays into a placed step's buffer (same launch_shape: the same arrays' sizes), and
// its plans' host state into that step's plans.
void refill_step(StepInputs& into, StepInputs& from);

}  // namespace tq
