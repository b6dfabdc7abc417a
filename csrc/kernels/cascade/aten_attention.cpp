// A tier on ATen's device-generic ops: the tier padded to its longest
// sequence, one batched matmul for the scores, soft-capping, the mask, the
// log-sum-exp and the mix. It pays for the padding, and is the CUDA path of a
// family whose scores are soft-capped (Gemma 3), which FlashAttention-2 in
// libtorch cannot do. It runs on the CPU too, where the tests compare it with
// the reference.
#include <cmath>
#include <vector>

#include "kernels/cascade/partial_attention.h"

namespace tq {
namespace {

class AtenPartialAttention : public PartialAttention {
 public:
  explicit AtenPartialAttention(double softcap) : softcap_(softcap) {}
  const char* name() const override { return "aten"; }
  bool replays(const CascadePlan& /*plan*/) const override { return false; }

  DeviceTier prepare(const CascadeTier& tier) const override {
    DeviceTier dl = PartialAttention::prepare(tier);
    const int32_t seqs = tier.sequences(), mq = tier.max_q, mk = tier.max_k;
    // -1: padding, resolved to the appended zero row when the step's sizes are known.
    std::vector<int64_t> q_pad(static_cast<size_t>(seqs) * mq, -1), k_pad(static_cast<size_t>(seqs) * mk, -1);
    auto mask = at::zeros({seqs, mq, mk}, at::kBool);
    auto* m = mask.data_ptr<bool>();
    for (int32_t s = 0; s < seqs; ++s) {
      for (int32_t j = tier.cu_k[s]; j < tier.cu_k[s + 1]; ++j) k_pad[static_cast<size_t>(s) * mk + (j - tier.cu_k[s])] = j;
      for (int32_t r = tier.cu_q[s]; r < tier.cu_q[s + 1]; ++r) {
        const int32_t i = r - tier.cu_q[s];
        q_pad[static_cast<size_t>(s) * mq + i] = r;
        const KeyRange range = visible_keys(tier, s, i);
        for (int32_t j = range.first; j <= range.last; ++j) m[(static_cast<int64_t>(s) * mq + i) * mk + j] = true;
      }
    }
    dl.q_pad = at::tensor(at::ArrayRef<int64_t>(q_pad), at::kLong);
    dl.k_pad = at::tensor(at::ArrayRef<int64_t>(k_pad), at::kLong);
    dl.mask = mask;
    return dl;
  }

  PartialResult operator()(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const DeviceTier& dl) const override {
    const CascadeTier& tier = *dl.tier;
    const int64_t seqs = tier.sequences(), heads = q.size(1), dim = q.size(2), group = heads / k.size(1);
    // Padding reads row Tq (Tk): a zero row appended.
    auto padded = [](const at::Tensor& x, const at::Tensor& index, int64_t per_seq, int64_t seqs) {
      auto rows = at::cat({x.to(at::kFloat), at::zeros({1, x.size(1), x.size(2)}, x.options().dtype(at::kFloat))});
      auto where = at::where(index.lt(0), at::full_like(index, x.size(0)), index);
      return rows.index_select(0, where).view({seqs, per_seq, x.size(1), x.size(2)}).permute({0, 2, 1, 3});  // [S, heads, n, dim]
    };
    auto qs = padded(q, dl.q_pad, tier.max_q, seqs);
    auto ks = padded(k, dl.k_pad, tier.max_k, seqs).repeat_interleave(group, 1);
    auto vs = padded(v, dl.k_pad, tier.max_k, seqs).repeat_interleave(group, 1);
    auto scores = at::matmul(qs, ks.transpose(2, 3)).mul_(1.0 / std::sqrt(static_cast<double>(dim)));
    if (softcap_ > 0) scores = scores.div_(softcap_).tanh_().mul_(softcap_);
    scores.masked_fill_(dl.mask.logical_not().unsqueeze(1), -INFINITY);
    auto lse = scores.logsumexp(-1, /*keepdim=*/true);                     // [S, heads, max_q, 1]
    auto probs = scores.sub_(lse).exp_().nan_to_num_(0.0);                  // a row without keys: 0
    auto out = at::matmul(probs, vs).permute({0, 2, 1, 3}).reshape({seqs * tier.max_q, heads, dim});
    const auto unpad = dl.row_seq * tier.max_q + dl.row_in_seq;  // each tier row's padded place
    return {out.index_select(0, unpad), lse.squeeze(-1).permute({1, 0, 2}).reshape({heads, seqs * tier.max_q}).index_select(1, unpad)};
  }

 private:
  double softcap_;
};

}  // namespace

std::unique_ptr<PartialAttention> aten_partial_attention(double softcap) { return std::make_unique<AtenPartialAttention>(softcap); }

}  // namespace tq
