// A tier on the attention kernels a CUDA libtorch 2.x carries (the GPU's form
// of the cascade; docs/gpu.md): FlashAttention-2's varlen forward for bf16 and
// fp16 (native GQA, bottom-right causal, a left window), and the CUTLASS
// memory-efficient kernel for fp32 (no GQA: key heads repeated; bottom-right
// causal; its LSE is [sequences, heads, padded rows], taken here to the
// merge's [heads, rows]). A windowed fp32 tier runs on the ATen form. Neither
// soft-caps scores: a family that does takes aten_partial_attention.
//
// Facts of libtorch 2.11 this relies on (../shared/research/libtorch-2.11-gpu-facts.md):
// FA2's varlen LSE is [heads, total_q]; its op takes at most these 14 arguments (seqused_k the last: no block table),
// and with seqused_k a sequence's keys are seqused_k[b] from cu_seqlens_k[b], which need not be cumulative
// (flash-attention's flash_attn/src/block_info.h: the key offset is cu_seqlens_k[b], the key count seqused_k[b]);
// max_seqlen_q is passed as at least 2, which keeps a one-row tier off the split-key path; the
// memory-efficient kernel's LSE for a row without keys is 0, never read (the merge skips such rows).
// Only a CUDA build compiles it (a CPU build's engine never asks for it: cascade_layer_kernels.cpp).
#if TQ_CUDA
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "kernels/cascade/partial_attention.h"

namespace tq {

#if TQ_CUDA && TORCH_VERSION_MAJOR >= 2
namespace {

// The LSE's shape is a fact of the libtorch build, not of our code: checked at every call, before the merge
// indexes it as [heads, rows] (a libtorch that returned it padded would have the merge read past its end).
void check_lse(const at::Tensor& lse, std::initializer_list<int64_t> expected, const char* kernel, bool at_least_last) {
  bool ok = lse.dim() == static_cast<int64_t>(expected.size()) && lse.scalar_type() == at::kFloat;
  for (int64_t d = 0; ok && d < lse.dim(); ++d) {
    const int64_t want = expected.begin()[d];
    ok = (d + 1 == lse.dim() && at_least_last) ? lse.size(d) >= want : lse.size(d) == want;
  }
  if (ok) return;
  std::ostringstream message;
  message << kernel << " returned its log-sum-exp as " << lse.sizes() << " " << lse.scalar_type() << ", not float " << at::IntArrayRef(expected)
          << (at_least_last ? " (the last at least)" : "") << ": this libtorch's layout differs from the one the merge reads";
  throw std::runtime_error(message.str());
}

class FlashPartialAttention : public PartialAttention {
 public:
  explicit FlashPartialAttention(at::ScalarType dtype) : dtype_(dtype), windowed_fp32_(aten_partial_attention(0)) {}
  const char* name() const override { return dtype_ == at::kFloat ? "memory-efficient" : "flash"; }

  // A windowed fp32 tier runs on the ATen form, which pads.
  bool replays(const CascadePlan& plan) const override {
    return dtype_ != at::kFloat || std::none_of(plan.tiers.begin(), plan.tiers.end(), [](const auto& l) { return l.window_left >= 0; });
  }

  // FlashAttention-2 reads a sequence's keys from its own offset (cu_seqlens_k) for its own count (seqused_k).
  bool reads_store_runs() const override { return dtype_ != at::kFloat; }

  DeviceTier prepare(const CascadeTier& tier) const override {
    if (dtype_ == at::kFloat && tier.window_left >= 0) return windowed_fp32_->prepare(tier);
    return PartialAttention::prepare(tier);
  }

  PartialResult operator()(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const DeviceTier& dl) const override {
    const CascadeTier& tier = *dl.tier;
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(2)));
    const int64_t max_q = std::max<int32_t>(2, tier.max_q), max_k = tier.max_k;
    if (dtype_ != at::kFloat) {
      // Keys in runs of the store (k_start): k and v are the store whole, each sequence's keys from its run's first slot.
      const bool runs = dl.k_start.defined();
      auto result = at::_flash_attention_forward(q, k, v, dl.cu_q, runs ? dl.k_start : dl.cu_k, max_q, max_k, /*dropout_p=*/0.0, tier.causal,
                                                 /*return_debug_mask=*/false, scale, tier.window_left >= 0 ? std::optional<int64_t>(tier.window_left) : std::nullopt,
                                                 std::optional<int64_t>(-1), runs ? std::optional<at::Tensor>(dl.k_used) : std::nullopt);
      check_lse(std::get<1>(result), {q.size(1), q.size(0)}, "FlashAttention-2", false);  // [heads, total_q]
      return {std::get<0>(result), std::get<1>(result)};
    }
    if (tier.window_left >= 0) return (*windowed_fp32_)(q, k, v, dl);
    const int64_t group = q.size(1) / k.size(1);
    auto result = at::_efficient_attention_forward(q.unsqueeze(0), k.repeat_interleave(group, 1).unsqueeze(0), v.repeat_interleave(group, 1).unsqueeze(0),
                                                   /*bias=*/std::nullopt, dl.cu_q, dl.cu_k, max_q, max_k, /*dropout_p=*/0.0,
                                                   /*custom_mask_type=*/tier.causal ? 2 : 0, /*compute_log_sumexp=*/true, scale);
    auto out = std::get<0>(result).squeeze(0);
    auto lse = std::get<1>(result);  // [sequences, heads, padded rows]
    check_lse(lse, {tier.sequences(), q.size(1), max_q}, "the memory-efficient kernel", true);
    const int64_t heads = lse.size(1), padded = lse.size(2);
    auto place = dl.row_seq * padded + dl.row_in_seq;
    return {out, lse.permute({1, 0, 2}).reshape({heads, -1}).index_select(1, place)};
  }

 private:
  at::ScalarType dtype_;
  std::unique_ptr<PartialAttention> windowed_fp32_;
};

}  // namespace

std::unique_ptr<PartialAttention> flash_partial_attention(at::ScalarType dtype) { return std::make_unique<FlashPartialAttention>(dtype); }
#else
std::unique_ptr<PartialAttention> flash_partial_attention(at::ScalarType) {
  throw std::invalid_argument("the flash attention kernels need a CUDA libtorch 2.x");
}
#endif

}  // namespace tq
#endif  // TQ_CUDA
