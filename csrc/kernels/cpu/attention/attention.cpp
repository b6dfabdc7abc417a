// The CPU attention's entry (attention.h): a call's chunks and KV heads as items, taken by the
// threads largest first, each run by one implementation (attention_item.h).
#include "kernels/cpu/attention/attention.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "kernels/cpu/attention/attention_item.h"

namespace tq {

namespace {
// Paired: x's rows in the plan's order, a zero row at each gap (index
// x.size(0)), by row copies (at::cat of a zero row and index_select cost a
// noticeable part of a layer: bench/README.md, "CPU attention").
at::Tensor in_key_order(const at::Tensor& x, const at::Tensor& order) {
  const int64_t n = x.size(0), count = order.size(0);
  const size_t row_bytes = static_cast<size_t>(x.size(1) * x.size(2) * x.element_size());
  auto out = at::empty({count, x.size(1), x.size(2)}, x.options());
  const int64_t* index = order.data_ptr<int64_t>();
  const char* src = static_cast<const char*>(x.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  for (int64_t i = 0; i < count; ++i, dst += row_bytes) {
    if (index[i] < n) std::memcpy(dst, src + index[i] * row_bytes, row_bytes);
    else std::memset(dst, 0, row_bytes);
  }
  return out;
}
}  // namespace

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionPlan& plan, bool invariant, Isa isa,
                     double softcap) {
  TORCH_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous() && k.scalar_type() == q.scalar_type() &&
                  v.scalar_type() == q.scalar_type(),
              "attention: contiguous q, k, v of one dtype");
  const bool paired = plan.key_order.defined();
  for (const auto& ch : plan.chunks) TORCH_CHECK(invariant || ch.hole_begin == ch.hole_end, "attention: holes are for the invariant kernels");
  TORCH_CHECK(paired == (invariant && q.scalar_type() == at::kBFloat16),
              "attention: the invariant bf16 kernels take paired keys, and only they do");
  using namespace cpu_attention;
  auto out = at::empty(q.sizes(), q.options());
#if TQ_ONEDNN
  const AttentionShape shape{q.size(1), k.size(1), q.size(2), onednn::type_of(q.scalar_type())};
#else
  TORCH_CHECK(invariant, "attention: this build has no oneDNN; only the batch-invariant kernels");
  const AttentionShape shape{q.size(1), k.size(1), q.size(2)};
#endif
  const at::Tensor keys = paired ? in_key_order(k, plan.key_order) : k, values = paired ? in_key_order(v, plan.key_order) : v;
  const AttentionData data{shape,
                           static_cast<const char*>(q.data_ptr()),
                           static_cast<const char*>(keys.data_ptr()),
                           static_cast<const char*>(values.data_ptr()),
                           static_cast<char*>(out.data_ptr()),
                           q.element_size(),
                           q.scalar_type() == at::kBFloat16,
                           isa,
                           paired,
                           static_cast<float>(softcap)};
  // One parallel region per call, the threads taking items largest first (a
  // causal prefill's later chunks read more keys). An item's scores stay in
  // its thread's cache from matmul to softmax to matmul, and the threads meet
  // once per layer rather than at every step of every chunk.
  std::vector<WorkItem> items;
  for (const auto& ch : plan.chunks)
    for (int64_t h = 0; h < data.shape.kv_heads; ++h) items.push_back({&ch, h});
  // Items of equal cost go KV head by KV head, so that a thread's next item often reads the keys its last one packed
  // (attention_invariant.cpp); which thread computes an item changes no bit of it.
  std::stable_sort(items.begin(), items.end(),
                   [](const WorkItem& a, const WorkItem& b) { return a.cost() != b.cost() ? a.cost() > b.cost() : a.kv_head < b.kv_head; });
  // Every thread joins even when there are fewer items, so that an item always
  // runs inside the region on one thread: a oneDNN primitive partitions its
  // work by the threads it sees when created.
  std::atomic<size_t> next{0};
#if TQ_ONEDNN
  const auto attend = invariant ? attend_invariant : attend_onednn;
#else
  const auto attend = attend_invariant;  // checked above
#endif
  at::parallel_for(0, at::get_num_threads(), 1, [&](int64_t, int64_t) {
    auto& buffers = thread_item_buffers();
    buffers.packed_for.reset();
    for (size_t i = next++; i < items.size(); i = next++) attend(data, items[i], buffers);
    settle_thread_buffers(false);
  });
  return out;
}

}  // namespace tq
