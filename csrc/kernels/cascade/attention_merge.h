// The cascade's merge (kernels/math/attention_merge_math.h) over a step's tiers'
// results: on the CPU a loop over rows, on CUDA one kernel launch.
#pragma once
#include <ATen/ATen.h>

#include <vector>

#include "batch/cascade_plan.h"
#include "kernels/cascade/partial_attention.h"

namespace tq {

// The plan's merge on the device, made once per step: entries name rows of the tiers' results
// stacked in tier order.
struct DeviceMerge {
  std::vector<int32_t> begin, entry;  // host
  // int32, for the CUDA kernel only: made on the host, moved with the step's other arrays (step_upload.h).
  at::Tensor begin_on_device, entry_on_device;
  // The rows a merge in place writes (CascadePlan::merge_written; -1: none), where the plan lists them.
  bool lists_written = false;
  std::vector<int32_t> written;
  at::Tensor written_on_device;
};
DeviceMerge prepare_merge(const CascadePlan& plan, at::Device device);

// The tiers' results in one, tier after tier: the rows the merge's entries count.
PartialResult stacked_tiers(const std::vector<PartialResult>& parts);

// parts: each tier's result, in the plan's order. Returns [rows, heads, dim] in out_dtype.
// first_holds_every_row: parts[0]'s rows are the output's, in order (its tier holds every row of the step, from the
// first: the own tier of a step whose runs are all its rows). Where its result is in out_dtype, the merge then writes
// into it and leaves the rows it alone holds as they are: a row of one entry merges to that entry's bits
// (attention_merge_math.h), so only the rows in several tiers are read and written (a prefill's are its few questions'),
// and where the merge lists them (lists_written), only those are visited.
at::Tensor merge_attention(const DeviceMerge& merge, const std::vector<PartialResult>& parts, at::ScalarType out_dtype,
                           bool first_holds_every_row = false);

}  // namespace tq
