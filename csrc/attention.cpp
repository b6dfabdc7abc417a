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

// The two matmuls of attention as oneDNN primitives over strided views, with
// the query and key counts as runtime dimensions: one pair per model shape
// serves every chunk. A work item is one chunk of queries and one KV head: its
// query heads (GQA's group) form the batch, queries are read in place from
// [Tq, heads, dim], keys and values from [Tk, kv_heads, dim], and the output is
// written in place: no permuted copies. Scores come out in fp32 with the
// 1/sqrt(dim) scale applied.
struct AttentionPrimitives {
  dnnl::matmul scores, mix;
};

struct AttentionShape {
  int64_t heads, kv_heads, dim;
  dnnl::memory::data_type type;
  int64_t group() const { return heads / kv_heads; }
  // [rows, dim]: an item's queries, gathered head-major (row = head in group * chunk + query).
  dnnl::memory::desc queries(int64_t rows) const { return {{rows, dim}, type, dnnl::memory::format_tag::ab}; }
  // [dim, keys]: one head's keys in [Tk, kv_heads, dim], transposed.
  dnnl::memory::desc keys_t(int64_t keys) const { return {{dim, keys}, type, dnnl::memory::dims{1, kv_heads * dim}}; }
  // [keys, dim]: one head's values in [Tk, kv_heads, dim].
  dnnl::memory::desc values(int64_t keys) const { return {{keys, dim}, type, dnnl::memory::dims{kv_heads * dim, 1}}; }
  dnnl::memory::desc scores(int64_t rows, int64_t keys, dnnl::memory::data_type t) const { return {{rows, keys}, t, dnnl::memory::format_tag::ab}; }
  // [rows, dim] fp32: the mix before the softmax's division.
  dnnl::memory::desc mixed(int64_t rows) const { return {{rows, dim}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab}; }
};

// Per thread: each worker of the parallel loop below creates and runs its own
// (as in packed_linear.cpp, a primitive runs on the thread that created it).
// Created inside the parallel region, they run on their one thread.
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

// dst[j] = src[j] * scale, in fp32 or bf16.
__attribute__((target_clones("avx512f", "avx2", "default"))) void store_scaled(const float* src, float scale, int64_t n, float* dst) {
  for (int64_t j = 0; j < n; ++j) dst[j] = src[j] * scale;
}
__attribute__((target_clones("avx512f", "avx2", "default"))) void store_scaled(const float* src, float scale, int64_t n, uint16_t* dst) {
  for (int64_t j = 0; j < n; ++j) {
    const float v = src[j] * scale;
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    dst[j] = bf16_bits(bits);
  }
}

struct WorkItem {
  const AttentionPlan::Chunk* chunk;
  int64_t kv_head;
  int64_t cost() const { return (chunk->end - chunk->begin) * (chunk->key_end - chunk->key_begin); }
};

}  // namespace

at::Tensor attention(const at::Tensor& q_all, const at::Tensor& k, const at::Tensor& v, const AttentionPlan& plan) {
  TORCH_CHECK(q_all.is_contiguous() && k.is_contiguous() && v.is_contiguous() && k.scalar_type() == q_all.scalar_type() &&
                  v.scalar_type() == q_all.scalar_type(),
              "attention: contiguous q, k, v of one dtype");
  const AttentionShape shape{q_all.size(1), k.size(1), q_all.size(2), onednn::type_of(q_all.scalar_type())};
  const bool bf16 = q_all.scalar_type() == at::kBFloat16;
  const int64_t row = shape.heads * shape.dim, key_row = shape.kv_heads * shape.dim, group = shape.group();
  const auto* q_data = static_cast<const char*>(q_all.data_ptr());
  const auto* k_data = static_cast<const char*>(k.data_ptr());
  const auto* v_data = static_cast<const char*>(v.data_ptr());
  const int64_t item = q_all.element_size();
  auto out = at::empty(q_all.sizes(), q_all.options());
  auto* out_data = static_cast<char*>(out.data_ptr());

  // One parallel region per call, the threads taking items largest first: a
  // causal prefill's later chunks read more keys. Each item's scores stay in
  // its thread's cache from matmul to softmax to matmul, and the threads meet
  // once per layer instead of at every step of every chunk.
  std::vector<WorkItem> items;
  for (const auto& ch : plan.chunks)
    for (int64_t h = 0; h < shape.kv_heads; ++h) items.push_back({&ch, h});
  std::stable_sort(items.begin(), items.end(), [](const WorkItem& a, const WorkItem& b) { return a.cost() > b.cost(); });
  // Every thread joins even when there are fewer items, so that an item always
  // runs inside the region on one thread: a oneDNN primitive partitions its
  // work by the threads it sees when created, and the sums must not depend on
  // the batch (answers are invariant to what else is in it).
  std::atomic<size_t> next{0};
  at::parallel_for(0, at::get_num_threads(), 1, [&](int64_t, int64_t) {
    const auto& kernels = primitives_for(shape);
    thread_local std::vector<float> scores, mixed, row_scale;
    thread_local std::vector<uint16_t> probs_bf16;
    thread_local std::vector<char> queries;
    for (size_t i = next++; i < items.size(); i = next++) {
      const auto& ch = *items[i].chunk;
      const int64_t h = items[i].kv_head, c = ch.end - ch.begin, tk = ch.key_end - ch.key_begin, rows = group * c;
      scores.resize(static_cast<size_t>(rows * tk));
      if (bf16) probs_bf16.resize(scores.size());
      mixed.resize(static_cast<size_t>(rows * shape.dim));
      row_scale.resize(static_cast<size_t>(rows));
      void* probs = bf16 ? static_cast<void*>(probs_bf16.data()) : static_cast<void*>(scores.data());
      const int64_t first_head = h * group;
      // The group's query heads as one [rows, dim] matrix: one GEMM against the
      // head's keys, read and packed once, instead of one per query head.
      queries.resize(static_cast<size_t>(rows * shape.dim * item));
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(queries.data() + r * shape.dim * item, q_data + ((ch.begin + r % c) * row + (first_head + r / c) * shape.dim) * item,
                    static_cast<size_t>(shape.dim * item));
      onednn::run(kernels.scores, {{DNNL_ARG_SRC, onednn::wrap(shape.queries(rows), queries.data())},
                                   {DNNL_ARG_WEIGHTS, onednn::wrap(shape.keys_t(tk), k_data + (ch.key_begin * key_row + h * shape.dim) * item)},
                                   {DNNL_ARG_DST, onednn::wrap(shape.scores(rows, tk, dnnl::memory::data_type::f32), scores.data())}});
      const float* bias = ch.bias.numel() > 0 ? ch.bias.data_ptr<float>() : nullptr;
      const int64_t bias_from = ch.bias_begin - ch.key_begin;
      for (int64_t r = 0; r < rows; ++r) {  // r = head in group * c + query in chunk
        float* x = scores.data() + r * tk;
        row_scale[r] = softmax_numerators(x, tk, bias ? bias + (r % c) * (tk - bias_from) : nullptr, bias_from, x,
                                          bf16 ? probs_bf16.data() + r * tk : nullptr);
      }
      onednn::run(kernels.mix, {{DNNL_ARG_SRC, onednn::wrap(shape.scores(rows, tk, shape.type), probs)},
                                {DNNL_ARG_WEIGHTS, onednn::wrap(shape.values(tk), v_data + (ch.key_begin * key_row + h * shape.dim) * item)},
                                {DNNL_ARG_DST, onednn::wrap(shape.mixed(rows), mixed.data())}});
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t at = (ch.begin + r % c) * row + (first_head + r / c) * shape.dim;
        if (bf16) store_scaled(mixed.data() + r * shape.dim, row_scale[r], shape.dim, reinterpret_cast<uint16_t*>(out_data) + at);
        else store_scaled(mixed.data() + r * shape.dim, row_scale[r], shape.dim, reinterpret_cast<float*>(out_data) + at);
      }
    }
  });
  return out;
}

}  // namespace tq
