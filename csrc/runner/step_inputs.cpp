#include "runner/step_inputs.h"

#include <stdexcept>
#include <utility>

#include "kernels/host_upload.h"

namespace tq {
namespace {

// The step's arrays its launches read, in a fixed order: its own, then each plan's (StepAttention::arrays).
std::vector<at::Tensor*> step_arrays(StepInputs& in) {
  std::vector<at::Tensor*> arrays;
  for (auto* t : {&in.token_ids, &in.positions, &in.slots, &in.key_slots, &in.rope_positions, &in.long_rope, &in.image_rows, &in.output_rows})
    if (t->defined()) arrays.push_back(t);
  for (auto* plans : {&in.attend, &in.attend_output})
    for (auto& plan : *plans)
      if (plan)
        for (at::Tensor* t : plan->arrays()) arrays.push_back(t);
  return arrays;
}

}  // namespace

StepInputs prepare_step(const Transformer& transformer, const StepBatch& step, bool fixed_shape) {
  const auto& c = transformer.config();
  const auto& kernels = transformer.kernels();
  StepInputs in;
  in.token_ids = step.token_ids;
  in.positions = step.positions;
  in.slots = step.slots;
  in.key_slots = step.key_slots;
  in.rope_positions = step.rope_positions;
  in.long_rope = step.long_rope;
  in.image_rows = step.image_rows;
  in.image_embeds = step.image_embeds.defined() ? step.image_embeds.to(kernels.device()) : step.image_embeds;  // made on the device
  // One plan per attention rule the layers use: with and without the window (Gemma 3 has both).
  auto plan = [&](const QueryLayout& q, bool sliding) {
    return kernels.plan_attention(q, step.key_positions, step.key_segments, sliding ? c.sliding_window : std::nullopt, c.num_heads);
  };
  const QueryLayout queries{step.positions, step.segments, step.parents, step.roots, step.key_end, step.key_slots, key_rows_of(step)};
  // A step whose plans launch alike whatever its layout: a graph's (image rows vary in number; a mixture of
  // experts routes on the host, its rows per expert varying too).
  bool fixed = fixed_shape && !step.image_rows.defined() && !c.moe;
  for (const auto& kind : c.layers) {
    auto& attend = in.attend[kind.sliding];
    if (attend) continue;
    attend = plan(queries, kind.sliding);
    const auto shape = attend->launch_shape();
    fixed = fixed && !shape.empty();
    in.launch_shape.insert(in.launch_shape.end(), shape.begin(), shape.end());
  }
  if (fixed) {
    for (const auto* t : {&in.token_ids, &in.key_slots, &in.rope_positions, &in.long_rope}) in.launch_shape.push_back(t->defined() ? t->size(0) : -1);
    return in;
  }
  in.launch_shape.clear();
  // Past the last layer's K/V only the output rows matter: the rest of that layer runs for them alone.
  in.output_rows = at::tensor(at::ArrayRef<int64_t>(step.output_rows), at::TensorOptions().dtype(at::kLong));
  if (step.output_rows.empty()) return in;
  std::vector<int64_t> key_end;
  for (auto r : step.output_rows) key_end.push_back(step.key_end[r]);
  const auto& rows = in.output_rows;
  const QueryLayout out_queries{step.positions.index_select(0, rows), step.segments.index_select(0, rows), step.parents.index_select(0, rows),
                                step.roots.index_select(0, rows), key_end, step.key_slots, queries.key_rows};
  const bool sliding = c.layers.back().sliding;
  in.attend_output[sliding] = plan(out_queries, sliding);
  return in;
}

void place_step(StepInputs& in, at::Device device) {
  if (in.placed.defined()) throw std::logic_error("place_step: a step placed already");
  in.placed = pack_into_one(step_arrays(in), device);
}

void refill_step(StepInputs& into, StepInputs& from) {
  if (into.launch_shape.empty() || into.launch_shape != from.launch_shape) throw std::logic_error("refill: steps of another launch shape");
  if (!into.placed.defined() || from.placed.defined()) throw std::logic_error("refill: from a step on the host into a placed one");
  const auto to = step_arrays(into), arrays = step_arrays(from);
  bool alike = to.size() == arrays.size();
  for (size_t i = 0; alike && i < to.size(); ++i) alike = to[i]->sizes() == arrays[i]->sizes() && to[i]->scalar_type() == arrays[i]->scalar_type();
  if (!alike) throw std::logic_error("refill: a step whose arrays differ in number, size or type from the graph's");
  copy_into_packed({arrays.begin(), arrays.end()}, into.placed);
  for (int sliding = 0; sliding < 2; ++sliding)
    if (into.attend[sliding]) into.attend[sliding]->refill_from(*from.attend[sliding]);
}

}  // namespace tq
