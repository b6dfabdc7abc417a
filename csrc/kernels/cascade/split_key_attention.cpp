// A tier read in place (the state tier; the questions' own, planned apart:
// batch/cascade_plan.h): the step's q through the tier's query rows, the keys
// and values through its slots in the KV cache's store, no copy of either
// first, under the tier's mask. The arithmetic is
// kernels/math/split_key_math.h's, for the CUDA kernel
// (kernels/cuda/split_key_attention.cu) and, on the CPU, its host twin: so the
// CPU runs and checks every part but the launch. A state's own rows (a
// prefill's hundreds, causal) take the other implementation: one warp per row
// and head suits a few rows over many keys, not a long run over itself.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cascade/partial_attention.h"
#include "kernels/math/split_key_math.h"
#if TQ_CUDA
#include <c10/cuda/CUDAStream.h>

#include "kernels/cuda/launch_check.h"
#include "kernels/cuda/split_key_attention.h"
#endif

namespace tq {
namespace {

// The host twin's rows. Its std::fma is correctly rounded on every machine, so a clone compiled for CPUs with FMA
// instructions, chosen at load where the CPU has them, gives the same bits with each fma one instruction; otherwise every
// one went through a call to libm's fmaf, the most of the twin's time (bench/README.md, "Set-up and suite time").
__attribute__((target_clones("fma", "default"), flatten)) void attend_bf16_row(const split_key::SplitKeyArgs& a, int seq, int row, int head) {
  split_key::attend_row<uint16_t>(a, seq, row, head);
}
__attribute__((target_clones("fma", "default"), flatten)) void attend_fp32_row(const split_key::SplitKeyArgs& a, int seq, int row, int head) {
  split_key::attend_row<float>(a, seq, row, head);
}

void check_operands(const at::Tensor& q, const at::Tensor& k_store, const at::Tensor& v_store) {
  const auto dtype = k_store.scalar_type();
  if (dtype != at::kBFloat16 && dtype != at::kFloat) throw std::invalid_argument("split-key attention computes bf16 and fp32 tiers, not " + std::string(c10::toString(dtype)));
  if (v_store.scalar_type() != dtype) throw std::invalid_argument("split-key attention: keys and values in other dtypes");
  if (!k_store.is_contiguous() || !v_store.is_contiguous() || k_store.sizes() != v_store.sizes())
    throw std::invalid_argument("split-key attention reads [slots, kv_heads, dim] stores, contiguous and alike");
  if (q.dim() != 3 || q.stride(2) != 1 || q.size(2) != k_store.size(2) || q.size(2) > split_key::kMaxDim || q.size(1) % k_store.size(1) != 0)
    throw std::invalid_argument("split-key attention: q must be [rows, heads, dim] with dim at most " + std::to_string(split_key::kMaxDim) +
                                ", its elements adjacent, and heads a multiple of the store's");
}

class SplitKeyAttention : public PartialAttention {
 public:
  explicit SplitKeyAttention(double softcap) : softcap_(static_cast<float>(softcap)) {}
  const char* name() const override { return "split-key"; }
  bool reads_in_place() const override { return true; }

  // q: the step's, taken to the store's dtype (the CPU's kernels give fp32 rows beside a bf16 cache; the fused
  // ones, as on CUDA, rows in the cache's dtype already); k_store, v_store: where the tier's key rows point.
  PartialResult operator()(const at::Tensor& step_q, const at::Tensor& k_store, const at::Tensor& v_store, const DeviceTier& dl) const override {
    return attend_together(step_q, k_store, v_store, {&dl})[0];
  }

  // The tiers in one launch on CUDA (up to split_key::kLaunchTiers a launch); on the CPU, each by its host twin.
  // Every key read where it lies in the store: the step's own keys too (`step` unused).
  std::vector<PartialResult> attend_together(const at::Tensor& step_q, const at::Tensor& k_store, const at::Tensor& v_store,
                                             const std::vector<const DeviceTier*>& tiers, const StepKeys& /*step*/ = {}) const override {
    const auto q = step_q.to(k_store.scalar_type());
    check_operands(q, k_store, v_store);
    std::vector<PartialResult> parts;
    std::vector<split_key::SplitKeyArgs> args;
    for (const DeviceTier* dl : tiers) {
      const int64_t rows = dl->tier->total_q();
      parts.push_back({at::empty({rows, q.size(1), q.size(2)}, q.options()), at::empty({q.size(1), rows}, q.options().dtype(at::kFloat))});
      args.push_back(args_of(q, k_store, v_store, *dl, parts.back()));
    }
    if (q.is_cpu()) {
      for (const auto& a : args) on_host(a);
    } else {
      for (size_t first = 0; first < args.size(); first += split_key::kLaunchTiers) {
        split_key::SplitKeyLaunch launch{};
        launch.tiers = static_cast<int>(std::min<size_t>(split_key::kLaunchTiers, args.size() - first));
        for (int t = 0; t < launch.tiers; ++t) launch.tier[t] = args[first + t];
        on_device(launch);
      }
    }
    return parts;
  }

 private:
  split_key::SplitKeyArgs args_of(const at::Tensor& q, const at::Tensor& k_store, const at::Tensor& v_store, const DeviceTier& dl,
                                  const PartialResult& into) const {
    split_key::SplitKeyArgs a{};
    a.rows = static_cast<int>(dl.tier->total_q());
    a.heads = static_cast<int>(q.size(1));
    a.kv_heads = static_cast<int>(k_store.size(1));
    a.dim = static_cast<int>(q.size(2));
    a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(a.dim)));
    a.softcap = softcap_;
    a.q = q.data_ptr();
    a.q_row_stride = q.stride(0);
    a.q_head_stride = q.stride(1);
    a.q_rows = dl.q_rows.data_ptr<int64_t>();
    a.cu_q = dl.cu_q.data_ptr<int32_t>();
    a.cu_k = dl.cu_k.data_ptr<int32_t>();
    a.sequences = dl.tier->sequences();
    a.max_rows = dl.tier->max_q;
    a.causal = dl.tier->causal;
    a.window_left = dl.tier->window_left;
    a.k_rows = dl.k_rows.data_ptr<int64_t>();
    a.k_store = k_store.data_ptr();
    a.v_store = v_store.data_ptr();
    a.bf16 = q.scalar_type() == at::kBFloat16;
    a.out = into.out.data_ptr();
    a.lse = into.lse.data_ptr<float>();
    return a;
  }

  // The kernel's grid walked on the host (split_key::block_item): each block's items, the blocks spread over threads.
  static void on_host(const split_key::SplitKeyArgs& a) {
    const int warps = split_key::kBlockWarps, groups = split_key::item_groups(a, warps);
    at::parallel_for(0, static_cast<int64_t>(a.sequences) * a.kv_heads * groups, 1, [&](int64_t begin, int64_t end) {
      for (int64_t block = begin; block < end; ++block) {
        const int seq = static_cast<int>(block / (a.kv_heads * groups)), kv_head = static_cast<int>(block / groups % a.kv_heads);
        for (int warp = 0; warp < warps; ++warp) {
          const auto item = split_key::block_item(a, seq, kv_head, static_cast<int>(block % groups), warp, warps);
          if (!item.active) break;
          if (a.bf16) attend_bf16_row(a, seq, item.row, item.head);
          else attend_fp32_row(a, seq, item.row, item.head);
        }
      }
    });
  }

  static void on_device(const split_key::SplitKeyLaunch& launch) {
#if TQ_CUDA
    cuda::check_launch("split-key attention", [&] { return cuda::launch_split_key_attention(launch, c10::cuda::getCurrentCUDAStream()); });
#else
    (void)launch;
    throw std::invalid_argument("split-key attention off the CPU needs a CUDA build");
#endif
  }

  float softcap_;
};

}  // namespace

bool split_key_takes(const CascadeTier& tier) { return tier.name != "own"; }

std::unique_ptr<PartialAttention> split_key_partial_attention(double softcap) { return std::make_unique<SplitKeyAttention>(softcap); }

}  // namespace tq
