#include "runner/step_inputs.h"

#include <utility>

#include "kernels/host_upload.h"

namespace tq {

StepInputs prepare_step(const Transformer& transformer, const StepBatch& step, bool fixed_shape) {
  const auto& c = transformer.config();
  const auto& kernels = transformer.kernels();
  const auto device = kernels.device();
  StepInputs in;
  in.token_ids = step.token_ids;
  in.positions = step.positions;
  in.slots = step.slots;
  in.key_slots = step.key_slots;
  in.rope_positions = step.rope_positions;
  in.long_rope = step.long_rope;
  in.image_rows = step.image_rows;
  // The host's arrays in one copy that does not wait for the device (the step before may still be running).
  std::vector<at::Tensor*> arrays;
  for (auto* t : {&in.token_ids, &in.positions, &in.slots, &in.key_slots, &in.rope_positions, &in.long_rope, &in.image_rows})
    if (t->defined()) arrays.push_back(t);
  upload_together(arrays, device);
  in.image_embeds = step.image_embeds.defined() ? step.image_embeds.to(device) : step.image_embeds;  // made on the device
  // One plan per attention rule the layers use: with and without the window (Gemma 3 has both).
  auto plan = [&](const QueryLayout& q, bool sliding) {
    return kernels.plan_attention(q, step.key_positions, step.key_segments, sliding ? c.sliding_window : std::nullopt, c.num_heads);
  };
  const QueryLayout queries{step.positions, step.segments, step.parents, step.roots, step.key_end, step.key_slots};
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
  auto rows = at::tensor(at::ArrayRef<int64_t>(step.output_rows), at::TensorOptions().dtype(at::kLong));
  in.output_rows = index_on(device, step.output_rows);
  if (step.output_rows.empty()) return in;
  std::vector<int64_t> key_end;
  for (auto r : step.output_rows) key_end.push_back(step.key_end[r]);
  const QueryLayout out_queries{step.positions.index_select(0, rows), step.segments.index_select(0, rows), step.parents.index_select(0, rows),
                                step.roots.index_select(0, rows), key_end, step.key_slots};
  const bool sliding = c.layers.back().sliding;
  in.attend_output[sliding] = plan(out_queries, sliding);
  return in;
}

void refill_step(StepInputs& into, const StepInputs& from) {
  if (into.launch_shape.empty() || into.launch_shape != from.launch_shape) throw std::logic_error("refill: steps of another launch shape");
  for (auto [a, b] : {std::pair{&into.token_ids, &from.token_ids}, {&into.positions, &from.positions}, {&into.slots, &from.slots},
                      {&into.key_slots, &from.key_slots}, {&into.rope_positions, &from.rope_positions}, {&into.long_rope, &from.long_rope}})
    if (a->defined()) a->copy_(*b);
  for (int sliding = 0; sliding < 2; ++sliding)
    if (into.attend[sliding]) into.attend[sliding]->refill_from(*from.attend[sliding]);
}

}  // namespace tq
