// The engine's one visibility rule: a query at (position p, segment s, whose
// parent is segment a and state is segment r) sees a key at (position p',
// segment s') when p' <= p, s' is s, a or r, and p - p' is inside the sliding
// window if any (packed_tokens.h). Every attention implementation (the CPU
// kernels' plan, the ATen kernels' masks, TorchScript models' masks) asks it
// here, so they cannot disagree.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace tq {

// Where a step's queries sit, for the visibility rule.
struct QueryLayout {
  at::Tensor positions, segments, parents, roots;  // [Tq] int64
  std::vector<int64_t> key_end;                    // per query: 1 + index of its own key; non-decreasing
  // [Tk] int64 on the host: where each key lies in the KV cache's store. Undefined where the keys are not
  // the cache's (a vision tower's); a plan made with them may read the store in place (StepAttention::over_store).
  at::Tensor key_slots;
  // [Tk] on the host, where known: the step row whose own key each key is (the step's row, which the layer computes the
  // key for; an output layout's rows are some of them), -1 for a key the cache holds already. A plan may read such keys
  // where the layer wrote them (StepKeys, kernels/layer_kernels.h).
  std::vector<int32_t> key_rows{};
};

// [Tq, Tk] bool: true where query i may attend to key j.
at::Tensor visibility_mask(const at::Tensor& q_pos, const at::Tensor& q_seg, const at::Tensor& q_parent, const at::Tensor& q_root,
                           const at::Tensor& k_pos, const at::Tensor& k_seg, std::optional<int64_t> window);

}  // namespace tq
