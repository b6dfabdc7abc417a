// An item of the CPU attention (attention_item.h) on the batch-invariant GEMM: the default path,
// whose answers are the same bits whatever shares the step.
#include "kernels/cpu/attention/attention_item.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "kernels/cpu/gemm/invariant_gemm.h"

namespace tq::cpu_attention {

namespace {

// Rows of an item taken at a time from scores to mix, so that their scores
// (48 x 1,025 keys: 192 KiB fp32) stay in L2 between the GEMM, the softmax and
// the mix: an item's rows all at once wrote and read its scores through memory
// (bench/README.md, "CPU attention").
constexpr int64_t kScoreRows = 48;

// A KV head's rows of kv (d.k or d.v) that an item reads, in its key order around the chunk's hole, where they lie
// (the step's keys, or the KV cache's slots through d.key_rows): the invariant kernel packs them from there, with no
// copy between. A gap reads the buffers' zero row.
void item_rows(const AttentionData& d, const char* kv, const AttentionPlan::Chunk& ch, int64_t kv_head, ItemBuffers& buf) {
  buf.zero_row.resize(static_cast<size_t>(d.shape.dim * d.item));
  buf.rows.clear();
  for (const auto& [from, to] : {std::pair{ch.key_begin, ch.hole_begin}, std::pair{ch.hole_end, ch.key_end}})
    for (int64_t j = from; j < to; ++j) {
      const int64_t row = d.key_rows ? d.key_rows[j] : j;
      buf.rows.push_back(row < 0 ? static_cast<const void*>(buf.zero_row.data()) : d.kv_at(kv, row, kv_head));
    }
}

// An item on the invariant GEMM (invariant_gemm.h): a score is one
// chain over the head dimension, a mixed value one chain over the keys in
// their order, and masked keys (probability exactly 0) leave a chain as it
// was, so a query's result does not depend on which other queries or keys
// share its chunk. For the same reason the keys of a chunk's hole, which no
// query of it sees, can be left out: a chunk of question rows skips the
// earlier questions' keys, with the same bits.
//
// In bf16 both GEMMs add two k per step (vdpbf16ps, or the FMA family in its
// order: docs/arithmetic.md). The scores' pairs are pairs of head dimensions,
// fixed by the head. The mix's pairs are pairs of keys, counted from the
// chunk's first key, so a bf16 plan is paired: its pairs are fixed by the
// keys' segments and positions (key_pairs.h), whatever the chunk or batch.
// fp32 adds one k per step and needs no pairs.
}  // namespace

void attend_invariant(const AttentionData& d, const WorkItem& w, ItemBuffers& buf) {
  const auto& ch = *w.chunk;
  const auto& shape = d.shape;
  const int64_t tk = ch.keys(), rows = shape.group() * (ch.end - ch.begin), dim = shape.dim;
  const Isa scores_isa = d.isa, mix_isa = d.isa;
  buf.fit(rows, std::min(rows, kScoreRows), tk, dim, d.item, d.bf16);
  gather_queries(d, ch, w.kv_head, buf);
  const ItemBuffers::PackedKeys these{w.kv_head, ch.key_begin, ch.key_end, ch.hole_begin, ch.hole_end};
  if (!(buf.packed_for == these)) {
    buf.packed_keys.resize(invariant_gemm::packed_bytes(scores_isa, d.bf16, tk, dim));
    buf.packed_values.resize(invariant_gemm::packed_bytes(mix_isa, d.bf16, dim, tk));
    item_rows(d, d.k, ch, w.kv_head, buf);
    invariant_gemm::pack(scores_isa, buf.rows.data(), /*along_k=*/true, d.bf16, tk, dim, buf.packed_keys.data());
    item_rows(d, d.v, ch, w.kv_head, buf);
    invariant_gemm::pack(mix_isa, buf.rows.data(), /*along_k=*/false, d.bf16, dim, tk, buf.packed_values.data());
    buf.packed_for = these;
  }
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
  // The vdpbf16ps mix over an odd number of keys runs one more, a zero
  // probability against the zero its packed values end with (the same
  // products): an even K reads the probabilities in place, where an odd one
  // has them packed first, at about half the rate.
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

}  // namespace tq::cpu_attention
