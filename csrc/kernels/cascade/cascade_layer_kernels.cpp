#include "kernels/cascade/cascade_layer_kernels.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "batch/cascade_plan.h"
#include "batch/fixed_cascade.h"
#include "batch/step_buckets.h"
#include "kernels/cascade/attention_merge.h"
#include "kernels/cascade/partial_attention.h"
#include "kernels/cascade/step_upload.h"

namespace tq {
namespace {

// The implementation for a device: the reference on the CPU; on CUDA the attention kernels in
// libtorch, or ATen's ops where scores are soft-capped (FlashAttention-2 cannot).
std::unique_ptr<PartialAttention> partial_attention_for(at::Device device, at::ScalarType dtype, double softcap) {
  if (device.is_cpu()) return reference_partial_attention(softcap);
  if (softcap > 0) return aten_partial_attention(softcap);
#if TQ_CUDA
  return flash_partial_attention(dtype);
#else
  (void)dtype;
  throw std::invalid_argument("a cascade off the CPU needs a CUDA build");
#endif
}

// Whether a step of `queries` rows over `keys` keys is a bucket's (batch/step_buckets.h): a step
// whose launches a CUDA graph may replay.
bool bucket_shaped(int64_t queries, int64_t keys) {
  const auto bucket = bucket_for(queries, keys);
  return bucket && bucket->tokens == queries && bucket->keys == keys;
}

// The implementations of a step's tiers: `varlen` for every tier, but where `split_key` is set, that for the
// tiers it takes (split_key_takes). Which a tier gets depends on its kind alone: a row's kernel, so its bits,
// never on the rest of the step.
struct TierKernels {
  std::unique_ptr<PartialAttention> varlen, split_key;
  const PartialAttention& of(const CascadeTier& tier) const { return split_key && split_key_takes(tier) ? *split_key : *varlen; }
};

// A step's cascade: the plan, each tier's arrays and the merge's, made once on the host; the step moves them to
// the device with its own (arrays()). Planned with the keys' slots (QueryLayout::key_slots), each tier's keys are
// read in the KV cache's store: the tiers' key rows are made slots on the host, with the rest of the arrays. Where a
// kernel would gather a tier's keys out of the store (FlashAttention-2 reads one array of keys), it reads them where
// the layer wrote them beside the store if they are the step's own rows in one run (a prefill's state, a question's
// own rows: StepKeys), else each sequence's in place where they are one run of slots (a state's blocks in order:
// store_runs).
class CascadeAttention : public StepAttention {
 public:
  CascadeAttention(CascadePlan plan, TierKernels kernels, at::Device device, bool fixed, const QueryLayout& queries)
      : plan_(std::move(plan)), kernels_(std::move(kernels)), merge_(prepare_merge(plan_, device)), fixed_(fixed),
        in_store_(queries.key_slots.defined()) {
    const auto& key_slots = queries.key_slots;
    TORCH_CHECK(!in_store_ || key_slots.is_cpu(), "a cascade is planned on the host: its key slots too");
    const auto slots = in_store_ ? key_slots.contiguous() : key_slots;
    for (const auto& tier : plan_.tiers) {
      const PartialAttention& kernel = kernels_.of(tier);
      tiers_.push_back(kernel.prepare(tier));
      if (in_store_) {  // each key row made its slot, in place
        const int64_t* slot = slots.data_ptr<int64_t>();
        int64_t* row = tiers_.back().k_rows.data_ptr<int64_t>();
        for (int64_t i = 0, n = tiers_.back().k_rows.numel(); i < n; ++i) {
          if (row[i] < 0 || row[i] >= slots.numel()) throw std::logic_error("a cascade tier's key row outside the step's keys");
          row[i] = slot[row[i]];
        }
      }
      auto& dl = tiers_.back();
      // In the fixed form only rows from the step's first are read in place (the own tier's, every step): the launch
      // shape holds q_first, so a graph's launches never depend on where a tier's rows lie.
      if (fixed_ && dl.q_first != 0) dl.q_first = -1;
      // Where a kernel would gather the tier's keys: where the layer wrote them if they are the step's own (likewise
      // from its first row in the fixed form), which holds whatever blocks they lie in; else in their runs of the store.
      if (in_store_ && !kernel.reads_in_place()) {
        dl.k_first = step_keys_first(tier, queries.key_rows);
        if (fixed_ && dl.k_first != 0) dl.k_first = -1;
        if (dl.k_first < 0 && kernel.reads_store_runs()) store_runs(dl);
      }
    }
  }

  int64_t step_key_rows() const override {
    int64_t rows = 0;
    for (const auto& tier : tiers_)
      if (tier.k_first >= 0) rows = std::max<int64_t>(rows, tier.k_first + tier.tier->total_k());
    return rows;
  }

  std::vector<at::Tensor*> arrays() override { return step_arrays(tiers_, merge_); }

  at::Tensor operator()(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) const override {
    if (in_store_) throw std::logic_error("a cascade planned over the KV cache's slots reads the store (over_store), not a step's keys");
    return attend(q, k, v);
  }

  // key_slots: the ones planned with, on the device; the tiers' own copies are read.
  at::Tensor over_store(const at::Tensor& q, const at::Tensor& k_store, const at::Tensor& v_store, const at::Tensor& key_slots,
                        const StepKeys& written) const override {
    return in_store_ ? attend(q, k_store, v_store, written) : StepAttention::over_store(q, k_store, v_store, key_slots);
  }

  std::vector<int64_t> launch_shape() const override {
    if (!fixed_) return {};
    std::vector<int64_t> shape{static_cast<int64_t>(merge_.begin.size()), static_cast<int64_t>(merge_.entry.size()),
                               static_cast<int64_t>(merge_.written.size())};
    for (size_t i = 0; i < tiers_.size(); ++i) {
      const CascadeTier& l = plan_.tiers[i];
      shape.insert(shape.end(), {l.causal, l.window_left, l.sequences(), l.total_q(), l.total_k(), l.max_q, l.max_k, tiers_[i].q_first,
                                 tiers_[i].k_first, tiers_[i].k_start.defined()});
    }
    return shape;
  }

  // The host's part: the arrays (arrays()) come with the step's one copy.
  void refill_from(const StepAttention& other) override {
    const auto& from = dynamic_cast<const CascadeAttention&>(other);
    if (from.launch_shape() != launch_shape() || launch_shape().empty() || from.in_store_ != in_store_)
      throw std::logic_error("refill_from: another launch shape");
    // Assigned element by element: tiers_ keep pointing at plan_'s tiers.
    plan_ = from.plan_;
    merge_.begin = from.merge_.begin;
    merge_.entry = from.merge_.entry;
    merge_.written = from.merge_.written;
  }

 private:
  // k, v: where the tiers' key rows point (the step's keys, or the store); step: the step's own keys, where written.
  at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const StepKeys& step = {}) const {
    if (!tiers_.empty() && tiers_[0].cu_q.device() != q.device())
      throw std::logic_error("a cascade's arrays are still on the host: the step moves them (StepAttention::arrays)");
    std::vector<PartialResult> parts(tiers_.size());
    // Each implementation's tiers together (split-key attention launches its as one kernel).
    for (const PartialAttention* kernel : {kernels_.varlen.get(), kernels_.split_key.get()}) {
      std::vector<size_t> taken;
      std::vector<const DeviceTier*> tiers;
      for (size_t i = 0; i < tiers_.size(); ++i) {
        const CascadeTier& l = *tiers_[i].tier;
        if (l.total_q() == 0 || &kernels_.of(l) != kernel) continue;
        // What the tier's launch takes from the host, for the CUDA graph check on the CPU (runner/launch_record.h).
        RECORD_FUNCTION(kernel->name(), std::vector<c10::IValue>({q, k, v, tiers_[i].cu_q, tiers_[i].cu_k, l.causal, int64_t{l.window_left},
                                                                  int64_t{l.max_q}, int64_t{l.max_k}, tiers_[i].k_first, tiers_[i].k_start.defined()}));
        taken.push_back(i);
        tiers.push_back(&tiers_[i]);
      }
      if (tiers.empty()) continue;
      auto results = kernel->attend_together(q, k, v, tiers, step);
      for (size_t j = 0; j < taken.size(); ++j) parts[taken[j]] = std::move(results[j]);
    }
    // A tier the fixed form holds for a step without its rows launches nothing; no merge entry reads it.
    for (size_t i = 0; i < tiers_.size(); ++i)
      if (tiers_[i].tier->total_q() == 0) parts[i] = {at::empty({0, q.size(1), q.size(2)}, q.options()), at::empty({q.size(1), 0}, q.options().dtype(at::kFloat))};
    // The first tier holding every row from the step's first (the own tier, but where the questions' runs are
    // planned apart): the merge writes into its result.
    const bool first_holds_every_row = !tiers_.empty() && tiers_[0].q_first == 0 && tiers_[0].tier->total_q() == q.size(0);
    return merge_attention(merge_, parts, q.scalar_type(), first_holds_every_row);
  }

  CascadePlan plan_;  // tiers_ point into it
  TierKernels kernels_;
  DeviceMerge merge_;
  std::vector<DeviceTier> tiers_;
  bool fixed_;     // plan_ is in the fixed form (batch/fixed_cascade.h)
  bool in_store_;  // tiers_' key rows are the KV cache's slots
};

class CascadeLayerKernels : public LayerKernels {
 public:
  CascadeLayerKernels(std::unique_ptr<LayerKernels> inner, at::ScalarType dtype, bool fixed_shapes, StateAttention state)
      : inner_(std::move(inner)), dtype_(dtype), fixed_shapes_(fixed_shapes), state_(state) {}
  std::string name() const override { return inner_->name(); }
  at::Device device() const override { return inner_->device(); }
  std::unique_ptr<Linear> linear(const at::Tensor& weight, const at::Tensor& bias) const override { return inner_->linear(weight, bias); }
  std::unique_ptr<Linear> unquantized_linear(const at::Tensor& weight) const override { return inner_->unquantized_linear(weight); }
  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, at::ScalarType out_dtype) const override {
    return inner_->rms_norm(x, weight, eps, out_dtype);
  }
  at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& positions,
                  at::ScalarType out_dtype) const override {
    return inner_->rope(x, cos, sin, positions, out_dtype);
  }
  at::Tensor gated_mul(at::Tensor& gate, const at::Tensor& up, GateActivation act) const override { return inner_->gated_mul(gate, up, act); }
  at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) const override {
    return inner_->layer_norm(x, w, b, eps);
  }
  at::Tensor& quick_gelu_(at::Tensor& x) const override { return inner_->quick_gelu_(x); }
  const FusedRowOps* fused_rows() const override { return inner_->fused_rows(); }
  const FewRowsGemm* few_rows_gemm() const override { return inner_->few_rows_gemm(); }
  std::unique_ptr<StepAttention> plan_attention(const QueryLayout& queries, const at::Tensor& key_positions, const at::Tensor& key_segments,
                                                std::optional<int64_t> window, int64_t /*heads*/, double logit_softcap) const override {
    // Split-key attention takes the questions' own runs: planned apart from the states' (cascade_plan.h).
    const bool split_key = state_ == StateAttention::SplitKey;
    auto plan = plan_cascade(queries, key_positions, key_segments, window, /*questions_apart=*/split_key);
    TierKernels kernels{partial_attention_for(device(), dtype_, logit_softcap), split_key ? split_key_partial_attention(logit_softcap) : nullptr};
    const int64_t rows = queries.positions.size(0), keys = key_positions.size(0);
    // A bucket's step, in the fixed form where its implementations launch alike at any plan (split-key always does).
    const bool fixed = fixed_shapes_ && bucket_shaped(rows, keys) && kernels.varlen->replays(plan) &&
                       fix_cascade_shape(plan, static_cast<int32_t>(rows), static_cast<int32_t>(keys));
    return std::make_unique<CascadeAttention>(std::move(plan), std::move(kernels), device(), fixed, queries);
  }
  // Not causal: the tiers' bottom-right causal masks cannot say it (a vision tower's attention).
  std::unique_ptr<StepAttention> plan_segment_attention(const at::Tensor& segments, int64_t heads) const override {
    return inner_->plan_segment_attention(segments, heads);
  }

 private:
  std::unique_ptr<LayerKernels> inner_;
  at::ScalarType dtype_;
  bool fixed_shapes_;
  StateAttention state_;
};

}  // namespace

std::unique_ptr<LayerKernels> cascade_layer_kernels(std::unique_ptr<LayerKernels> kernels, at::ScalarType dtype, bool fixed_shapes,
                                                   StateAttention state) {
  return std::make_unique<CascadeLayerKernels>(std::move(kernels), dtype, fixed_shapes, state);
}

}  // namespace tq
