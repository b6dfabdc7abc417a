#include "kernels/cpu/attention.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "batch/visibility.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/invariant_gemm.h"
#include "kernels/cpu/key_pairs.h"
#if TQ_ONEDNN
#include "kernels/cpu/onednn.h"
#endif
#include "kernels/cpu/softmax.h"

namespace tq {

namespace {
// Queries per chunk: small enough that a causal prefill skips most of the
// masked triangle, large enough for GEMM (64 measured the same).
constexpr int64_t kChunkQueries = 128;
// Upper bound on score elements per chunk (all heads) for long contexts, which
// bounds each thread's score buffers (fp32: 16 MiB).
constexpr int64_t kMaxScoreElements = int64_t{4} << 20;
}  // namespace

namespace {
// Shorter runs of unseen keys are read and masked: a hole costs a copy of the
// item's other keys and values (item_rows).
constexpr int64_t kMinHoleKeys = 32;

// The longest run of keys in [from, to) that no query sees (any[j] false), as [begin, end); whole pairs
// if paired. Empty (to, to) if shorter than kMinHoleKeys.
std::pair<int64_t, int64_t> longest_hole(const bool* any, int64_t from, int64_t to, bool paired) {
  std::pair<int64_t, int64_t> best{to, to};
  for (int64_t j = from; j < to;) {
    if (any[j]) {
      ++j;
      continue;
    }
    int64_t end = j;
    while (end < to && !any[end]) ++end;
    const int64_t b = paired ? j + j % 2 : j, e = paired ? end - end % 2 : end;
    if (e - b >= kMinHoleKeys && e - b > best.second - best.first) best = {b, e};
    j = end;
  }
  return best;
}
}  // namespace

AttentionPlan plan_attention(const QueryLayout& queries, const at::Tensor& k_pos, const at::Tensor& k_seg,
                             std::optional<int64_t> window, int64_t heads, bool paired, bool holes) {
  AttentionPlan plan;
  at::Tensor key_pos = k_pos, key_seg = k_seg;
  std::vector<int64_t> query_key_end = queries.key_end;
  if (paired) {
    auto pos = k_pos.contiguous(), seg = k_seg.contiguous();
    const int64_t n = pos.size(0);
    const auto order = pair_keys(pos.data_ptr<int64_t>(), seg.data_ptr<int64_t>(), n);
    std::vector<int64_t> gather(order.size()), place(static_cast<size_t>(n));
    for (size_t i = 0; i < order.size(); ++i) {
      gather[i] = order[i] < 0 ? n : order[i];  // a gap reads an appended row: zeros, position 0, segment -1
      if (order[i] >= 0) place[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
    }
    plan.key_order = at::tensor(at::ArrayRef<int64_t>(gather), at::TensorOptions().dtype(at::kLong));
    const auto gap = [](const at::Tensor& t, int64_t v) { return at::cat({t, at::full({1}, v, t.options())}); };
    key_pos = gap(pos, 0).index_select(0, plan.key_order);
    key_seg = gap(seg, -1).index_select(0, plan.key_order);
    for (auto& e : query_key_end) e = place[static_cast<size_t>(e - 1)] + 1;
  }
  const int64_t tq = queries.positions.size(0), tk = key_pos.size(0);
  const int64_t chunk = std::max<int64_t>(1, std::min(kChunkQueries, kMaxScoreElements / std::max<int64_t>(1, heads * tk)));
  for (int64_t a = 0; a < tq; a += chunk) {
    const int64_t b = std::min(tq, a + chunk);
    const int64_t key_end = query_key_end[b - 1];
    auto visible = visibility_mask(queries.positions.slice(0, a, b), queries.segments.slice(0, a, b), queries.parents.slice(0, a, b),
                                   queries.roots.slice(0, a, b), key_pos.slice(0, 0, key_end), key_seg.slice(0, 0, key_end), window);
    // Leading keys no query sees (behind a window), then leading keys all queries see.
    auto seen_by_any = visible.any(0), seen_by_all = visible.all(0);
    int64_t key_begin = 0, bias_begin;
    const bool* any = seen_by_any.data_ptr<bool>();
    const bool* all = seen_by_all.data_ptr<bool>();
    while (key_begin < key_end - 1 && !any[key_begin]) ++key_begin;
    if (paired) key_begin -= key_begin % 2;  // start at a pair: the key before is one no query sees
    bias_begin = key_begin;
    while (bias_begin < key_end && all[bias_begin]) ++bias_begin;
    const auto [hole_begin, hole_end] = holes ? longest_hole(any, bias_begin, key_end, paired) : std::pair<int64_t, int64_t>{key_end, key_end};
    auto tail = at::cat({visible.slice(1, bias_begin, hole_begin), visible.slice(1, hole_end, key_end)}, 1);
    auto bias = at::zeros(tail.sizes(), at::kFloat).masked_fill_(tail.logical_not(), -std::numeric_limits<float>::infinity());
    plan.chunks.push_back({a, b, key_begin, key_end, bias_begin, hole_begin, hole_end, bias});
  }
  return plan;
}

namespace {

struct AttentionShape {
  int64_t heads, kv_heads, dim;
  int64_t group() const { return heads / kv_heads; }
#if TQ_ONEDNN
  dnnl::memory::data_type type;
  // [rows, dim]: an item's queries, gathered (row = head in group * chunk + query).
  dnnl::memory::desc queries(int64_t rows) const { return {{rows, dim}, type, dnnl::memory::format_tag::ab}; }
  // [dim, keys]: one head's keys in [Tk, kv_heads, dim], transposed.
  dnnl::memory::desc keys_t(int64_t keys) const { return {{dim, keys}, type, dnnl::memory::dims{1, kv_heads * dim}}; }
  // [keys, dim]: one head's values in [Tk, kv_heads, dim].
  dnnl::memory::desc values(int64_t keys) const { return {{keys, dim}, type, dnnl::memory::dims{kv_heads * dim, 1}}; }
  dnnl::memory::desc scores(int64_t rows, int64_t keys, dnnl::memory::data_type t) const { return {{rows, keys}, t, dnnl::memory::format_tag::ab}; }
  dnnl::memory::desc mixed(int64_t rows) const { return {{rows, dim}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab}; }
#endif
};

#if TQ_ONEDNN
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

#endif  // TQ_ONEDNN

// One call's tensors as raw rows: q and out [Tq, heads, dim], k and v [Tk, kv_heads, dim].
struct AttentionData {
  AttentionShape shape;
  const char *q, *k, *v;
  char* out;
  int64_t item;  // bytes per element
  bool bf16;
  Isa isa;
  bool paired;  // keys in pairs (key_pairs.h): the mix may add two per step
  float softcap;  // > 0: scores become softcap * tanh(scores / softcap) (Gemma's attention logit soft-capping)
  const char* q_at(int64_t query, int64_t head) const { return q + (query * shape.heads + head) * shape.dim * item; }
  // A key's (or value's) row of one KV head in k (or v).
  const char* kv_at(const char* kv, int64_t key, int64_t kv_head) const { return kv + (key * shape.kv_heads + kv_head) * shape.dim * item; }
  const char* k_at(int64_t key, int64_t kv_head) const { return kv_at(k, key, kv_head); }
  const char* v_at(int64_t key, int64_t kv_head) const { return kv_at(v, key, kv_head); }
  char* out_at(int64_t query, int64_t head) const { return out + (query * shape.heads + head) * shape.dim * item; }
};

// A chunk of queries and one KV head: the unit of work of one thread.
struct WorkItem {
  const AttentionPlan::Chunk* chunk;
  int64_t kv_head;
  int64_t cost() const { return (chunk->end - chunk->begin) * chunk->keys(); }
};

// Rows of an invariant item taken at a time from scores to mix, so that their
// scores (48 x 1,025 keys: 192 KiB fp32) stay in L2 between the GEMM, the
// softmax and the mix. Measured on bench-llama (AVX-512 BF16, 2 threads), a
// warm question's item of 343 rows at once wrote and read 1.4 MB of scores per
// pass: attention was a quarter of the question's time.
constexpr int64_t kScoreRows = 48;

// A thread's buffers, kept across items and calls.
struct ItemBuffers {
  std::vector<char> queries;     // [rows, dim] in the compute dtype
  std::vector<float> scores;     // [score rows, keys]; fp32 numerators in place
  std::vector<uint16_t> probs;   // [score rows, keys] bf16 numerators, rows probs_ld apart
  std::vector<float> mixed;      // [rows, dim]
  std::vector<float> row_scale;  // [rows] 1 / softmax sum
  std::vector<char> packed_keys, packed_values;  // invariant kernel's panels, in the compute dtype
  std::vector<char> gathered;                     // [keys, dim] an item's keys or values around a hole

  // Sizes them for an item of `rows` queries and `keys` keys, `score_rows` of them scored at a time.
  void fit(int64_t rows, int64_t score_rows, int64_t keys, int64_t dim, int64_t item, bool bf16) {
    queries.resize(static_cast<size_t>(rows * dim * item));
    scores.resize(static_cast<size_t>(score_rows * keys));
    if (bf16) probs.resize(static_cast<size_t>(score_rows * (keys + 1)));  // rows up to keys + 1 apart
    mixed.resize(static_cast<size_t>(rows * dim));
    row_scale.resize(static_cast<size_t>(rows));
  }
  size_t bytes() const {
    return queries.capacity() + scores.capacity() * 4 + probs.capacity() * 2 + mixed.capacity() * 4 + row_scale.capacity() * 4 +
           packed_keys.capacity() + packed_values.capacity() + gathered.capacity();
  }
};

// The group's query heads of a chunk as one [rows, dim] matrix (row = head in group * chunk + query).
void gather_queries(const AttentionData& d, const AttentionPlan::Chunk& ch, int64_t kv_head, ItemBuffers& buf) {
  const int64_t c = ch.end - ch.begin, rows = d.shape.group() * c, first_head = kv_head * d.shape.group();
  const size_t row_bytes = static_cast<size_t>(d.shape.dim * d.item);
  for (int64_t r = 0; r < rows; ++r) std::memcpy(buf.queries.data() + r * row_bytes, d.q_at(ch.begin + r % c, first_head + r / c), row_bytes);
}

// Masked softmax numerators of rows [row0, row0 + rows), whose scores are the
// buffer's first rows: in bf16 rows probs_ld apart (zeros past the keys), or
// in place; and 1 / their sums.
void numerators(const AttentionData& d, const AttentionPlan::Chunk& ch, int64_t row0, int64_t rows, float scale, int64_t probs_ld,
                ItemBuffers& buf) {
  const int64_t c = ch.end - ch.begin, tk = ch.keys();
  const float* bias = ch.bias.numel() > 0 ? ch.bias.data_ptr<float>() : nullptr;
  const int64_t bias_from = ch.bias_begin - ch.key_begin;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t r = row0 + i;
    float* scores = buf.scores.data() + i * tk;
    if (d.softcap > 0) {
      // Scaled, capped, then masked: the bias adds after the cap, as transformers' mask does.
      for (int64_t j = 0; j < tk; ++j) scores[j] = d.softcap * std::tanh(scores[j] * scale / d.softcap);
    }
    buf.row_scale[r] = softmax_numerators(scores, tk, d.softcap > 0 ? 1.0f : scale, bias ? bias + (r % c) * (tk - bias_from) : nullptr, bias_from,
                                          d.bf16 ? buf.probs.data() + i * probs_ld : nullptr, d.isa);
    if (d.bf16) std::fill(buf.probs.data() + i * probs_ld + tk, buf.probs.data() + (i + 1) * probs_ld, uint16_t{0});
  }
}

void store_rows(const AttentionData& d, const AttentionPlan::Chunk& ch, int64_t kv_head, int64_t rows, const ItemBuffers& buf) {
  const int64_t c = ch.end - ch.begin, first_head = kv_head * d.shape.group();
  for (int64_t r = 0; r < rows; ++r) {
    const float* mixed = buf.mixed.data() + r * d.shape.dim;
    char* dst = d.out_at(ch.begin + r % c, first_head + r / c);
    if (d.bf16) store_scaled(mixed, buf.row_scale[r], d.shape.dim, reinterpret_cast<uint16_t*>(dst));
    else store_scaled(mixed, buf.row_scale[r], d.shape.dim, reinterpret_cast<float*>(dst));
  }
}

#if TQ_ONEDNN
void attend(const AttentionData& d, const AttentionPrimitives& kernels, const WorkItem& w, ItemBuffers& buf) {
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

#endif  // TQ_ONEDNN

// A KV head's rows of kv (d.k or d.v) that an item reads, as the invariant
// kernel packs them: in place from the chunk's first key, `stride` elements
// apart; or, around the chunk's hole, copied together into `gathered`.
const char* item_rows(const AttentionData& d, const char* kv, const AttentionPlan::Chunk& ch, int64_t kv_head, std::vector<char>& gathered,
                      int64_t& stride) {
  if (ch.hole_begin == ch.hole_end) {
    stride = d.shape.kv_heads * d.shape.dim;
    return d.kv_at(kv, ch.key_begin, kv_head);
  }
  const size_t row_bytes = static_cast<size_t>(d.shape.dim * d.item);
  gathered.resize(static_cast<size_t>(ch.keys()) * row_bytes);
  char* dst = gathered.data();
  for (const auto& [from, to] : {std::pair{ch.key_begin, ch.hole_begin}, std::pair{ch.hole_end, ch.key_end}})
    for (int64_t j = from; j < to; ++j, dst += row_bytes) std::memcpy(dst, d.kv_at(kv, j, kv_head), row_bytes);
  stride = d.shape.dim;
  return gathered.data();
}

// The same item on the invariant GEMM (invariant_gemm.h): a score is one
// chain over the head dimension, a mixed value one chain over the keys in
// their order, and masked keys (probability exactly 0) leave a chain as it
// was, so a query's result does not depend on which other queries or keys
// share its chunk. For the same reason the keys of a chunk's hole, which no
// query of it sees, can be left out: a chunk of question rows skips the
// earlier questions' keys (16 questions on a 977-token state, bench-llama,
// bf16, 2 threads, tq_cli: 1,907-2,038 -> 1,850-2,015 ms in three alternating
// runs, label logits bit-identical).
//
// The scores may take the vdpbf16ps family: its pairs are pairs of head
// dimensions, fixed by the head. The mix's pairs are pairs of keys, counted
// from the chunk's first key; in a paired plan they are fixed by the keys'
// segments and positions (key_pairs.h) and the mix takes the family too.
// Otherwise a query's visible keys sit at other offsets in other chunks and
// batches, so the mix stays on the FMA family, one key per step. Measured on
// bench-llama (AVX-512 BF16, 2 threads), a warm question spent 13% of its
// time in the FMA mix and its value packing.
void attend_invariant(const AttentionData& d, const WorkItem& w, ItemBuffers& buf) {
  const auto& ch = *w.chunk;
  const auto& shape = d.shape;
  const int64_t tk = ch.keys(), rows = shape.group() * (ch.end - ch.begin), dim = shape.dim;
  const Isa scores_isa = d.isa, mix_isa = d.paired ? d.isa : std::min(d.isa, Isa::Avx512);
  buf.fit(rows, std::min(rows, kScoreRows), tk, dim, d.item, d.bf16);
  gather_queries(d, ch, w.kv_head, buf);
  buf.packed_keys.resize(invariant_gemm::packed_bytes(scores_isa, d.bf16, tk, dim));
  buf.packed_values.resize(invariant_gemm::packed_bytes(mix_isa, d.bf16, dim, tk));
  int64_t stride;
  const char* keys = item_rows(d, d.k, ch, w.kv_head, buf.gathered, stride);
  invariant_gemm::pack(scores_isa, keys, d.bf16, tk, dim, stride, 1, buf.packed_keys.data());
  const char* values = item_rows(d, d.v, ch, w.kv_head, buf.gathered, stride);
  invariant_gemm::pack(mix_isa, values, d.bf16, dim, tk, 1, stride, buf.packed_values.data());
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
  // The vdpbf16ps mix over an odd number of keys runs one more, a zero
  // probability against the zero its packed values end with (the same
  // products): an even K reads the probabilities in place, where an odd one
  // has them packed first, at half the rate (48 x 1,025 x 64: 210 against
  // 450 GFLOP/s).
  const int64_t mix_k = d.paired ? tk + tk % 2 : tk;
  const void* probs = d.bf16 ? static_cast<const void*>(buf.probs.data()) : static_cast<const void*>(buf.scores.data());
  for (int64_t r0 = 0; r0 < rows; r0 += kScoreRows) {
    const int64_t n = std::min(kScoreRows, rows - r0);
    invariant_gemm::multiply(scores_isa, buf.queries.data() + r0 * dim * d.item, dim, d.bf16, buf.packed_keys.data(), n, dim, tk,
                             buf.scores.data(), tk, false);
    numerators(d, ch, r0, n, scale, mix_k, buf);
    invariant_gemm::multiply(mix_isa, probs, mix_k, d.bf16, buf.packed_values.data(), n, mix_k, dim, buf.mixed.data() + r0 * dim, dim, false);
  }
  store_rows(d, ch, w.kv_head, rows, buf);
}

}  // namespace

namespace {
// Paired: x's rows in the plan's order, a zero row at each gap (index
// x.size(0)). Row copies: at::cat of a zero row and index_select took 0.23 ms
// a layer for a warm question's 1,025 keys and values (bench-llama, bf16).
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

// Per thread, buffers up to this size stay for the next step (a 1,000-token
// prefill of bench-llama needs about 5 MiB); larger ones, taken by a long
// state or many questions, are returned when the step ends, not after each
// layer: returned and taken again at every layer, the 10 MiB per thread of a
// state with 16 questions on bench-llama cost 126,000 page faults a forward
// (20% of its time here; perf).
constexpr size_t kKeptBufferBytes = size_t{8} << 20;
std::atomic<int64_t> buffer_bytes{0};

// A thread's buffers, counted in buffer_bytes while the thread lives. Each engine has its own
// engine thread and so its own OpenMP team: when an engine closes, its threads end, and what
// their buffers held leaves the count with them.
struct CountedBuffers {
  ItemBuffers buffers;
  int64_t counted = 0;
  ~CountedBuffers() { buffer_bytes -= counted; }
  // Brings the count up to date, having returned oversized buffers if `trim`.
  void settle(bool trim) {
    if (trim && buffers.bytes() > kKeptBufferBytes) buffers = ItemBuffers{};
    const auto now = static_cast<int64_t>(buffers.bytes());
    buffer_bytes += now - counted;
    counted = now;
  }
};
thread_local CountedBuffers kept;
}  // namespace

int64_t attention_buffer_bytes() { return buffer_bytes.load(); }

int64_t attention_buffer_kept_bytes() { return static_cast<int64_t>(kKeptBufferBytes); }

void trim_attention_buffers() {
  at::parallel_for(0, at::get_num_threads(), 1, [](int64_t, int64_t) { kept.settle(true); });
}

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionPlan& plan, bool invariant, Isa isa,
                     double softcap) {
  TORCH_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous() && k.scalar_type() == q.scalar_type() &&
                  v.scalar_type() == q.scalar_type(),
              "attention: contiguous q, k, v of one dtype");
  const bool paired = plan.key_order.defined();
  for (const auto& ch : plan.chunks) TORCH_CHECK(invariant || ch.hole_begin == ch.hole_end, "attention: holes are for the invariant kernels");
  TORCH_CHECK(!paired || (invariant && isa == Isa::Avx512Bf16 && q.scalar_type() == at::kBFloat16),
              "attention: paired keys are for the invariant bf16 kernels at avx512-bf16");
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
  std::stable_sort(items.begin(), items.end(), [](const WorkItem& a, const WorkItem& b) { return a.cost() > b.cost(); });
  // Every thread joins even when there are fewer items, so that an item always
  // runs inside the region on one thread: a oneDNN primitive partitions its
  // work by the threads it sees when created.
  std::atomic<size_t> next{0};
  at::parallel_for(0, at::get_num_threads(), 1, [&](int64_t, int64_t) {
    auto& buffers = kept.buffers;
    if (invariant) {
      for (size_t i = next++; i < items.size(); i = next++) attend_invariant(data, items[i], buffers);
    } else {
#if TQ_ONEDNN
      const auto& kernels = primitives_for(data.shape);
      for (size_t i = next++; i < items.size(); i = next++) attend(data, kernels, items[i], buffers);
#endif
    }
    kept.settle(false);
  });
  return out;
}

}  // namespace tq
