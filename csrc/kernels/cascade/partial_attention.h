// One tier of a cascade (batch/cascade_plan.h) computed on its own: softmax
// attention of the tier's query rows over its key rows, under the tier's
// mask, returning each row's output and the log-sum-exp of its scaled scores,
// which the merge (attention_merge.h) needs to combine tiers. One interface,
// several implementations:
//   reference  the CPU's: fp32, written plainly, a loop per row and head;
//   aten       ATen's device-generic ops, per tier padded to its longest
//              sequence (soft-capping: what Gemma 3 takes on CUDA);
//   flash      CUDA: FlashAttention-2 (bf16, fp16) or the memory-efficient
//              kernel (fp32), both compiled into a CUDA libtorch 2.x;
//   split-key  a tier of few rows a sequence (the state tier, the questions'
//              own) read in place, our own kernel on CUDA and its host twin on
//              the CPU (bf16, fp32).
#pragma once
#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "batch/cascade_plan.h"
#include "kernels/layer_kernels.h"

namespace tq {

// A tier's index arrays as tensors, made on the host once per step (prepare) and read at every layer on the
// device, where step_upload.h moves them with the rest of the step's in one copy.
struct DeviceTier {
  const CascadeTier* tier;
  at::Tensor q_rows;  // int64: the tier's query rows in the step's queries
  // Where those rows are one run of the step's, [q_first, q_first + total_q), they are read in place (a view), not
  // gathered; -1 otherwise (in the fixed form, unless they start at the step's first: cascade_layer_kernels.cpp).
  int64_t q_first = -1;
  at::Tensor k_rows;  // int64: the tier's keys where the cascade gathers them: the step's keys, or the KV cache's slots
  // Where those keys are the step's own rows k_first, k_first + 1, ... (step_keys_first), they are read where the layer
  // wrote them (StepKeys, a view), not gathered; -1 otherwise (in the fixed form, unless they start at the step's first).
  int64_t k_first = -1;
  // Where each of its sequences with rows reads its keys as one ascending run of the KV cache's slots (a state's blocks
  // in order: store_runs), the tier reads them there in place: k_start [sequences + 1] int32, each sequence's first slot
  // (the last entry unused), and k_used [sequences] int32, its keys (FlashAttention-2's cu_seqlens_k and seqused_k).
  // Undefined otherwise.
  at::Tensor k_start, k_used;
  at::Tensor cu_q, cu_k;      // int32 [sequences + 1]
  at::Tensor row_seq, row_in_seq;  // int64 [total_q]: each tier row's sequence and place in it
  // aten: the tier padded to [sequences, max_q] rows and [sequences, max_k] keys (-1: padding),
  // and its mask [sequences, max_q, max_k] bool. Undefined elsewhere.
  at::Tensor q_pad, k_pad, mask;
};

struct PartialResult {
  at::Tensor out;  // [total_q, heads, dim], fp32 or q's dtype
  at::Tensor lse;  // [heads, total_q] fp32, natural log; any value where a row sees no key
};

class PartialAttention {
 public:
  virtual ~PartialAttention() = default;
  virtual const char* name() const = 0;
  // A tier's arrays on the host (and what this implementation needs besides).
  virtual DeviceTier prepare(const CascadeTier& tier) const;
  // q: [total_q, heads, dim], k, v: [total_k, kv_heads, dim]: the tier's own rows, keys and values in its order
  // (attend_tier takes them from the step's).
  virtual PartialResult operator()(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const DeviceTier& tier) const = 0;
  // Whether operator() takes the step's q and the key and value sources whole, and reads the tier's rows in them
  // through its arrays (q_rows, k_rows), rather than the tier's rows taken out first (attend_tier).
  virtual bool reads_in_place() const { return false; }
  // Whether operator() takes the store whole for a tier with k_start, reading each sequence's keys in its run.
  virtual bool reads_store_runs() const { return false; }
  // The step's tiers this implementation takes, computed in the order given: each by attend_tier here; split-key
  // attention launches them as one kernel (a launch fewer a layer for each tier past the first).
  // `step`: the step's own keys, where the layer wrote them (tiers with k_first read them there).
  virtual std::vector<PartialResult> attend_together(const at::Tensor& q, const at::Tensor& k_source, const at::Tensor& v_source,
                                                     const std::vector<const DeviceTier*>& tiers, const StepKeys& step = {}) const;
  // Whether its launches for the plan's tiers, put in the fixed form (batch/fixed_cascade.h), are
  // the same for every plan of that form: what a CUDA graph needs. Not so where it pads each tier
  // to its longest sequence (the ATen form): the fixed form would pad every sequence to the bucket.
  virtual bool replays(const CascadePlan& /*plan*/) const { return true; }
};

// A tier computed by `impl`: its rows taken from the step's q (in place where they are one run), its keys and
// values gathered from where its k_rows point (the step's keys, or the KV cache's store), or read in place: in their
// runs of the store (k_start: the store given whole), or, where they are the step's own (k_first) and `step` holds
// them, there.
PartialResult attend_tier(const PartialAttention& impl, const at::Tensor& q, const at::Tensor& k_source, const at::Tensor& v_source,
                           const DeviceTier& tier, const StepKeys& step = {});

// Fills tier.k_start and tier.k_used where every sequence of the tier with rows reads its keys (tier.k_rows, the KV
// cache's slots) as one ascending run of slots; false, leaving them undefined, where one does not (a state whose
// blocks lie apart, the padding's keys at the scratch slot). A sequence without rows reads none (0 keys from slot 0).
bool store_runs(DeviceTier& tier);

// The first step row of the run the tier's keys are, where in every sequence with rows each key j is the own key of
// step row first + j (key_rows: QueryLayout's, each key's step row); -1 otherwise. A sequence without rows (the fixed
// form's spare keys) is never read: its keys may be anything.
int64_t step_keys_first(const CascadeTier& tier, const std::vector<int32_t>& key_rows);

// The tiers split-key attention takes: every tier but the states' own runs ("own": a prefill's long causal runs; with the
// questions planned apart, batch/cascade_plan.h, only those), by the tier's kind alone, so a row's kernel never depends
// on what else its step holds.
bool split_key_takes(const CascadeTier& tier);
std::unique_ptr<PartialAttention> split_key_partial_attention(double softcap);

// softcap > 0: scaled scores are soft-capped, cap * tanh(s / cap), before the softmax (Gemma).
std::unique_ptr<PartialAttention> reference_partial_attention(double softcap);
std::unique_ptr<PartialAttention> aten_partial_attention(double softcap);
// CUDA, without soft-capping: FlashAttention-2 for bf16 and fp16, the memory-efficient kernel for
// fp32. Defined in CUDA builds only; throws there on a libtorch before 2.x.
std::unique_ptr<PartialAttention> flash_partial_attention(at::ScalarType dtype);

}  // namespace tq
