#include "attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "onednn.h"
#include "softmax.h"

namespace tq {

namespace {
// Queries per chunk: small enough that a causal prefill skips most of the
// masked triangle and the score block stays in cache, large enough for GEMM.
constexpr int64_t kChunkQueries = 128;
// Upper bound on score elements per chunk for long contexts (fp32: 16 MiB).
// Below glibc's largest mmap threshold (32 MiB), freed score blocks are reused
// from the heap instead of being mapped and page-faulted afresh per chunk.
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
// serves every chunk. Query heads sharing a KV head form one batch entry
// (GQA), queries are read in place from [Tq, heads, dim], keys and values from
// [Tk, kv_heads, dim], and the output is written in place: no permuted copies.
// Scores come out in fp32 with the 1/sqrt(dim) scale applied.
struct AttentionPrimitives {
  dnnl::matmul scores, mix;
};

struct AttentionShape {
  int64_t heads, kv_heads, dim;
  dnnl::memory::data_type type;
  int64_t group() const { return heads / kv_heads; }
  // [kv_heads, group, rows, dim] views of [T, heads, dim] (queries, output).
  dnnl::memory::desc per_head(int64_t rows) const {
    return {{kv_heads, group(), rows, dim}, type, dnnl::memory::dims{group() * dim, dim, heads * dim, 1}};
  }
  // [kv_heads, 1, dim, keys]: keys of [Tk, kv_heads, dim], transposed.
  dnnl::memory::desc keys_t(int64_t keys) const { return {{kv_heads, 1, dim, keys}, type, dnnl::memory::dims{dim, dim, 1, kv_heads * dim}}; }
  // [kv_heads, 1, keys, dim]: values of [Tk, kv_heads, dim].
  dnnl::memory::desc values(int64_t keys) const { return {{kv_heads, 1, keys, dim}, type, dnnl::memory::dims{dim, dim, kv_heads * dim, 1}}; }
  dnnl::memory::desc scores(int64_t rows, int64_t keys, dnnl::memory::data_type t) const {
    return {{kv_heads, group(), rows, keys}, t, dnnl::memory::format_tag::abcd};
  }
};

const AttentionPrimitives& primitives_for(const AttentionShape& shape) {
  // Per thread, as in packed_linear.cpp: a primitive runs on the thread that created it.
  thread_local std::map<std::tuple<int64_t, int64_t, int64_t, int>, AttentionPrimitives> cache;
  const auto key = std::make_tuple(shape.heads, shape.kv_heads, shape.dim, static_cast<int>(shape.type));
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const auto any = DNNL_RUNTIME_DIM_VAL;
  const auto f32 = dnnl::memory::data_type::f32;
  dnnl::primitive_attr scaled;
  scaled.set_output_scales(0, {static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.dim)))});
  dnnl::matmul::primitive_desc scores({shape.per_head(any), shape.keys_t(any), shape.scores(any, any, f32)}, scaled, onednn::cpu());
  dnnl::matmul::primitive_desc mix({shape.scores(any, any, shape.type), shape.values(any), shape.per_head(any)}, onednn::cpu());
  return cache.emplace(key, AttentionPrimitives{dnnl::matmul(scores), dnnl::matmul(mix)}).first->second;
}

}  // namespace

at::Tensor attention(const at::Tensor& q_all, const at::Tensor& k, const at::Tensor& v, const AttentionPlan& plan) {
  TORCH_CHECK(q_all.is_contiguous() && k.is_contiguous() && v.is_contiguous() && k.scalar_type() == q_all.scalar_type() &&
                  v.scalar_type() == q_all.scalar_type(),
              "attention: contiguous q, k, v of one dtype");
  const AttentionShape shape{q_all.size(1), k.size(1), q_all.size(2), onednn::type_of(q_all.scalar_type())};
  const auto& kernels = primitives_for(shape);
  const int64_t row = shape.heads * shape.dim, key_row = shape.kv_heads * shape.dim;
  const auto* q_data = static_cast<const char*>(q_all.data_ptr());
  const auto* k_data = static_cast<const char*>(k.data_ptr());
  const auto* v_data = static_cast<const char*>(v.data_ptr());
  const int64_t item = q_all.element_size();
  auto out = at::empty(q_all.sizes(), q_all.options());
  auto* out_data = static_cast<char*>(out.data_ptr());
  for (const auto& ch : plan.chunks) {
    const int64_t c = ch.end - ch.begin, tk = ch.key_end - ch.key_begin;
    auto scores = at::empty({shape.kv_heads, shape.group(), c, tk}, at::kFloat);
    onednn::run(kernels.scores, {{DNNL_ARG_SRC, onednn::wrap(shape.per_head(c), q_data + ch.begin * row * item)},
                                 {DNNL_ARG_WEIGHTS, onednn::wrap(shape.keys_t(tk), k_data + ch.key_begin * key_row * item)},
                                 {DNNL_ARG_DST, onednn::wrap(shape.scores(c, tk, dnnl::memory::data_type::f32), scores.data_ptr())}});
    if (ch.bias.numel() > 0) scores.slice(3, ch.bias_begin - ch.key_begin).add_(ch.bias);
    auto probs = softmax_lastdim(scores, q_all.scalar_type());
    onednn::run(kernels.mix, {{DNNL_ARG_SRC, onednn::wrap(shape.scores(c, tk, shape.type), probs.data_ptr())},
                              {DNNL_ARG_WEIGHTS, onednn::wrap(shape.values(tk), v_data + ch.key_begin * key_row * item)},
                              {DNNL_ARG_DST, onednn::wrap(shape.per_head(c), out_data + ch.begin * row * item)}});
  }
  return out;
}

}  // namespace tq
