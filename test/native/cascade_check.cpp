// The cascade (csrc/batch/cascade_plan.h, csrc/kernels/cascade/) on random
// segment trees, linked against the engine library (build/libtq_core.a):
// states with cached prefixes of any length, shared segments, questions read
// out at any token, several states per step, steps cut at every size, with and
// without a sliding window. For every step (and its output rows alone, as the
// last layer plans them):
//   - the visibility the plan encodes equals the engine's one rule
//     (visibility_mask) element for element, each visible key exactly once;
//   - no tier is empty, every merge entry sees a key;
//   - the reference partial attention merged by log-sum-exp equals float64
//     softmax attention under the rule's mask, and the ATen form the reference;
// and on hand-built tiers, a row that sees no key in one tier is merged
// without reading its log-sum-exp. Each step is also padded to its bucket
// (batch/step_buckets.h) and planned in the fixed form CUDA graphs replay
// (batch/fixed_cascade.h): there too the rule's visibility, and the launch
// shape (every array's length, every host scalar) a function of the bucket and
// the fixed form's capacities alone; the reference over it gives the bits of
// the plain plan. Planned with the questions' own runs apart (as split-key
// attention runs them), the same visibility, plain and fixed. Every tier but the
// states' own runs on split-key attention (its host twin of the CUDA kernel:
// the state tiers, the questions' own under their causal and windowed masks),
// reading a paged store through the tiers' slots: against float64 in fp32 and
// bf16, and the fixed form's bits equal to the plain plan's; its own exp, log
// and tanh against double precision. The CPU kernels' attention (kernels/cpu/attention/attention.h) runs the
// same steps, invariant at every kernel level this CPU has and on oneDNN, against its
// plain reference (attention_reference.h), and that against float64 attention.
// Prints one JSON line per part; `cascade_check split-key-device` runs that part alone.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "batch/cascade_plan.h"
#include "batch/fixed_cascade.h"
#include "batch/step_buckets.h"
#include "batch/step_plan.h"
#include "batch/visibility.h"
#include "kernels/cascade/attention_merge.h"
#include "kernels/cascade/partial_attention.h"
#include "kernels/cascade/step_upload.h"
#include "kernels/cpu/attention/attention.h"
#include "kernels/cpu/attention/attention_reference.h"
#include "kernels/cpu/isa.h"
#include "kernels/math/split_key_math.h"
#include "runner/step_graphs.h"

using namespace tq;

namespace {

std::mt19937 rng(20261125);
int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }

std::vector<int64_t> tokens(int64_t n) { return std::vector<int64_t>(static_cast<size_t>(n), 7); }

struct Tree {
  PackedTokens packed;
  std::vector<int64_t> compute;
};

// 1-3 states, each short or long (with long_states: long enough for the state tier to read it in several chunks,
// cascade_plan.h's kStateChunkKeys, and for prefill-sized buckets), with a cached prefix of any length, 0-2 shared segments of
// 1-3 questions and 0-3 questions of its own; each question read out at a random token.
Tree random_tree(bool long_states = false) {
  Tree t;
  auto& p = t.packed;
  std::vector<std::pair<int64_t, int64_t>> roots;  // segment, cached tokens
  const int64_t states = uniform(1, 3);
  for (int64_t s = 0; s < states; ++s) {
    const int64_t len = long_states ? uniform(512, 1280) : uniform(0, 1) ? uniform(1, 40) : uniform(60, 120);
    const int64_t root = p.add_segment(tokens(len), -1);
    roots.push_back({root, uniform(0, 1) ? 0 : uniform(0, len - 1)});
    auto question = [&](int64_t parent) {
      const int64_t n = uniform(1, 12), seg = p.add_segment(tokens(n), parent);
      p.output_rows.push_back(p.segment_offsets()[seg] + uniform(0, n - 1));
    };
    for (int64_t g = uniform(0, 2); g > 0; --g) {
      const int64_t shared = p.add_segment(tokens(uniform(1, 20)), root);
      for (int64_t q = uniform(1, 3); q > 0; --q) question(shared);
    }
    for (int64_t q = uniform(0, 3); q > 0; --q) question(root);
  }
  std::sort(p.output_rows.begin(), p.output_rows.end());
  const auto offsets = p.segment_offsets();
  std::vector<int64_t> skip(p.ids.size(), 0);
  for (auto [root, cached] : roots)
    for (int64_t i = 0; i < cached; ++i) skip[offsets[root] + i] = 1;
  for (size_t i = 0; i < p.ids.size(); ++i)
    if (!skip[i]) t.compute.push_back(static_cast<int64_t>(i));
  return t;
}

// Float64 softmax attention under a [Tq, Tk] mask (rows see at least one key).
at::Tensor dense_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask, double softcap) {
  const int64_t group = q.size(1) / k.size(1);
  auto qh = q.to(at::kDouble).permute({1, 0, 2});
  auto kh = k.to(at::kDouble).repeat_interleave(group, 1).permute({1, 0, 2});
  auto vh = v.to(at::kDouble).repeat_interleave(group, 1).permute({1, 0, 2});
  auto scores = at::matmul(qh, kh.transpose(1, 2)).div_(std::sqrt(static_cast<double>(q.size(2))));
  if (softcap > 0) scores = scores.div_(softcap).tanh_().mul_(softcap);
  scores.masked_fill_(mask.logical_not().unsqueeze(0), -INFINITY);
  return at::matmul(scores.softmax(-1), vh).permute({1, 0, 2});
}

// Merges whose tiers, read each where it lies, gave other bits than the same tiers stacked into one result first
// (the merge's fallback where a step has more tiers than its kernel's arguments hold).
int64_t stacked_merge_differs = 0;
// Merges written into the first tier's result, where it holds every row from the step's first (merge_attention's
// first_holds_every_row), and the merges asked to whose bits differed from the merge into a new array.
int64_t in_place_merges = 0, in_place_merge_differs = 0;

// Tiers whose keys are the step's own rows (step_keys_first) read where the layer writes them (StepKeys); of them,
// those the fixed form keeps so (from the step's first row); and those whose bits differed from the same keys gathered.
int64_t step_key_tiers = 0, fixed_step_key_tiers = 0, step_key_differs = 0;

// The tiers of `gathered` whose keys are the step's own (key_rows: the layout's), run again on keys read from StepKeys as
// the layer writes them: row r's own key at row r, every other row NaN, so that a key read from the wrong row shows.
void check_step_keys(std::vector<DeviceTier> tiers, const PartialAttention& impl, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const std::vector<int32_t>& key_rows, const std::vector<PartialResult>& gathered, bool fixed) {
  int64_t rows = 0;
  for (const auto r : key_rows) rows = std::max<int64_t>(rows, r + 1);
  for (auto& tier : tiers) {
    tier.k_first = step_keys_first(*tier.tier, key_rows);
    if (tier.k_first >= 0) rows = std::max<int64_t>(rows, tier.k_first + tier.tier->total_k());
  }
  StepKeys step{at::full({rows, k.size(1), k.size(2)}, NAN, k.options()), at::full({rows, v.size(1), v.size(2)}, NAN, v.options())};
  for (size_t j = 0; j < key_rows.size(); ++j)
    if (key_rows[j] >= 0) {
      step.k[key_rows[j]].copy_(k[static_cast<int64_t>(j)]);
      step.v[key_rows[j]].copy_(v[static_cast<int64_t>(j)]);
    }
  for (size_t i = 0; i < tiers.size(); ++i) {
    if (tiers[i].k_first < 0 || tiers[i].tier->total_q() == 0) continue;
    ++step_key_tiers;
    fixed_step_key_tiers += fixed && tiers[i].k_first == 0;
    const auto part = attend_tier(impl, q, k, v, tiers[i], step);
    if (!part.out.equal(gathered[i].out) || !part.lse.equal(gathered[i].lse)) ++step_key_differs;
  }
}

// Tiers whose sequences read their keys in runs of the store (store_runs); of them, in the fixed form; and those whose
// bits then differed from the same keys gathered.
int64_t store_run_tiers = 0, fixed_store_run_tiers = 0, store_run_differs = 0;

// The tiers of `gathered` run again with the step's keys in a store in their order from slot 5 (each segment's keys one
// run, as a state's blocks in order), every other slot NaN: those whose sequences' keys are runs there read them in
// place (the whole store given, as FlashAttention-2 takes it).
void check_store_runs(std::vector<DeviceTier> tiers, const PartialAttention& impl, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const std::vector<PartialResult>& gathered, bool fixed) {
  const int64_t offset = 5, keys = k.size(0);
  auto k_store = at::full({keys + 2 * offset, k.size(1), k.size(2)}, NAN, k.options()), v_store = at::full_like(k_store, NAN);
  k_store.narrow(0, offset, keys).copy_(k);
  v_store.narrow(0, offset, keys).copy_(v);
  for (size_t i = 0; i < tiers.size(); ++i) {
    tiers[i].k_rows = tiers[i].k_rows + offset;
    if (tiers[i].tier->total_q() == 0 || !store_runs(tiers[i])) continue;
    ++store_run_tiers;
    fixed_store_run_tiers += fixed;
    const auto part = attend_tier(impl, q, k_store, v_store, tiers[i]);
    if (!part.out.equal(gathered[i].out) || !part.lse.equal(gathered[i].lse)) ++store_run_differs;
  }
}

// key_rows: the layout's (QueryLayout::key_rows), where the tiers reading the step's own keys, or runs of the store,
// are checked too.
at::Tensor run_cascade(const CascadePlan& plan, const PartialAttention& impl, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       const std::vector<int32_t>& key_rows = {}, bool fixed = false) {
  std::vector<DeviceTier> tiers;
  for (const auto& tier : plan.tiers) tiers.push_back(impl.prepare(tier));
  auto merge = prepare_merge(plan, at::kCPU);
  // As a step has them on every device: views of one buffer (runner/step_inputs.h).
  pack_into_one(step_arrays(tiers, merge), at::kCPU);
  std::vector<PartialResult> parts;
  for (const auto& tier : tiers) parts.push_back(attend_tier(impl, q, k, v, tier));
  if (!key_rows.empty()) {
    check_step_keys(tiers, impl, q, k, v, key_rows, parts, fixed);
    check_store_runs(tiers, impl, q, k, v, parts, fixed);
  }
  auto merged = merge_attention(merge, parts, at::kFloat);
  if (!merge_attention(merge, {stacked_tiers(parts)}, at::kFloat).equal(merged)) ++stacked_merge_differs;
  if (tiers[0].q_first == 0 && plan.tiers[0].total_q() == q.size(0)) {
    auto own = parts;
    own[0].out = parts[0].out.clone();
    const auto in_place = merge_attention(merge, own, at::kFloat, /*first_holds_every_row=*/true);
    // Written into the first tier's result (a step of more tiers than the merge's sources has them stacked first).
    in_place_merges += in_place.data_ptr() == own[0].out.data_ptr();
    if (!in_place.equal(merged)) ++in_place_merge_differs;
  }
  return merged;
}

// Where split-key's grid (split_key::block_item) gives a (tier row, head) to no warp, to several, or to a warp of
// another sequence or key head: the count of such.
int64_t split_key_coverage_errors(const CascadeTier& tier, int heads, int kv_heads) {
  split_key::SplitKeyArgs grid{};
  grid.heads = heads, grid.kv_heads = kv_heads, grid.cu_q = tier.cu_q.data(), grid.sequences = tier.sequences(), grid.max_rows = tier.max_q;
  std::vector<int> covered(static_cast<size_t>(tier.total_q() * heads), 0);
  int64_t errors = 0;
  for (int s = 0; s < grid.sequences; ++s)
    for (int kv = 0; kv < kv_heads; ++kv)
      for (int z = 0; z < split_key::item_groups(grid, split_key::kBlockWarps); ++z)
        for (int w = 0; w < split_key::kBlockWarps; ++w)
          if (const auto item = split_key::block_item(grid, s, kv, z, w, split_key::kBlockWarps); item.active) {
            if (item.row < tier.cu_q[s] || item.row >= tier.cu_q[s + 1] || item.head / (heads / kv_heads) != kv) ++errors;
            else ++covered[static_cast<size_t>(item.row * heads + item.head)];
          }
  return errors + std::count_if(covered.begin(), covered.end(), [](int c) { return c != 1; });
}
int64_t plan_coverage_errors = 0;  // over the random plans' split-key tiers

// The cascade as the engine runs it with --state-attention split-key (planned with the questions apart): the tiers
// split-key attention takes on it, the states' own runs on the reference, every tier's keys and values read in a paged
// store (each key at a random slot of twice as many, as the KV cache's blocks lie), through the tiers' key rows made
// slots (cascade_layer_kernels.cpp).
at::Tensor run_split_key_cascade(const CascadePlan& plan, double softcap, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t keys = k.size(0);
  const auto slots = at::randperm(2 * keys + 1, at::kLong).slice(0, 0, keys);
  auto k_store = at::zeros({2 * keys + 1, k.size(1), k.size(2)}, k.options()), v_store = at::zeros_like(k_store);
  k_store.index_copy_(0, slots, k);
  v_store.index_copy_(0, slots, v);
  const auto split = split_key_partial_attention(softcap), reference = reference_partial_attention(softcap);
  std::vector<DeviceTier> tiers;
  std::vector<const PartialAttention*> kernels;
  for (const auto& tier : plan.tiers) {
    kernels.push_back(split_key_takes(tier) ? split.get() : reference.get());
    if (split_key_takes(tier)) plan_coverage_errors += split_key_coverage_errors(tier, static_cast<int>(q.size(1)), static_cast<int>(k.size(1)));
    tiers.push_back(kernels.back()->prepare(tier));
    tiers.back().k_rows = slots.index_select(0, tiers.back().k_rows);
  }
  auto merge = prepare_merge(plan, at::kCPU);
  pack_into_one(step_arrays(tiers, merge), at::kCPU);
  std::vector<PartialResult> parts;
  // A tier the fixed form holds empty (the states' own runs in a warm question's step) is not launched
  // (cascade_layer_kernels.cpp).
  for (size_t i = 0; i < tiers.size(); ++i)
    parts.push_back(plan.tiers[i].total_q() == 0 ? PartialResult{at::empty({0, q.size(1), q.size(2)}, q.options()), at::empty({q.size(1), 0})}
                                                 : attend_tier(*kernels[i], q, k_store, v_store, tiers[i]));
  return merge_attention(merge, parts, at::kFloat);
}

struct Totals {
  int64_t trees = 0, steps = 0, layouts = 0, mismatched = 0, empty_tiers = 0, keyless_entries = 0, windowed_tiers = 0, chunked_tiers = 0,
          question_tiers = 0;
  int64_t max_tiers = 0, compared = 0;
  double worst_reference = 0, worst_aten = 0;
  double worst_plain = 0;                // the plain reference against float64
  double worst_split_key = 0, worst_split_key_bf16 = 0;  // the cascade on split-key attention (questions apart) against float64
  std::map<std::string, double> worst_cpu;  // each CPU implementation against the plain reference
  int64_t store_compared = 0, store_differ = 0;  // the CPU attention read through slots against it over the keys in place
};

// The step's keys and values at random slots of a larger store, the other rows random: as a KV cache holds them.
struct KeysInStore {
  at::Tensor k, v, slots;
};
KeysInStore scatter_into_store(const at::Tensor& kv, const at::Tensor& vv) {
  const int64_t tk = kv.size(0);
  KeysInStore s{at::randn({2 * tk + 3, kv.size(1), kv.size(2)}).to(kv.scalar_type()), at::randn({2 * tk + 3, vv.size(1), vv.size(2)}).to(vv.scalar_type()),
                at::randperm(2 * tk + 3, at::kLong).slice(0, 0, tk)};
  s.k.index_copy_(0, s.slots, kv);
  s.v.index_copy_(0, s.slots, vv);
  return s;
}

// The CPU kernels' attention over the step, invariant at every kernel level this CPU runs and on oneDNN,
// each against the plain reference; and each read from a store through the keys' slots (as the engine reads its KV
// cache), in fp32 and (the invariant kernels, paired) bf16, the same bits as over the keys in place.
void check_cpu_attention(const QueryLayout& q, const StepBatch& b, std::optional<int64_t> window, double softcap, const at::Tensor& qv,
                         const at::Tensor& kv, const at::Tensor& vv, const at::Tensor& plain, Totals& t) {
  const auto store = scatter_into_store(kv, vv);
  const auto compare = [&](const std::string& name, bool invariant, Isa isa) {
    for (const bool half : {false, true}) {
      if (half && !invariant) continue;
      const auto in = [half](const at::Tensor& x) { return half ? x.to(at::kBFloat16) : x; };
      const bool paired = invariant && half;  // as cpu_layer_kernels.cpp plans it
      const auto plan = plan_attention(q, b.key_positions, b.key_segments, window, qv.size(1), paired, invariant);
      const auto out = attention(in(qv), in(kv), in(vv), plan, invariant, isa, softcap);
      const auto from_store = attention(in(qv), in(store.k), in(store.v), plan, invariant, isa, softcap, store.slots);
      ++t.store_compared;
      if (!at::equal(out, from_store)) ++t.store_differ;
      if (half) continue;
      auto& worst = t.worst_cpu[name];
      worst = std::max(worst, (out - plain).abs().max().item<double>());
    }
  };
  for (int level = 0; level <= static_cast<int>(best_isa()); ++level) compare(isa_name(static_cast<Isa>(level)), true, static_cast<Isa>(level));
#if TQ_ONEDNN
  compare("onednn", false, best_isa());
#endif
}

// The plan's visibility against the rule, its tiers and its merge entries, counted into `t`.
void check_plan(const CascadePlan& plan, const at::Tensor& rule, Totals& t) {
  if (!cascade_visibility(plan, rule.size(0), rule.size(1)).equal(rule.to(at::kInt))) ++t.mismatched;
  t.max_tiers = std::max<int64_t>(t.max_tiers, static_cast<int64_t>(plan.tiers.size()));
  for (const auto& tier : plan.tiers) {
    if (tier.total_q() == 0) ++t.empty_tiers;
    if (tier.name == "state" && tier.window_left >= 0) ++t.windowed_tiers;
    if (tier.name == "own-questions") ++t.question_tiers;
    // A state read in chunks: consecutive sequences of the same rows.
    for (int32_t s = 1; s < tier.sequences(); ++s)
      if (tier.name == "state" && tier.cu_q[s] > tier.cu_q[s - 1] && tier.cu_q[s + 1] > tier.cu_q[s] &&
          tier.q_rows[tier.cu_q[s]] == tier.q_rows[tier.cu_q[s - 1]]) {
        ++t.chunked_tiers;
        break;
      }
  }
  for (size_t e = 0; e < plan.merge_tier.size(); ++e) {
    const auto& tier = plan.tiers[plan.merge_tier[e]];
    int32_t s = 0;
    while (tier.cu_q[s + 1] <= plan.merge_row[e]) ++s;
    if (visible_keys(tier, s, plan.merge_row[e] - tier.cu_q[s]).count() == 0) ++t.keyless_entries;
  }
}

void check_layout(const QueryLayout& q, const StepBatch& b, std::optional<int64_t> window, bool numeric, double softcap, Totals& t) {
  // As the varlen kernels run it, and with the questions' own runs apart, as split-key attention runs it.
  const auto plan = plan_cascade(q, b.key_positions, b.key_segments, window);
  const auto apart = plan_cascade(q, b.key_positions, b.key_segments, window, /*questions_apart=*/true);
  const int64_t tq = q.positions.size(0), tk = b.key_positions.size(0);
  auto rule = visibility_mask(q.positions, q.segments, q.parents, q.roots, b.key_positions, b.key_segments, window);
  ++t.layouts;
  check_plan(plan, rule, t);
  check_plan(apart, rule, t);
  if (!numeric) return;
  const int64_t heads = 4, kv_heads = 2, dim = 8;
  auto qv = at::randn({tq, heads, dim}), kv = at::randn({tk, kv_heads, dim}), vv = at::randn({tk, kv_heads, dim});
  auto expected = dense_attention(qv, kv, vv, rule, softcap);
  const auto plain = reference_attention(qv, kv, vv, rule, softcap);
  t.worst_plain = std::max(t.worst_plain, (plain.to(at::kDouble) - expected).abs().max().item<double>());
  check_cpu_attention(q, b, window, softcap, qv, kv, vv, plain, t);
  auto reference = run_cascade(plan, *reference_partial_attention(softcap), qv, kv, vv, q.key_rows);
  auto aten = run_cascade(plan, *aten_partial_attention(softcap), qv, kv, vv);
  t.worst_reference = std::max(t.worst_reference, (reference.to(at::kDouble) - expected).abs().max().item<double>());
  t.worst_aten = std::max(t.worst_aten, (aten - reference).abs().max().item<double>());
  const auto split = run_split_key_cascade(apart, softcap, qv, kv, vv);
  t.worst_split_key = std::max(t.worst_split_key, (split.to(at::kDouble) - expected).abs().max().item<double>());
  // bf16 (the stores and q as the engine gives them; the tiers' outputs rounded to bf16), against float64 attention
  // over the same rounded inputs.
  const auto q16 = qv.to(at::kBFloat16), k16 = kv.to(at::kBFloat16), v16 = vv.to(at::kBFloat16);
  const auto split16 = run_split_key_cascade(apart, softcap, q16, k16, v16);
  t.worst_split_key_bf16 = std::max(t.worst_split_key_bf16, (split16.to(at::kDouble) - dense_attention(q16, k16, v16, rule, softcap)).abs().max().item<double>());
  ++t.compared;
}

QueryLayout layout_of(const StepBatch& b) { return {b.positions, b.segments, b.parents, b.roots, b.key_end, b.key_slots, key_rows_of(b)}; }

struct FixedTotals {
  int64_t fixed = 0, refused = 0, refused_unwindowed = 0, mismatched = 0, keyless_entries = 0, shapes = 0, shape_differences = 0,
          compared = 0, bits_differ = 0, split_key_compared = 0, split_key_bits_differ = 0, without_own_tier = 0;
  int64_t padding_rows = 0, padding_rows_seeing_more = 0;  // a padding row sees at most as many keys as there are padding rows
  int64_t largest_bucket = 0;
  // FlashAttention-2's blocks a head: the fixed forms' grids, and the blocks that hold their steps' rows (the plain plans').
  int64_t flash_blocks = 0, working_blocks = 0;
  std::map<std::vector<int64_t>, std::vector<int64_t>> shape_of;  // (bucket, capacities, window) -> launch shape
};

// FlashAttention-2's grid a head for a tier: a block per sequence and 128 rows of the longest (max_q, at least 2 as
// flash_attention.cpp passes it), empty sequences included; none for a tier without rows (not launched).
int64_t row_blocks(const CascadeTier& l) { return (std::max(2, l.max_q) + 127) / 128; }
int64_t flash_blocks(const CascadeTier& l) { return l.total_q() > 0 ? int64_t{l.sequences()} * row_blocks(l) : 0; }

// The blocks of those that hold rows: each sequence's rows in blocks of 128.
int64_t working_blocks(const CascadeTier& l) {
  int64_t blocks = 0;
  for (int32_t s = 0; s < l.sequences(); ++s) blocks += (l.cu_q[s + 1] - l.cu_q[s] + 127) / 128;
  return blocks;
}

template <typename F>
int64_t over_tiers(const CascadePlan& plan, F blocks) {
  int64_t sum = 0;
  for (const auto& l : plan.tiers) sum += blocks(l);
  return sum;
}

// What a replay bakes in of a fixed plan: every array's length and every host scalar.
std::vector<int64_t> launch_shape(const CascadePlan& plan) {
  std::vector<int64_t> shape{static_cast<int64_t>(plan.merge_begin.size()), plan.merge_capacity, plan.merge_written_capacity,
                             static_cast<int64_t>(plan.tiers.size())};
  for (const auto& l : plan.tiers)
    shape.insert(shape.end(), {l.causal, l.window_left, static_cast<int64_t>(l.cu_q.size()), static_cast<int64_t>(l.cu_k.size()),
                               static_cast<int64_t>(l.q_rows.size()), static_cast<int64_t>(l.k_rows.size()), l.max_q, l.max_k});
  return shape;
}

// The step padded to its bucket and planned in the fixed form; with the questions' own runs apart, as split-key
// attention runs it, or not.
void check_fixed(StepBatch b, std::optional<int64_t> window, bool numeric, bool questions_apart, FixedTotals& t) {
  const auto bucket = bucket_for(b.token_ids.size(0), b.key_slots.size(0));
  if (!bucket) return;
  const int64_t real_tokens = b.token_ids.size(0);
  pad_step(b, *bucket, /*scratch_slot=*/1 << 20);
  const auto q = layout_of(b);
  const auto plain = plan_cascade(q, b.key_positions, b.key_segments, window, questions_apart);
  auto plan = plain;
  const auto tokens = static_cast<int32_t>(bucket->tokens), keys = static_cast<int32_t>(bucket->keys);
  const auto capacity = fixed_capacity(plan, tokens, keys);
  if (!fix_cascade_shape(plan, tokens, keys)) {
    ++t.refused;
    // Only a window that cuts a state (one tier per window) is refused here.
    if (std::none_of(plain.tiers.begin(), plain.tiers.end(), [](const auto& l) { return l.name == "state" && l.window_left >= 0; }))
      ++t.refused_unwindowed;
    return;
  }
  ++t.fixed;
  auto rule = visibility_mask(q.positions, q.segments, q.parents, q.roots, b.key_positions, b.key_segments, window);
  if (!cascade_visibility(plan, tokens, keys).equal(rule.to(at::kInt))) ++t.mismatched;
  // The padding's cost: its rows see the few keys before them, never the padding state's hundreds.
  const auto seen = rule.slice(0, real_tokens).sum(1);
  t.padding_rows += seen.size(0);
  t.padding_rows_seeing_more += seen.gt(tokens - real_tokens).sum().item<int64_t>();
  for (size_t e = 0; e < plan.merge_tier.size(); ++e) {
    const auto& tier = plan.tiers[plan.merge_tier[e]];
    int32_t s = 0;
    while (tier.cu_q[s + 1] <= plan.merge_row[e]) ++s;
    if (visible_keys(tier, s, plan.merge_row[e] - tier.cu_q[s]).count() == 0) ++t.keyless_entries;
  }
  // A model has one window: it is part of the key here, where trees draw theirs.
  const std::vector<int64_t> key{tokens, keys, capacity->runs, capacity->own_longest, capacity->own_keys, capacity->state_rows, capacity->state_sequences,
                                 capacity->state_longest, capacity->own_rows, capacity->question_runs, capacity->question_rows, capacity->question_longest,
                                 capacity->question_keys, capacity->merge_written, questions_apart, window.value_or(-1)};
  if (questions_apart && capacity->own_rows == 0) ++t.without_own_tier;
  t.largest_bucket = std::max<int64_t>(t.largest_bucket, tokens);
  t.flash_blocks += over_tiers(plan, flash_blocks);
  t.working_blocks += over_tiers(plain, working_blocks);
  const auto [known, inserted] = t.shape_of.try_emplace(key, launch_shape(plan));
  if (inserted) ++t.shapes;
  else if (known->second != launch_shape(plan)) ++t.shape_differences;
  if (!numeric) return;
  const int64_t heads = 4, kv_heads = 2, dim = 8;
  auto qv = at::randn({tokens, heads, dim}), kv = at::randn({keys, kv_heads, dim}), vv = at::randn({keys, kv_heads, dim});
  const auto impl = reference_partial_attention(0);
  ++t.compared;
  if (!run_cascade(plan, *impl, qv, kv, vv, q.key_rows, /*fixed=*/true).equal(run_cascade(plain, *impl, qv, kv, vv))) ++t.bits_differ;
  const double softcap = 0;
  const auto q16 = qv.to(at::kBFloat16), k16 = kv.to(at::kBFloat16), v16 = vv.to(at::kBFloat16);
  if (!questions_apart) return;
  ++t.split_key_compared;
  if (!run_split_key_cascade(plan, softcap, q16, k16, v16).equal(run_split_key_cascade(plain, softcap, q16, k16, v16))) ++t.split_key_bits_differ;
}

// The GPU benchmark's calls (bench/gpu/check.py) as one step each, padded to its bucket and planned in the fixed form
// CUDA graphs replay: a cold 1,000-token prefill (999 state tokens and a 1-token question), a 24-token question over
// the 1,000 cached, and the 1,000 with 16 questions of 24. Each tier's grid a head for FlashAttention-2: its sequences
// and its blocks of 128 rows of the longest; beside it, the plain plan's sequences and the blocks holding rows. And the
// merge's rows: those it writes, and those its launch visits.
void check_bench_grids() {
  struct Call {
    const char* name;
    int64_t state, cached, questions, question_tokens;
  };
  std::printf("{\"part\":\"benchGrids\"");
  for (const Call& c : {Call{"cold", 999, 0, 1, 1}, Call{"warm", 1000, 1000, 1, 24}, Call{"sixteen", 1000, 0, 16, 24}}) {
    PackedTokens p;
    const int64_t root = p.add_segment(tokens(c.state), -1);
    for (int64_t q = 0; q < c.questions; ++q) {
      const int64_t seg = p.add_segment(tokens(c.question_tokens), root);
      p.output_rows.push_back(p.segment_offsets()[seg] + c.question_tokens - 1);
    }
    std::vector<int64_t> slots(p.ids.size()), compute;
    for (size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<int64_t>(i);
    for (int64_t i = c.cached; i < static_cast<int64_t>(p.ids.size()); ++i) compute.push_back(i);
    auto b = plan_steps(p, slots, compute, /*step_tokens=*/2048).at(0).batch;
    pad_step(b, *bucket_for(b.token_ids.size(0), b.key_slots.size(0)), /*scratch_slot=*/1 << 20);
    const auto plain = plan_cascade(layout_of(b), b.key_positions, b.key_segments, std::nullopt);
    auto fixed = plain;
    fix_cascade_shape(fixed, static_cast<int32_t>(b.token_ids.size(0)), static_cast<int32_t>(b.key_slots.size(0)));
    // The merge in place: a warp per row it writes (listed, within a capacity) and head, where the step has tokens rows.
    std::printf(",\"%s\":{\"tokens\":%lld,\"mergeWritten\":%d,\"mergeRows\":%d,", c.name, (long long)b.token_ids.size(0),
                static_cast<int>(plain.merge_written.size()), fixed.merge_written_capacity);
    for (size_t i = 0; i < fixed.tiers.size(); ++i) {
      const auto& l = fixed.tiers[i];
      const auto& mine = *std::find_if(plain.tiers.begin(), plain.tiers.end(), [&](const auto& t) { return t.name == l.name; });
      std::printf("%s\"%s\":{\"sequences\":%d,\"rowBlocks\":%lld,\"blocks\":%lld,\"stepSequences\":%d,\"workingBlocks\":%lld}", i ? "," : "",
                  l.name.c_str(), l.sequences(), (long long)row_blocks(l), (long long)flash_blocks(l), mine.sequences(), (long long)working_blocks(mine));
    }
    std::printf("}");
  }
  std::printf("}\n");
}

// The step's output rows alone (the last layer's queries).
QueryLayout output_layout(const StepBatch& b) {
  auto rows = at::tensor(at::ArrayRef<int64_t>(b.output_rows), at::kLong);
  std::vector<int64_t> key_end;
  for (auto r : b.output_rows) key_end.push_back(b.key_end[r]);
  return {b.positions.index_select(0, rows), b.segments.index_select(0, rows), b.parents.index_select(0, rows), b.roots.index_select(0, rows), key_end,
          b.key_slots, key_rows_of(b)};
}

// A causal tier whose first row sees no key (3 rows over 2 keys), and a tier that gives that
// row its keys: the merge must give that row the second tier's output whatever the first
// tier's log-sum-exp holds for it (FlashAttention-2 writes +inf there, the memory-efficient kernel 0).
void check_keyless_row() {
  CascadePlan plan;
  CascadeTier causal{"own", true, -1, {0, 3}, {0, 2}, {0, 1, 2}, {0, 1}, 3, 2};
  CascadeTier full{"state", false, -1, {0, 3}, {0, 3}, {0, 1, 2}, {2, 3, 4}, 3, 3};
  plan.tiers = {causal, full};
  plan_merge(plan, 3);
  auto q = at::randn({3, 2, 4}), k = at::randn({5, 1, 4}), v = at::randn({5, 1, 4});
  const auto impl = reference_partial_attention(0);
  std::vector<DeviceTier> tiers{impl->prepare(plan.tiers[0]), impl->prepare(plan.tiers[1])};
  std::vector<PartialResult> parts{attend_tier(*impl, q, k, v, tiers[0]), attend_tier(*impl, q, k, v, tiers[1])};
  const auto merge = prepare_merge(plan, at::kCPU);
  const auto clean = merge_attention(merge, parts, at::kFloat);
  bool same = true;
  for (float poison : {INFINITY, 0.0f, NAN, -INFINITY}) {
    parts[0].lse.select(1, 0).fill_(poison);
    parts[0].out.select(0, 0).fill_(poison);
    same = same && merge_attention(merge, parts, at::kFloat).equal(clean);
  }
  const bool alone = clean.select(0, 0).equal(parts[1].out.select(0, 0));
  std::printf("{\"part\":\"keyless\",\"entriesOfRow0\":%d,\"poisonIgnored\":%s,\"row0IsOtherTier\":%s}\n", merge.begin[1] - merge.begin[0],
              same ? "true" : "false", alone ? "true" : "false");
}

// A merge row with no entries merges to 0, reading no tier's result.
void check_empty_row() {
  DeviceMerge merge;
  merge.begin = {0, 0, 1};
  merge.entry = {0};
  std::vector<PartialResult> parts{{at::full({1, 2, 4}, NAN), at::full({2, 1}, NAN)}};
  parts[0].out.select(0, 0).fill_(3.0f);
  parts[0].lse.fill_(1.0f);
  const auto out = merge_attention(merge, parts, at::kFloat);
  std::printf("{\"part\":\"emptyRow\",\"zero\":%s,\"other\":%s}\n", out.select(0, 0).eq(0).all().item<bool>() ? "true" : "false",
              out.select(0, 1).eq(3.0f).all().item<bool>() ? "true" : "false");
}

// Arrays of every dtype and shape a step has (empty ones too) packed into one buffer (step_upload.h): each a view of
// it at an aligned offset, equal to what it was. Then a later step's arrays of the same sizes copied into that buffer
// (a CUDA graph's refill, kernels/host_upload.h): the views then equal them; arrays of other sizes are refused.
void check_upload() {
  std::vector<at::Tensor> arrays{at::arange(5, at::kLong), at::arange(3, at::kInt), at::rand({2, 3, 4}).gt(0.5), at::empty({0}, at::kLong),
                                 at::arange(7, at::kInt).neg(), at::arange(11, at::kLong).mul(1 << 20)};
  std::vector<at::Tensor> before;
  std::vector<at::Tensor*> pointers;
  for (auto& a : arrays) {
    before.push_back(a.clone());
    pointers.push_back(&a);
  }
  const auto buffer = pack_into_one(pointers, at::kCPU);
  bool equal = true, one = true, aligned = true;
  for (size_t i = 0; i < arrays.size(); ++i) {
    equal = equal && arrays[i].scalar_type() == before[i].scalar_type() && arrays[i].sizes() == before[i].sizes() && arrays[i].equal(before[i]);
    one = one && arrays[i].storage().data() == buffer.storage().data();
    aligned = aligned && (static_cast<const char*>(arrays[i].data_ptr()) - static_cast<const char*>(buffer.data_ptr())) % 8 == 0;
  }
  std::vector<at::Tensor> later;
  std::vector<const at::Tensor*> later_pointers;
  for (const auto& a : before) later.push_back(a.scalar_type() == at::kBool ? a.logical_not() : a.add(3));
  for (const auto& a : later) later_pointers.push_back(&a);
  copy_into_packed(later_pointers, buffer);
  bool refilled = true;
  for (size_t i = 0; i < arrays.size(); ++i) refilled = refilled && arrays[i].equal(later[i]);
  const at::Tensor longer = at::arange(6, at::kLong);
  later_pointers[0] = &longer;  // 48 bytes where the buffer holds 40: every later offset would move
  bool refused = false;
  try {
    copy_into_packed(later_pointers, buffer);
  } catch (const std::logic_error&) {
    refused = true;
  }
  std::printf("{\"part\":\"upload\",\"arrays\":%zu,\"equal\":%s,\"oneBuffer\":%s,\"aligned\":%s,\"refilled\":%s,\"otherSizesRefused\":%s}\n",
              arrays.size(), equal ? "true" : "false", one ? "true" : "false", aligned ? "true" : "false", refilled ? "true" : "false",
              refused ? "true" : "false");
}

}  // namespace

// Split-key attention's own exp, log and tanh (the device's and libm's differ in their last bits, so the kernel and
// its host twin share these) against double precision: the worst relative error of each over a sweep of its range
// (absolute for tanh, whose relative error near 0 is not what a soft-capped score needs).
void check_split_key_math() {
  double exp_err = 0, log_err = 0, tanh_err = 0;
  for (int i = 0; i <= 2000000; ++i) {
    const float x = -86.99f * static_cast<float>(i) / 2000000.0f;  // below -87 it gives 0 by design
    exp_err = std::max(exp_err, std::abs(exact::exp_nonpositive(x) / std::exp(static_cast<double>(x)) - 1));
    const float y = std::ldexp(1.0f + static_cast<float>(i % 1000) / 1000.0f, i % 40 - 10);  // [2^-10, 2^30)
    log_err = std::max(log_err, std::abs(exact::log_positive(y) - std::log(static_cast<double>(y))) / std::max(1.0, std::abs(std::log(static_cast<double>(y)))));
    const float z = -10.0f + 20.0f * static_cast<float>(i) / 2000000.0f;
    tanh_err = std::max(tanh_err, std::abs(exact::tanh(z) - std::tanh(static_cast<double>(z))));
  }
  const bool exact_points = exact::exp_nonpositive(0.0f) == 1.0f && exact::exp_nonpositive(-INFINITY) == 0.0f && exact::log_positive(1.0f) == 0.0f;
  // The kernel's wide loads (a bf16 key eight elements at a time, a lane's slice of a value row two at a time) against
  // the element-wise forms the host twin runs, bit for bit, at the head dims the families have.
  int64_t wide_compared = 0, wide_differ = 0;
  for (int dim : {64, 80, 96, 128, 256}) {
    const auto rows = at::randn({8, dim}).to(at::kBFloat16).contiguous();
    const auto* bits = reinterpret_cast<const uint16_t*>(rows.data_ptr<at::BFloat16>());
    std::vector<float> q(dim);
    for (auto& x : q) x = static_cast<float>(uniform(-1000, 1000)) / 300.0f;
    split_key::SplitKeyArgs a{};
    a.dim = dim;
    a.scale = 0.125f;
    for (float softcap : {0.0f, 3.0f}) {
      a.softcap = softcap;
      for (int r = 0; r < 8; ++r, ++wide_compared)
        if (exact::to_bits(split_key::wide_score(a, q.data(), bits + r * dim)) != exact::to_bits(split_key::score(a, q.data(), bits + r * dim))) ++wide_differ;
    }
    const int per_lane = (dim + 31) / 32;
    std::vector<float> sliced(32 * per_lane, 0.5f), plain(dim, 0.5f);
    for (int r = 0; r < 8; ++r) {
      const float p = static_cast<float>(uniform(1, 1000)) / 999.0f;
      for (int lane = 0; lane < 32; ++lane)
        split_key::add_weighted<split_key::kMaxDim / 32>(sliced.data() + lane * per_lane, p, bits + r * dim, lane * per_lane, per_lane, dim);
      for (int d = 0; d < dim; ++d) plain[d] = exact::fma(p, split_key::element(bits + r * dim, d), plain[d]);
    }
    ++wide_compared;
    for (int d = 0; d < dim; ++d)
      if (exact::to_bits(sliced[d]) != exact::to_bits(plain[d])) {
        ++wide_differ;
        break;
      }
  }
  std::printf("{\"part\":\"splitKeyMath\",\"expRelative\":%.3e,\"logRelative\":%.3e,\"tanhAbsolute\":%.3e,\"exactPoints\":%s,"
              "\"wideCompared\":%lld,\"wideDiffer\":%lld}\n", exp_err, log_err, tanh_err, exact_points ? "true" : "false",
              (long long)wide_compared, (long long)wide_differ);
}

// Split-key attention's CUDA kernel against its host twin, bit for bit (outputs and log-sum-exps), where this is a CUDA
// build on a machine with a GPU (the window runs it): tiers of sequences with 0 to 1,000 keys (a tile's edges among
// them) and 1 to 24 rows, unmasked (a state tier), causal (the questions' own) and causal in a window that cuts
// them, each launched alone and the three in one launch, their keys at random slots of one store, at the head dims and group sizes of the families, bf16 and fp32, with
// and without soft-capping. Elsewhere the same comparison runs with the CPU as the "device" (the check itself
// exercised; it says which device ran), without the 1,000-key sequences: there the twin meets itself, and those
// sequences were two thirds of the check's time (about 10 s of CPU, twice a suite). And on the host, that the
// kernel's grid (split_key::block_item) gives every (tier row, head) to one warp.
void check_split_key_device() {
  const at::Device target = at::hasCUDA() ? at::Device(at::kCUDA) : at::Device(at::kCPU);
  int64_t compared = 0, differ = 0, together_differ = 0, coverage_errors = 0;
  std::vector<int32_t> key_counts{0, 1, 31, 32, 33, 64, 257};
  if (target.is_cuda()) key_counts.push_back(1000);
  const std::vector<std::pair<bool, int32_t>> masks{{false, -1}, {true, -1}, {true, 40}};  // (causal, window_left)
  for (const auto& [heads, kv_heads, dim] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{16, 8, 128}, {8, 2, 64}, {4, 1, 256}, {6, 3, 80}})
    for (const auto dtype : {at::kBFloat16, at::kFloat})
      for (const double softcap : {0.0, 30.0}) {
        // A tier of each mask, their keys in one store, as a layer's tiers are.
        std::vector<CascadeTier> tiers;
        int32_t keys = 0;
        for (const auto& [causal, window_left] : masks) {
          CascadeTier& tier = tiers.emplace_back(CascadeTier{causal ? "own-questions" : "state", causal, window_left});
          for (const int32_t n : key_counts) {
            // A causal sequence's rows are its last keys' (at most as many as its keys, but for the fixed form's spare rows, without keys).
            const auto rows = static_cast<int32_t>(uniform(1, causal && n > 0 ? std::min(24, n) : 24));
            for (int32_t r = 0; r < rows; ++r) tier.q_rows.push_back(static_cast<int32_t>(uniform(0, 99)));
            for (int32_t j = 0; j < n; ++j) tier.k_rows.push_back(keys + j);
            keys += n;
            tier.cu_q.push_back(static_cast<int32_t>(tier.q_rows.size()));
            tier.cu_k.push_back(tier.cu_k.back() + n);
            tier.max_q = std::max(tier.max_q, rows);
            tier.max_k = std::max(tier.max_k, n);
          }
        }
        const auto q = at::randn({100, heads, dim}).to(dtype);
        const auto slots = at::randperm(2 * keys, at::kLong).slice(0, 0, keys);
        auto k_store = at::randn({2 * keys, kv_heads, dim}).to(dtype), v_store = at::randn({2 * keys, kv_heads, dim}).to(dtype);
        const auto impl = split_key_partial_attention(softcap);
        std::vector<DeviceTier> host, device;
        std::vector<const DeviceTier*> on_target;
        for (const auto& tier : tiers) {
          host.push_back(impl->prepare(tier));
          host.back().k_rows = slots.index_select(0, host.back().k_rows);
          coverage_errors += split_key_coverage_errors(tier, static_cast<int>(heads), static_cast<int>(kv_heads));
        }
        for (const auto& h : host) {
          device.push_back(h);
          for (auto* t : {&device.back().q_rows, &device.back().k_rows, &device.back().cu_q, &device.back().cu_k, &device.back().row_seq,
                          &device.back().row_in_seq})
            *t = t->to(target);
        }
        for (const auto& d : device) on_target.push_back(&d);
        const auto qd = q.to(target), kd = k_store.to(target), vd = v_store.to(target);
        // Each tier launched alone, and the three in one launch (the kernel's grid over the tiers' sequences in turn).
        const auto together = impl->attend_together(qd, kd, vd, on_target);
        const auto same = [](const PartialResult& a, const PartialResult& b) { return a.out.cpu().equal(b.out) && a.lse.cpu().equal(b.lse); };
        for (size_t i = 0; i < tiers.size(); ++i) {
          const auto on_host = (*impl)(q, k_store, v_store, host[i]);
          ++compared;
          if (!same((*impl)(qd, kd, vd, device[i]), on_host)) ++differ;
          if (!same(together[i], on_host)) ++together_differ;
        }
      }
  std::printf("{\"part\":\"splitKeyDevice\",\"device\":\"%s\",\"compared\":%lld,\"differ\":%lld,\"togetherDiffer\":%lld,\"coverageErrors\":%lld}\n",
              target.is_cuda() ? "cuda" : "cpu", (long long)compared, (long long)differ, (long long)together_differ, (long long)coverage_errors);
}

// The merge's CUDA kernel against its CPU loop, where this is a CUDA build on a machine with a GPU (the window runs it):
// the plans of 60 random trees' steps (states read in chunks among them; windows; the questions apart and not), each
// tier's result random (out in fp32 and in bf16, at head dims 64 and 128; log-sum-exps finite), merged into a new array
// and, where the first tier holds every row, in place over the rows the plan lists. Not bit for bit: the weights are the
// device's expf and the CPU's (attention_merge_math.h), whose last bits may differ, so the largest difference of each
// dtype is reported beside the elements that differ; a wrong entry or row differs by the values' own size. Elsewhere
// the same comparison runs with the CPU as the "device" (the check itself exercised; it says which device ran).
void check_merge_device() {
  const at::Device target = at::hasCUDA() ? at::Device(at::kCUDA) : at::Device(at::kCPU);
  int64_t compared = 0, differ = 0, in_place_compared = 0, in_place_differ = 0;
  double worst_fp32 = 0, worst_bf16 = 0;
  // Whether the two agree bit for bit; the largest difference goes to its dtype's worst.
  const auto same = [&](const at::Tensor& on_target, const at::Tensor& on_host) {
    const auto got = on_target.cpu().to(at::kDouble), want = on_host.to(at::kDouble);
    if (got.sizes() != want.sizes()) return false;
    const double worst = got.numel() ? (got - want).abs().max().item<double>() : 0.0;
    double& of_dtype = on_host.scalar_type() == at::kBFloat16 ? worst_bf16 : worst_fp32;
    of_dtype = std::max(of_dtype, std::isnan(worst) ? INFINITY : worst);
    return worst == 0.0;
  };
  for (int tree = 0; tree < 60; ++tree) {
    const auto tr = random_tree(/*long_states=*/tree >= 40);
    if (tr.compute.empty()) continue;
    const std::optional<int64_t> window = uniform(0, 2) == 0 ? std::optional<int64_t>(uniform(2, 50)) : std::nullopt;
    std::vector<int64_t> slots(tr.packed.ids.size());
    for (size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<int64_t>(i);
    for (const auto& step : plan_steps(tr.packed, slots, tr.compute, static_cast<int64_t>(tr.compute.size()))) {
      const auto& b = step.batch;
      const auto layout = layout_of(b);
      const int64_t queries = layout.positions.size(0);
      for (const bool apart : {false, true}) {
        const auto plan = plan_cascade(layout, b.key_positions, b.key_segments, window, apart);
        auto on_target = prepare_merge(plan, target);
        for (auto* t : {&on_target.begin_on_device, &on_target.entry_on_device, &on_target.written_on_device})
          if (t->defined()) *t = t->to(target);
        const auto& first = plan.tiers[0];
        bool holds_every_row = first.total_q() == queries;
        for (int32_t r = 0; holds_every_row && r < first.total_q(); ++r) holds_every_row = first.q_rows[r] == r;
        for (const int64_t dim : {64, 128})
          for (const auto dtype : {at::kFloat, at::kBFloat16}) {
            const int64_t heads = 4;
            std::vector<PartialResult> host_parts, target_parts;
            for (const auto& tier : plan.tiers) {
              host_parts.push_back({at::randn({tier.total_q(), heads, dim}).to(dtype), at::randn({heads, tier.total_q()}) * 3});
              target_parts.push_back({host_parts.back().out.to(target), host_parts.back().lse.to(target)});
            }
            const auto merged = merge_attention(prepare_merge(plan, at::kCPU), host_parts, dtype);
            ++compared;
            if (!same(merge_attention(on_target, target_parts, dtype), merged)) ++differ;
            if (!holds_every_row) continue;
            // In place: into copies of the first tier's result, each side's own.
            auto host_own = host_parts, target_own = target_parts;
            host_own[0].out = host_parts[0].out.clone();
            target_own[0].out = target_parts[0].out.clone();
            ++in_place_compared;
            if (!same(merge_attention(on_target, target_own, dtype, true), merge_attention(prepare_merge(plan, at::kCPU), host_own, dtype, true)))
              ++in_place_differ;
          }
      }
    }
  }
  std::printf("{\"part\":\"mergeDevice\",\"device\":\"%s\",\"compared\":%lld,\"differ\":%lld,\"inPlaceCompared\":%lld,\"inPlaceDiffer\":%lld,"
              "\"worstFp32\":%.3e,\"worstBf16\":%.3e}\n",
              target.is_cuda() ? "cuda" : "cpu", (long long)compared, (long long)differ, (long long)in_place_compared, (long long)in_place_differ,
              worst_fp32, worst_bf16);
}

// Where a graph step is cut into graphs (runner/step_graphs.h, --cuda-graph-chunks): each graph's first layer, for the
// layer counts of the families' depths and the graphs asked.
void check_graph_cuts() {
  std::printf("{\"part\":\"graphCuts\",\"cuts\":{");
  const char* comma = "";
  for (const auto& [layers, graphs] : std::vector<std::pair<int64_t, int64_t>>{{28, 1}, {28, 3}, {28, 5}, {28, 8}, {36, 8}, {3, 8}, {1, 8}}) {
    std::printf("%s\"%lld of %lld\":[", comma, (long long)graphs, (long long)layers);
    const auto first = graph_first_layers(layers, graphs);
    for (size_t i = 0; i < first.size(); ++i) std::printf("%s%lld", i ? "," : "", (long long)first[i]);
    std::printf("]");
    comma = ",";
  }
  std::printf("}}\n");
}

int main(int argc, char** argv) {
  at::manual_seed(7);
  at::set_num_threads(1);
  // `cascade_check split-key-device`: that part alone (the GPU window's, after its build).
  if (argc > 1 && std::string(argv[1]) == "split-key-device") {
    check_split_key_device();
    return 0;
  }
  // `cascade_check merge-device`: that part alone (the GPU window's too).
  if (argc > 1 && std::string(argv[1]) == "merge-device") {
    check_merge_device();
    return 0;
  }
  Totals t;
  FixedTotals f;
  // 400 trees, then 40 whose states are read in chunks.
  for (int tree = 0; tree < 440; ++tree) {
    const auto tr = random_tree(/*long_states=*/tree >= 400);
    const int64_t n = static_cast<int64_t>(tr.compute.size());
    if (n == 0) continue;
    ++t.trees;
    const std::optional<int64_t> window = uniform(0, 2) == 0 ? std::optional<int64_t>(uniform(2, 50)) : std::nullopt;
    const double softcap = uniform(0, 3) == 0 ? 2.0 : 0.0;
    std::vector<int64_t> slots(tr.packed.ids.size());
    for (size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<int64_t>(i);
    const int64_t step_tokens = uniform(0, 1) ? n : uniform(1, n);
    const auto steps = plan_steps(tr.packed, slots, tr.compute, step_tokens);
    for (size_t s = 0; s < steps.size(); ++s) {
      const auto& b = steps[s].batch;
      ++t.steps;
      const bool numeric = tree % 4 == 0;
      check_layout(layout_of(b), b, window, numeric, softcap, t);
      if (!b.output_rows.empty()) check_layout(output_layout(b), b, window, numeric, softcap, t);
      for (const bool apart : {false, true}) check_fixed(b, window, numeric, apart, f);
    }
  }
  std::printf("{\"part\":\"plans\",\"trees\":%lld,\"steps\":%lld,\"layouts\":%lld,\"mismatched\":%lld,\"emptyTiers\":%lld,\"keylessEntries\":%lld,"
              "\"windowedTiers\":%lld,\"chunkedTiers\":%lld,\"questionTiers\":%lld,\"maxTiers\":%lld,\"compared\":%lld,\"worstReference\":%.3e,\"worstAten\":%.3e,\"stackedMergeDiffers\":%lld,"
              "\"inPlaceMerges\":%lld,\"inPlaceMergeDiffers\":%lld,\"worstSplitKey\":%.3e,\"worstSplitKeyBf16\":%.3e,\"splitKeyCoverageErrors\":%lld}\n",
              (long long)t.trees, (long long)t.steps, (long long)t.layouts, (long long)t.mismatched, (long long)t.empty_tiers,
              (long long)t.keyless_entries, (long long)t.windowed_tiers, (long long)t.chunked_tiers, (long long)t.question_tiers, (long long)t.max_tiers, (long long)t.compared, t.worst_reference, t.worst_aten,
              (long long)stacked_merge_differs, (long long)in_place_merges, (long long)in_place_merge_differs, t.worst_split_key, t.worst_split_key_bf16, (long long)plan_coverage_errors);
  std::printf("{\"part\":\"fixed\",\"fixed\":%lld,\"refused\":%lld,\"refusedUnwindowed\":%lld,\"mismatched\":%lld,\"keylessEntries\":%lld,"
              "\"shapes\":%lld,\"shapeDifferences\":%lld,\"compared\":%lld,\"bitsDiffer\":%lld,\"splitKeyCompared\":%lld,\"splitKeyBitsDiffer\":%lld,\"withoutOwnTier\":%lld,\"paddingRows\":%lld,\"paddingRowsSeeingMore\":%lld,\"largestBucket\":%lld,"
              "\"flashBlocks\":%lld,\"workingBlocks\":%lld}\n",
              (long long)f.fixed, (long long)f.refused, (long long)f.refused_unwindowed, (long long)f.mismatched, (long long)f.keyless_entries,
              (long long)f.shapes, (long long)f.shape_differences, (long long)f.compared, (long long)f.bits_differ, (long long)f.split_key_compared, (long long)f.split_key_bits_differ, (long long)f.without_own_tier,
              (long long)f.padding_rows, (long long)f.padding_rows_seeing_more, (long long)f.largest_bucket, (long long)f.flash_blocks,
              (long long)f.working_blocks);
  std::printf("{\"part\":\"stepKeys\",\"tiers\":%lld,\"fixedTiers\":%lld,\"differ\":%lld}\n", (long long)step_key_tiers,
              (long long)fixed_step_key_tiers, (long long)step_key_differs);
  std::printf("{\"part\":\"storeRuns\",\"tiers\":%lld,\"fixedTiers\":%lld,\"differ\":%lld}\n", (long long)store_run_tiers,
              (long long)fixed_store_run_tiers, (long long)store_run_differs);
  std::printf("{\"part\":\"cpu\",\"compared\":%lld,\"storeCompared\":%lld,\"storeDiffer\":%lld,\"worstPlain\":%.3e,\"worst\":{",
              (long long)t.compared, (long long)t.store_compared, (long long)t.store_differ, t.worst_plain);
  const char* comma = "";
  for (const auto& [name, worst] : t.worst_cpu) {
    std::printf("%s\"%s\":%.3e", comma, name.c_str(), worst);
    comma = ",";
  }
  std::printf("}}\n");
  check_split_key_math();
  check_split_key_device();
  check_merge_device();
  check_bench_grids();
  check_keyless_row();
  check_empty_row();
  check_upload();
  check_graph_cuts();
  return 0;
}
