// The unit of work of the CPU attention (attention.h): one chunk of a step's queries against one
// KV head, on one thread. What both implementations of an item share: the call's tensors as raw
// rows, the item, the thread's buffers, and the steps around the two matmuls (queries gathered,
// masked softmax numerators, rows stored).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/cpu/attention/attention_plan.h"
#include "kernels/cpu/isa.h"
#if TQ_ONEDNN
#include "kernels/cpu/gemm/onednn.h"
#endif

// Internal to the CPU attention's files.
namespace tq::cpu_attention {

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

// One call's tensors as raw rows: q and out [Tq, heads, dim], k and v [rows, kv_heads, dim].
struct AttentionData {
  AttentionShape shape;
  const char *q, *k, *v;
  const int64_t* key_rows;  // the row of k and v each key place reads, -1 a gap (zeros); null: place i is row i
  char* out;
  int64_t item;  // bytes per element
  bool bf16;
  Isa isa;
  bool paired;  // keys in pairs (key_pairs.h): the mix may add two per step
  float softcap;  // > 0: scores become softcap * tanh(scores / softcap) (Gemma's attention logit soft-capping)
  const char* q_at(int64_t query, int64_t head) const { return q + (query * shape.heads + head) * shape.dim * item; }
  // Row `row`'s KV head in k (or v).
  const char* kv_at(const char* kv, int64_t row, int64_t kv_head) const { return kv + (row * shape.kv_heads + kv_head) * shape.dim * item; }
  const char* k_at(int64_t row, int64_t kv_head) const { return kv_at(k, row, kv_head); }
  const char* v_at(int64_t row, int64_t kv_head) const { return kv_at(v, row, kv_head); }
  char* out_at(int64_t query, int64_t head) const { return out + (query * shape.heads + head) * shape.dim * item; }
};

// A chunk of queries and one KV head: the unit of work of one thread.
struct WorkItem {
  const AttentionPlan::Chunk* chunk;
  int64_t kv_head;
  int64_t cost() const { return (chunk->end - chunk->begin) * chunk->keys(); }
};

// A thread's buffers, kept across items and calls.
struct ItemBuffers {
  std::vector<char> queries;     // [rows, dim] in the compute dtype
  std::vector<float> scores;     // [score rows, keys]; fp32 numerators in place
  std::vector<uint16_t> probs;   // [score rows, keys] bf16 numerators, rows probs_ld apart
  std::vector<float> mixed;      // [rows, dim]
  std::vector<float> row_scale;  // [rows] 1 / softmax sum
  std::vector<char> packed_keys, packed_values;  // invariant kernel's panels, in the compute dtype
  std::vector<const void*> rows;                  // [keys] where an item's keys or values lie, in its key order
  std::vector<char> zero_row;                     // [dim] zeros: a gap's key and value
  // Whose keys and values the panels hold, within the call that packed them (attention.cpp forgets it as each call
  // starts: a later call's tensors may sit at the same addresses). Chunks of queries over the same keys (every chunk of
  // a vision tower's full attention) pack them once per thread rather than once per chunk.
  struct PackedKeys {
    int64_t kv_head, key_begin, key_end, hole_begin, hole_end;
    bool operator==(const PackedKeys& o) const {
      return kv_head == o.kv_head && key_begin == o.key_begin && key_end == o.key_end && hole_begin == o.hole_begin && hole_end == o.hole_end;
    }
  };
  std::optional<PackedKeys> packed_for;

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
           packed_keys.capacity() + packed_values.capacity() + rows.capacity() * sizeof(void*) + zero_row.capacity();
  }
};

// The group's query heads of a chunk as one [rows, dim] matrix (row = head in group * chunk + query).
void gather_queries(const AttentionData& d, const AttentionPlan::Chunk& ch, int64_t kv_head, ItemBuffers& buf);

// Masked softmax numerators of rows [row0, row0 + rows), whose scores are the
// buffer's first rows: in bf16 rows probs_ld apart (zeros past the keys), or
// in place; and 1 / their sums.
void numerators(const AttentionData& d, const AttentionPlan::Chunk& ch, int64_t row0, int64_t rows, float scale, int64_t probs_ld,
                ItemBuffers& buf);

// The item's mixed rows, each scaled by 1 / its softmax sum, into the output's rows.
void store_rows(const AttentionData& d, const AttentionPlan::Chunk& ch, int64_t kv_head, int64_t rows, const ItemBuffers& buf);

// One item's attention, on oneDNN (attention_onednn.cpp; builds with oneDNN only) or on the
// invariant GEMM (attention_invariant.cpp).
void attend_onednn(const AttentionData& d, const WorkItem& w, ItemBuffers& buf);
void attend_invariant(const AttentionData& d, const WorkItem& w, ItemBuffers& buf);

// The calling thread's buffers (attention_buffers.cpp), kept across items and calls; `settle`
// brings the count of their bytes up to date, having returned oversized ones if `trim`.
ItemBuffers& thread_item_buffers();
void settle_thread_buffers(bool trim);

}  // namespace tq::cpu_attention
