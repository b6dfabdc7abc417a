// An item of the CPU attention (attention_item.h) on oneDNN: the group's query heads against the KV
// head's keys in one GEMM, the masked softmax, the mix in another. Fast, but oneDNN picks its
// kernels by the shape, so a query's result may depend on what shares its chunk: the default,
// batch-invariant path is attention_invariant.cpp.
#include "kernels/cpu/attention/attention_item.h"

#if TQ_ONEDNN
#include <cmath>
#include <map>
#include <tuple>

namespace tq::cpu_attention {

namespace {

// Attention's two matmuls as oneDNN primitives, with the row and key counts as
// runtime dimensions: one pair per model shape serves every item. Keys and
// values are read in place through strides from [Tk, kv_heads, dim]; scores
// come out in fp32 with the 1/sqrt(dim) scale applied, the mix in fp32 before
// the softmax's division.
struct AttentionPrimitives {
  dnnl::matmul scores, mix;
};

// Per thread: each worker of the parallel loop in attention() creates and runs
// its own (as in packed_linear.cpp, a primitive runs on the thread that created
// it). Created inside the parallel region, they run on their one thread; the
// lookup is a map's, once per item.
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

}  // namespace

void attend_onednn(const AttentionData& d, const WorkItem& w, ItemBuffers& buf) {
  const auto& kernels = primitives_for(d.shape);
  const auto& ch = *w.chunk;
  const auto& shape = d.shape;
  const int64_t c = ch.end - ch.begin, tk = ch.key_end - ch.key_begin, rows = shape.group() * c;
  buf.fit(rows, rows, tk, shape.dim, d.item, d.bf16);
  // One GEMM of the group's query heads against the head's keys, read and packed once.
  gather_queries(d, ch, w.kv_head, buf);
  onednn::run(kernels.scores, {{DNNL_ARG_SRC, onednn::wrap(shape.queries(rows), buf.queries.data())},
                               {DNNL_ARG_WEIGHTS, onednn::wrap(shape.keys_t(tk), d.k_at(ch.key_begin, w.kv_head))},
                               {DNNL_ARG_DST, onednn::wrap(shape.scores(rows, tk, dnnl::memory::data_type::f32), buf.scores.data())}});
  numerators(d, ch, 0, rows, 1.0f, tk, buf);  // the primitive applied the scale
  const void* probs = d.bf16 ? static_cast<const void*>(buf.probs.data()) : static_cast<const void*>(buf.scores.data());
  onednn::run(kernels.mix, {{DNNL_ARG_SRC, onednn::wrap(shape.scores(rows, tk, shape.type), probs)},
                            {DNNL_ARG_WEIGHTS, onednn::wrap(shape.values(tk), d.v_at(ch.key_begin, w.kv_head))},
                            {DNNL_ARG_DST, onednn::wrap(shape.mixed(rows), buf.mixed.data())}});
  store_rows(d, ch, w.kv_head, rows, buf);
}

}  // namespace tq::cpu_attention
#endif  // TQ_ONEDNN
