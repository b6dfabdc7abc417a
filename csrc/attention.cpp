#include "attention.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "bf16.h"
#include "onednn.h"
#include "softmax.h"

namespace tq {

namespace {
// Queries per chunk: small enough that a causal prefill skips most of the
// masked triangle, large enough for GEMM (64 measured the same).
constexpr int64_t kChunkQueries = 128;
// Upper bound on score elements per chunk (all heads) for long contexts, which
// bounds each thread's score buffers (fp32: 16 MiB).
constexpr int64_t kMaxScoreElements = int64_t{4} << 20;
}  // namespace

at::Tensor visibility_mask(const at::Tensor& q_pos, const at::Tensor& q_seg, const at::Tensor& q_parent, const at::Tensor& q_root,
                           const at::Tensor& k_pos, const at::Tensor& k_seg, std::optional<int64_t> window) {
  auto qp = q_pos.unsqueeze(1), kp = k_pos.unsqueeze(0), ks = k_seg.unsqueeze(0);
  auto lineage = ks.eq(q_seg.unsqueeze(1)).logical_or_(ks.eq(q_parent.unsqueeze(1))).logical_or_(ks.eq(q_root.unsqueeze(1)));
  auto mask = kp.le(qp).logical_and_(lineage);
  if (window) mask.logical_and_((qp - kp).lt(*window));
  return mask;
}

AttentionPlan plan_attention(const QueryLayout& queries, const at::Tensor& k_pos, const at::Tensor& k_seg,
                             std::optional<int64_t> window, int64_t heads) {
  const int64_t tq = queries.positions.size(0), tk = k_pos.size(0);
  const int64_t chunk = std::max<int64_t>(1, std::min(kChunkQueries, kMaxScoreElements / std::max<int64_t>(1, heads * tk)));
  AttentionPlan plan;
  for (int64_t a = 0; a < tq; a += chunk) {
    const int64_t b = std::min(tq, a + chunk);
    const int64_t key_end = queries.key_end[b - 1];
    auto visible = visibility_mask(queries.positions.slice(0, a, b), queries.segments.slice(0, a, b), queries.parents.slice(0, a, b),
                                   queries.roots.slice(0, a, b), k_pos.slice(0, 0, key_end), k_seg.slice(0, 0, key_end), window);
    // Leading keys no query sees (behind a window), then leading keys all queries see.
    auto seen_by_any = visible.any(0), seen_by_all = visible.all(0);
    int64_t key_begin = 0, bias_begin;
    const bool* any = seen_by_any.data_ptr<bool>();
    const bool* all = seen_by_all.data_ptr<bool>();
    while (key_begin < key_end - 1 && !any[key_begin]) ++key_begin;
    bias_begin = key_begin;
    while (bias_begin < key_end && all[bias_begin]) ++bias_begin;
    auto tail = visible.slice(1, bias_begin, key_end);
    auto bias = at::zeros(tail.sizes(), at::kFloat).masked_fill_(tail.logical_not(), -std::numeric_limits<float>::infinity());
    plan.chunks.push_back({a, b, key_begin, key_end, bias_begin, bias});
  }
  return plan;
}

namespace {

// Attention's two matmuls as oneDNN primitives, with the row and key counts as
// runtime dimensions: one pair per model shape serves every item. Keys and
// values are read in place through strides from [Tk, kv_heads, dim]; scores
// come out in fp32 with the 1/sqrt(dim) scale applied, the mix in fp32 before
// the softmax's division.
struct AttentionPrimitives {
  dnnl::matmul scores, mix;
};

struct AttentionShape {
  int64_t heads, kv_heads, dim;
  dnnl::memory::data_type type;
  int64_t group() const { return heads / kv_heads; }
  // [rows, dim]: an item's queries, gathered (row = head in group * chunk + query).
  dnnl::memory::desc queries(int64_t rows) const { return {{rows, dim}, type, dnnl::memory::format_tag::ab}; }
  // [dim, keys]: one head's keys in [Tk, kv_heads, dim], transposed.
  dnnl::memory::desc keys_t(int64_t keys) const { return {{dim, keys}, type, dnnl::memory::dims{1, kv_heads * dim}}; }
  // [keys, dim]: one head's values in [Tk, kv_heads, dim].
  dnnl::memory::desc values(int64_t keys) const { return {{keys, dim}, type, dnnl::memory::dims{kv_heads * dim, 1}}; }
  dnnl::memory::desc scores(int64_t rows, int64_t keys, dnnl::memory::data_type t) const { return {{rows, keys}, t, dnnl::memory::format_tag::ab}; }
  dnnl::memory::desc mixed(int64_t rows) const { return {{rows, dim}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab}; }
};

// Per thread: each worker of the parallel loop in attention() creates and runs
// its own (as in packed_linear.cpp, a primitive runs on the thread that created
// it). Created inside the parallel region, they run on their one thread.
const AttentionPrimitives& primitives_for(const AttentionShape& shape) {
  thread_local std::map<std::tuple<int64_t, int64_t, int64_t, int>, AttentionPrimitives> cache;
  const auto key = std::make_tuple(shape.heads, shape.kv_heads, shape.dim, static_cast<int>(shape.type));
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const auto any = DNNL_RUNTIME_DIM_VAL;
  const auto f32 = dnnl::memory::data_type::f32;
  dnnl::primitive_attr scaled;
  scaled.set_output_scales(0, {static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.dim)))});
  dnnl::matmul::primitive_desc scores({shape.queries(any), shape.keys_t(any), shape.scores(any, any, f32)}, scaled, onednn::cpu());
  dnnl::matmul::primitive_desc mix({shape.scores(any, any, shape.type), shape.values(any), shape.mixed(any)}, onednn::cpu());
  return cache.emplace(key, AttentionPrimitives{dnnl::matmul(scores), dnnl::matmul(mix)}).first->second;
}

// One call's tensors as raw rows: q and out [Tq, heads, dim], k and v [Tk, kv_heads, dim].
struct AttentionData {
  AttentionShape shape;
  const char *q, *k, *v;
  char* out;
  int64_t item;  // bytes per element
  bool bf16;
  const char* q_at(int64_t query, int64_t head) const { return q + (query * shape.heads + head) * shape.dim * item; }
  const char* k_at(int64_t key, int64_t kv_head) const { return k + (key * shape.kv_heads + kv_head) * shape.dim * item; }
  const char* v_at(int64_t key, int64_t kv_head) const { return v + (key * shape.kv_heads + kv_head) * shape.dim * item; }
  char* out_at(int64_t query, int64_t head) const { return out + (query * shape.heads + head) * shape.dim * item; }
};

// A chunk of queries and one KV head: the unit of work of one thread.
struct WorkItem {
  const AttentionPlan::Chunk* chunk;
  int64_t kv_head;
  int64_t cost() const { return (chunk->end - chunk->begin) * (chunk->key_end - chunk->key_begin); }
};

// A thread's buffers, kept across items and calls.
struct ItemBuffers {
  std::vector<char> queries;     // [rows, dim] in the compute dtype
  std::vector<float> scores;     // [rows, keys]; fp32 numerators in place
  std::vector<uint16_t> probs;   // [rows, keys] bf16 numerators
  std::vector<float> mixed;      // [rows, dim]
  std::vector<float> row_scale;  // [rows] 1 / softmax sum
};

void attend(const AttentionData& d, const AttentionPrimitives& kernels, const WorkItem& w, ItemBuffers& buf) {
  const auto& ch = *w.chunk;
  const auto& shape = d.shape;
  const int64_t c = ch.end - ch.begin, tk = ch.key_end - ch.key_begin, rows = shape.group() * c, first_head = w.kv_head * shape.group();
  const size_t row_bytes = static_cast<size_t>(shape.dim * d.item);
  buf.queries.resize(rows * row_bytes);
  buf.scores.resize(static_cast<size_t>(rows * tk));
  if (d.bf16) buf.probs.resize(buf.scores.size());
  buf.mixed.resize(static_cast<size_t>(rows * shape.dim));
  buf.row_scale.resize(static_cast<size_t>(rows));
  // The group's query heads as one [rows, dim] matrix: one GEMM against the
  // head's keys, read and packed once, instead of one per query head.
  for (int64_t r = 0; r < rows; ++r) std::memcpy(buf.queries.data() + r * row_bytes, d.q_at(ch.begin + r % c, first_head + r / c), row_bytes);
  onednn::run(kernels.scores, {{DNNL_ARG_SRC, onednn::wrap(shape.queries(rows), buf.queries.data())},
                               {DNNL_ARG_WEIGHTS, onednn::wrap(shape.keys_t(tk), d.k_at(ch.key_begin, w.kv_head))},
                               {DNNL_ARG_DST, onednn::wrap(shape.scores(rows, tk, dnnl::memory::data_type::f32), buf.scores.data())}});
  const float* bias = ch.bias.numel() > 0 ? ch.bias.data_ptr<float>() : nullptr;
  const int64_t bias_from = ch.bias_begin - ch.key_begin;
  for (int64_t r = 0; r < rows; ++r) {
    float* x = buf.scores.data() + r * tk;
    buf.row_scale[r] = softmax_numerators(x, tk, bias ? bias + (r % c) * (tk - bias_from) : nullptr, bias_from, x,
                                          d.bf16 ? buf.probs.data() + r * tk : nullptr);
  }
  const void* probs = d.bf16 ? static_cast<const void*>(buf.probs.data()) : static_cast<const void*>(buf.scores.data());
  onednn::run(kernels.mix, {{DNNL_ARG_SRC, onednn::wrap(shape.scores(rows, tk, shape.type), probs)},
                            {DNNL_ARG_WEIGHTS, onednn::wrap(shape.values(tk), d.v_at(ch.key_begin, w.kv_head))},
                            {DNNL_ARG_DST, onednn::wrap(shape.mixed(rows), buf.mixed.data())}});
  for (int64_t r = 0; r < rows; ++r) {
    const float* mixed = buf.mixed.data() + r * shape.dim;
    char* dst = d.out_at(ch.begin + r % c, first_head + r / c);
    if (d.bf16) store_scaled(mixed, buf.row_scale[r], shape.dim, reinterpret_cast<uint16_t*>(dst));
    else store_scaled(mixed, buf.row_scale[r], shape.dim, reinterpret_cast<float*>(dst));
  }
}

}  // namespace

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionPlan& plan) {
  TORCH_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous() && k.scalar_type() == q.scalar_type() &&
                  v.scalar_type() == q.scalar_type(),
              "attention: contiguous q, k, v of one dtype");
  auto out = at::empty(q.sizes(), q.options());
  const AttentionData data{{q.size(1), k.size(1), q.size(2), onednn::type_of(q.scalar_type())},
                           static_cast<const char*>(q.data_ptr()),
                           static_cast<const char*>(k.data_ptr()),
                           static_cast<const char*>(v.data_ptr()),
                           static_cast<char*>(out.data_ptr()),
                           q.element_size(),
                           q.scalar_type() == at::kBFloat16};
  // One parallel region per call, the threads taking items largest first (a
  // causal prefill's later chunks read more keys). An item's scores stay in
  // its thread's cache from matmul to softmax to matmul, and the threads meet
  // once per layer rather than at every step of every chunk.
  std::vector<WorkItem> items;
  for (const auto& ch : plan.chunks)
    for (int64_t h = 0; h < data.shape.kv_heads; ++h) items.push_back({&ch, h});
  std::stable_sort(items.begin(), items.end(), [](const WorkItem& a, const WorkItem& b) { return a.cost() > b.cost(); });
  // Every thread joins even when there are fewer items, so that an item always
  // runs inside the region on one thread: a oneDNN primitive partitions its
  // work by the threads it sees when created, and the sums must not depend on
  // the batch (answers are invariant to what else is in it).
  std::atomic<size_t> next{0};
  at::parallel_for(0, at::get_num_threads(), 1, [&](int64_t, int64_t) {
    const auto& kernels = primitives_for(data.shape);
    thread_local ItemBuffers buffers;
    for (size_t i = next++; i < items.size(); i = next++) attend(data, kernels, items[i], buffers);
  });
  return out;
}

}  // namespace tq
