#include "kernels/cpu/attention/attention_item.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/rows/softmax.h"

namespace tq::cpu_attention {

void gather_queries(const AttentionData& d, const AttentionPlan::Chunk& ch, int64_t kv_head, ItemBuffers& buf) {
  const int64_t c = ch.end - ch.begin, rows = d.shape.group() * c, first_head = kv_head * d.shape.group();
  const size_t row_bytes = static_cast<size_t>(d.shape.dim * d.item);
  for (int64_t r = 0; r < rows; ++r) std::memcpy(buf.queries.data() + r * row_bytes, d.q_at(ch.begin + r % c, first_head + r / c), row_bytes);
}

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

}  // namespace tq::cpu_attention
