// The reference partial attention: what a tier computes, written as plainly
// as llm.c writes attention_forward, in fp32 on the CPU. Row i of a sequence
// sees the keys visible_keys() gives; its scores q.k / sqrt(dim) (soft-capped),
// their maximum m, the output sum_j exp(s_j - m) v_j / sum_j exp(s_j - m), and
// the log-sum-exp m + log(sum_j exp(s_j - m)).
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "kernels/cascade/partial_attention.h"

namespace tq {
namespace {

class ReferencePartialAttention : public PartialAttention {
 public:
  explicit ReferencePartialAttention(double softcap) : softcap_(static_cast<float>(softcap)) {}
  const char* name() const override { return "reference"; }

  bool reads_store_runs() const override { return true; }

  PartialResult operator()(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in, const DeviceTier& dl) const override {
    const CascadeTier& tier = *dl.tier;
    const auto q = q_in.to(at::kFloat).contiguous();
    const auto k = in_order(k_in, dl).to(at::kFloat).contiguous(), v = in_order(v_in, dl).to(at::kFloat).contiguous();
    const int64_t heads = q.size(1), dim = q.size(2), kv_heads = k.size(1), group = heads / kv_heads, rows = tier.total_q();
    auto out = at::zeros({rows, heads, dim}, at::kFloat);
    auto lse = at::full({heads, rows}, -INFINITY, at::kFloat);
    const float* qp = q.data_ptr<float>();
    const float* kp = k.data_ptr<float>();
    const float* vp = v.data_ptr<float>();
    float* op = out.data_ptr<float>();
    float* lp = lse.data_ptr<float>();
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
    // The sequence of each tier row.
    std::vector<int32_t> seq_of(static_cast<size_t>(rows));
    for (int32_t s = 0; s < tier.sequences(); ++s)
      for (int32_t r = tier.cu_q[s]; r < tier.cu_q[s + 1]; ++r) seq_of[r] = s;

    at::parallel_for(0, rows * heads, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> scores;
      for (int64_t item = begin; item < end; ++item) {
        const int64_t r = item / heads, h = item % heads, kh = h / group;
        const int32_t s = seq_of[r];
        const KeyRange range = visible_keys(tier, s, static_cast<int32_t>(r - tier.cu_q[s]));
        if (range.count() == 0) continue;
        const float* query = qp + (r * heads + h) * dim;
        auto key_row = [&](int32_t j) { return static_cast<int64_t>(tier.cu_k[s] + j) * kv_heads + kh; };
        scores.assign(static_cast<size_t>(range.count()), 0.0f);
        float top = -INFINITY;
        for (int32_t j = range.first; j <= range.last; ++j) {
          const float* key = kp + key_row(j) * dim;
          float dot = 0.0f;
          for (int64_t d = 0; d < dim; ++d) dot += query[d] * key[d];
          float score = dot * scale;
          if (softcap_ > 0) score = softcap_ * std::tanh(score / softcap_);
          scores[j - range.first] = score;
          top = std::max(top, score);
        }
        float sum = 0.0f;
        float* o = op + (r * heads + h) * dim;
        for (int32_t j = range.first; j <= range.last; ++j) {
          const float p = std::exp(scores[j - range.first] - top);
          sum += p;
          const float* value = vp + key_row(j) * dim;
          for (int64_t d = 0; d < dim; ++d) o[d] += p * value[d];
        }
        for (int64_t d = 0; d < dim; ++d) o[d] /= sum;
        lp[h * rows + r] = top + std::log(sum);
      }
    });
    return {out, lse};
  }

 private:
  // The tier's keys in its order: as given, or, where it reads runs of the store (k_start), taken out of the store by
  // the runs' arrays, as FlashAttention-2 reads them: a wrong run gives other keys here too.
  static at::Tensor in_order(const at::Tensor& keys, const DeviceTier& dl) {
    if (!dl.k_start.defined()) return keys;
    const CascadeTier& tier = *dl.tier;
    const int32_t *start = dl.k_start.data_ptr<int32_t>(), *used = dl.k_used.data_ptr<int32_t>();
    auto index = at::zeros({tier.total_k()}, at::kLong);
    int64_t* slot = index.data_ptr<int64_t>();
    for (int32_t s = 0; s < tier.sequences(); ++s) {
      if (tier.cu_q[s + 1] == tier.cu_q[s]) continue;  // never read
      if (used[s] != tier.cu_k[s + 1] - tier.cu_k[s]) throw std::logic_error("a tier's run of the store holds other than its sequence's keys");
      for (int32_t j = 0; j < used[s]; ++j) slot[tier.cu_k[s] + j] = start[s] + j;
    }
    return keys.index_select(0, index);
  }

  float softcap_;
};

}  // namespace

namespace {

// Where rows are one ascending run r, r + 1, ...: r (the tier's rows then a view of the step's); else -1.
int64_t first_of_run(const std::vector<int32_t>& rows) {
  for (size_t i = 1; i < rows.size(); ++i)
    if (rows[i] != rows[0] + static_cast<int32_t>(i)) return -1;
  return rows.empty() ? -1 : rows[0];
}

// A tier's arrays, written in place: a step's tiers are prepared before every launch, a warm question's too, and a
// tensor op costs the host microseconds.
at::Tensor tensor(size_t n, at::ScalarType type) { return at::empty({static_cast<int64_t>(n)}, at::TensorOptions().dtype(type)); }
template <typename T>
at::Tensor copied(const std::vector<int32_t>& v, at::ScalarType type) {
  auto t = tensor(v.size(), type);
  std::copy(v.begin(), v.end(), t.data_ptr<T>());
  return t;
}
at::Tensor i64(const std::vector<int32_t>& v) { return copied<int64_t>(v, at::kLong); }
at::Tensor i32(const std::vector<int32_t>& v) { return copied<int32_t>(v, at::kInt); }

}  // namespace

DeviceTier PartialAttention::prepare(const CascadeTier& tier) const {
  DeviceTier dl;
  dl.tier = &tier;
  dl.q_rows = i64(tier.q_rows);
  dl.q_first = first_of_run(tier.q_rows);
  dl.k_rows = i64(tier.k_rows);
  dl.cu_q = i32(tier.cu_q);
  dl.cu_k = i32(tier.cu_k);
  dl.row_seq = tensor(tier.q_rows.size(), at::kLong);
  dl.row_in_seq = tensor(tier.q_rows.size(), at::kLong);
  int64_t *seq = dl.row_seq.data_ptr<int64_t>(), *place = dl.row_in_seq.data_ptr<int64_t>();
  for (int32_t s = 0; s < tier.sequences(); ++s)
    for (int32_t r = tier.cu_q[s]; r < tier.cu_q[s + 1]; ++r) {
      seq[r] = s;
      place[r] = r - tier.cu_q[s];
    }
  return dl;
}

bool store_runs(DeviceTier& dl) {
  const CascadeTier& tier = *dl.tier;
  const auto slots = dl.k_rows.contiguous();
  const int64_t* slot = slots.data_ptr<int64_t>();
  std::vector<int32_t> start(static_cast<size_t>(tier.sequences()) + 1, 0), used(static_cast<size_t>(tier.sequences()), 0);
  for (int32_t s = 0; s < tier.sequences(); ++s) {
    if (tier.cu_q[s + 1] == tier.cu_q[s] || tier.cu_k[s + 1] == tier.cu_k[s]) continue;
    const int64_t first = slot[tier.cu_k[s]];
    for (int32_t j = tier.cu_k[s]; j < tier.cu_k[s + 1]; ++j)
      if (slot[j] != first + (j - tier.cu_k[s]) || slot[j] > std::numeric_limits<int32_t>::max()) return false;
    start[static_cast<size_t>(s)] = static_cast<int32_t>(first);
    used[static_cast<size_t>(s)] = tier.cu_k[s + 1] - tier.cu_k[s];
  }
  dl.k_start = i32(start);
  dl.k_used = i32(used);
  return true;
}

int64_t step_keys_first(const CascadeTier& tier, const std::vector<int32_t>& key_rows) {
  if (key_rows.empty()) return -1;
  int64_t first = -1;
  for (int32_t s = 0; s < tier.sequences(); ++s) {
    if (tier.cu_q[s + 1] == tier.cu_q[s]) continue;
    for (int32_t j = tier.cu_k[s]; j < tier.cu_k[s + 1]; ++j) {
      const int32_t row = key_rows[static_cast<size_t>(tier.k_rows[j])];
      if (first < 0) first = row - j;
      if (row < 0 || first < 0 || row != first + j) return -1;
    }
  }
  return first;
}

PartialResult attend_tier(const PartialAttention& impl, const at::Tensor& q, const at::Tensor& k_source, const at::Tensor& v_source,
                           const DeviceTier& tier, const StepKeys& step) {
  if (impl.reads_in_place()) return impl(q, k_source, v_source, tier);
  const auto rows = tier.q_first >= 0 ? q.narrow(0, tier.q_first, tier.tier->total_q()) : q.index_select(0, tier.q_rows);
  if (tier.k_start.defined()) return impl(rows, k_source, v_source, tier);  // the store whole: each sequence's run read there
  if (tier.k_first >= 0 && step.k.defined()) {
    const int64_t keys = tier.tier->total_k();
    return impl(rows, step.k.narrow(0, tier.k_first, keys), step.v.narrow(0, tier.k_first, keys), tier);
  }
  return impl(rows, k_source.index_select(0, tier.k_rows), v_source.index_select(0, tier.k_rows), tier);
}

std::vector<PartialResult> PartialAttention::attend_together(const at::Tensor& q, const at::Tensor& k_source, const at::Tensor& v_source,
                                                             const std::vector<const DeviceTier*>& tiers, const StepKeys& step) const {
  std::vector<PartialResult> parts;
  for (const DeviceTier* tier : tiers) parts.push_back(attend_tier(*this, q, k_source, v_source, *tier, step));
  return parts;
}

std::unique_ptr<PartialAttention> reference_partial_attention(double softcap) { return std::make_unique<ReferencePartialAttention>(softcap); }

}  // namespace tq
