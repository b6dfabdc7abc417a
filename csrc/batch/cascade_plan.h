// A step's attention as a cascade (the GPU's form: docs/gpu.md, "Cascade
// attention"): a few varlen batches ("tiers") whose partial results, each an
// output and a log-sum-exp per row, are merged per query row. Built once per
// step on the host from the step's layout, in O(tokens), as plain int32 arrays
// a kernel reads as they are.
//
// Two tiers, each one varlen call:
//   own    every run of a segment's queries over its lineage below the state:
//          a state's new tokens over the state (cached prefix + new), a shared
//          segment's over itself, a question's over its shared segment (if any)
//          and itself; causal. Planned with the questions apart, the runs of
//          shared segments and questions (few rows each, beside a state's run of
//          hundreds) form a tier of their own, "own-questions", after "own":
//          each gets the kernel its rows suit (split-key attention reads them
//          in place), and a row's merge takes its tiers in the same order.
//   state  question and shared-segment rows over their state's keys; no mask
//          (every state key comes before them). All such rows of one state form
//          one sequence per chunk of the state's keys (at most kStateChunks
//          chunks of at least kStateChunkKeys keys, from the state's first): they
//          read each chunk as one batch, the chunks side by side, and the merge
//          takes a row's chunks in order. The chunks are the state's alone, so a
//          row's arithmetic does not depend on what else the step holds.
// Together they cover exactly what the engine's one visibility rule
// (visibility.h) lets a query see, and nothing twice. With a sliding window the
// state tier is cut per run, each with the window its positions give, and runs
// with the same window share a tier: a tier has one mask.
//
// A tier's mask is FlashAttention-2's, per sequence: query row i of nq is
// aligned with key a = i + nk - nq (bottom-right); key j is visible when
// (!causal || j <= a) && (window_left < 0 || j >= a - window_left).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "batch/visibility.h"

namespace tq {

// A state tier's chunks: FlashAttention-2 walks a sequence's keys in one block per 128 rows and head, so a question's
// rows over a long state take about as long as its longest chunk (docs/gpu.md, "The fixed form's grids"). At most
// kStateChunks, so that a row's merge entries (its own tier's, then its chunks') stay within the merge's 8.
constexpr int32_t kStateChunks = 6, kStateChunkKeys = 128;

struct CascadeTier {
  std::string name;          // "own", "own-questions" or "state"
  bool causal = false;
  int32_t window_left = -1;  // -1: no window
  std::vector<int32_t> cu_q{0}, cu_k{0};  // [sequences + 1] offsets into q_rows, k_rows
  std::vector<int32_t> q_rows{};          // [total_q] the step query row of each tier row
  std::vector<int32_t> k_rows{};          // [total_k] the step key of each tier key
  int32_t max_q = 0, max_k = 0;           // the longest sequence's rows and keys

  int32_t sequences() const { return static_cast<int32_t>(cu_q.size()) - 1; }
  int32_t total_q() const { return cu_q.back(); }
  int32_t total_k() const { return cu_k.back(); }
};

// The keys [first, last] tier row `row` of sequence `seq` sees (sequence-local
// key indices); empty (first > last) when it sees none.
struct KeyRange {
  int32_t first, last;
  int32_t count() const { return last >= first ? last - first + 1 : 0; }
};
KeyRange visible_keys(const CascadeTier& tier, int32_t seq, int32_t row);

struct CascadePlan {
  std::vector<CascadeTier> tiers;  // none empty
  // The merge: step query row r combines entries [merge_begin[r], merge_begin[r + 1]),
  // each (tier, row in that tier), in tier order; each entry sees at least one key.
  std::vector<int32_t> merge_begin;  // [queries + 1]
  std::vector<int32_t> merge_tier, merge_row;
  int32_t max_entries = 0;           // the most entries of one row
  int32_t merge_capacity = 0;        // entries the merge's arrays hold (fixed form: batch/fixed_cascade.h); 0: as many as there are
  // Where the first tier holds every row of the step in order, the merge writes into its result and leaves alone a
  // row whose one entry is its own row there: these are the rows it writes (a prefill's questions, a state's shared
  // segments), ascending, so that its launch is sized by them rather than by the step.
  std::vector<int32_t> merge_written;
  int32_t merge_written_capacity = 0;  // the list's length (fixed form; -1 past its rows); 0: as many as there are
  bool questions_apart = false;      // planned with the questions' own runs in a tier of their own
};

// keys: [Tk] positions and segments of the step's keys (batch/step_plan.h: each segment's keys
// contiguous, by position); queries: the rows attending (the step's, or its output rows).
// questions_apart: the runs of shared segments and questions in a tier of their own (above).
CascadePlan plan_cascade(const QueryLayout& queries, const at::Tensor& key_positions, const at::Tensor& key_segments,
                         std::optional<int64_t> window, bool questions_apart = false);

// Fills the plan's merge from its tiers, for `queries` step rows: each tier row that sees a key
// is an entry of its query row.
void plan_merge(CascadePlan& plan, int64_t queries);

// [Tq, Tk] int32: how many times the plan lets each query see each key, over all its entries.
// For tests: it must equal visibility_mask (1 where visible, else 0) element for element.
at::Tensor cascade_visibility(const CascadePlan& plan, int64_t queries, int64_t keys);

}  // namespace tq
