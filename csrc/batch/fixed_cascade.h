// A cascade plan (cascade_plan.h) in a shape that depends on the step's bucket
// and a few capacities alone, for CUDA graphs (docs/gpu.md, "CUDA graphs"). A
// captured graph replays its launches with their grid sizes and host arguments
// baked in: every array a tier's kernel reads must keep its length, and every
// scalar (sequences, longest sequence, rows, keys) its value, from one step of
// the shape to the next. Only the arrays' contents change; a replay reads them
// from the same buffers.
//
// The fixed form has two tiers, own and state, whatever the step holds. Its
// capacities (FixedCapacity) are powers of two taken from the step, so that a
// grid is sized by what the step holds, not by its bucket: FlashAttention-2
// launches a block per sequence, head and 128 rows of the longest sequence,
// empty ones included. Sized by the bucket (a tier's longest its `tokens`, a
// state tier's sequences a bound from the bucket's keys), most of a step's
// blocks were empty, and its attention took longer than the same work
// launched alone (docs/gpu.md, "The fixed form's grids"). Per tier:
//   rows       own: `tokens` (every query row is in it once); state: its
//              capacity, from 8, at most kStateChunks * tokens (a row per chunk
//              of its state: cascade_plan.h), the spare ones in sequences
//              without keys of at most its longest's rows, so no merge entry
//              reads them;
//   sequences  the step's (own: its runs, a run of a segment's rows each;
//              state: its states' chunks), from 1, then empty ones, then the
//              spare rows' (fewer than half the rows but at the floor of 8:
//              a capacity is the power of two at or above what it holds), then
//              one holding the spare keys;
//   longest    the most rows of one sequence, from 8: max_q;
//   keys       own: its capacity, from 64 (a shared segment's keys appear once
//              per question in it, so they can exceed the step's); state: the
//              bucket's. max_k is the tier's keys;
//   merge      tokens + state rows entries, the step's first; the rows it
//              writes in place (cascade_plan.h) a capacity, from 8, at most
//              `tokens`, -1 past the step's.
// Planned with the questions apart (cascade_plan.h), the fixed form has three
// tiers, own, own-questions and state: each own tier's rows, runs, longest and
// keys are capacities of their own (0 where the step has none, so that a warm
// question's step launches nothing for the states' runs it lacks).
// A plan with a window that cuts a state (one tier per window) has no fixed
// form: its step runs without a graph.
#pragma once
#include <cstdint>
#include <optional>

#include "batch/cascade_plan.h"

namespace tq {

// The most keys the own tier may hold in the fixed form.
constexpr int32_t kMaxFixedOwnKeys = 32768;

// What a fixed form holds besides its bucket (see above); part of its launch shape.
struct FixedCapacity {
  int32_t runs = 0, own_longest = 0, own_keys = 0;
  int32_t state_rows = 0, state_sequences = 0, state_longest = 0;
  int32_t merge_written = 0;  // the rows the merge writes in place
  // With the questions apart: the own tier's rows (else every row), and the own-questions tier's.
  int32_t own_rows = 0, question_runs = 0, question_rows = 0, question_longest = 0, question_keys = 0;
};

// The capacities of `plan` (over `tokens` query rows and `keys` keys) in the fixed form; none where it has no fixed
// form (a window that cuts a state, or more than the bounds above allow).
std::optional<FixedCapacity> fixed_capacity(const CascadePlan& plan, int32_t tokens, int32_t keys);

// Puts `plan` in the fixed form; false, leaving it as it is, where it has none.
bool fix_cascade_shape(CascadePlan& plan, int32_t tokens, int32_t keys);

}  // namespace tq
