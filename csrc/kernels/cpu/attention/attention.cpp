// The CPU attention's entry (attention.h): a call's chunks and KV heads as items, taken by the
// threads largest first, each run by one implementation (attention_item.h).
#include "kernels/cpu/attention/attention.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "kernels/cpu/attention/attention_item.h"

namespace tq {

namespace {
// The row of k and v that each key place of the plan reads, -1 at a paired plan's gap (a zero row): the invariant
// kernels gather an item's rows from k and v through it as they pack them (attention_invariant.cpp), on the item's
// thread. Empty where every place is its own row. (A whole copy of k and v in key order, and one from the cache's
// slots before it, took a core each layer while the other waited: bench/README.md, "CPU attention".)
std::vector<int64_t> rows_of_places(const AttentionPlan& plan, const at::Tensor& key_rows, int64_t rows) {
  if (!plan.key_order.defined() && !key_rows.defined()) return {};
  const int64_t* order = plan.key_order.defined() ? plan.key_order.data_ptr<int64_t>() : nullptr;  // a gap: key n
  const at::Tensor slots = key_rows.defined() ? key_rows.to(at::kLong).contiguous() : at::Tensor();
  const int64_t* slot = slots.defined() ? slots.data_ptr<int64_t>() : nullptr;
  const int64_t n = slot ? slots.size(0) : rows, places = order ? plan.key_order.size(0) : n;
  std::vector<int64_t> out(static_cast<size_t>(places));
  for (int64_t i = 0; i < places; ++i) {
    const int64_t key = order ? order[i] : i;
    const int64_t row = key >= n ? -1 : slot ? slot[key] : key;
    TORCH_CHECK(row < rows, "attention: key ", key, " at row ", row, " of ", rows);
    out[static_cast<size_t>(i)] = row;
  }
  return out;
}
}  // namespace

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionPlan& plan, bool invariant, Isa isa,
                     double softcap, const at::Tensor& key_rows) {
  // oneDNN reads an item's keys and values in place, as one run of rows.
  if (!invariant && key_rows.defined()) return attention(q, k.index_select(0, key_rows), v.index_select(0, key_rows), plan, invariant, isa, softcap);
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
  const std::vector<int64_t> rows = rows_of_places(plan, key_rows, k.size(0));
  const AttentionData data{shape,
                           static_cast<const char*>(q.data_ptr()),
                           static_cast<const char*>(k.data_ptr()),
                           static_cast<const char*>(v.data_ptr()),
                           rows.empty() ? nullptr : rows.data(),
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
