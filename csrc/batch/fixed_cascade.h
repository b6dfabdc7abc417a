// A cascade plan (cascade_plan.h) in a shape that depends on the step's bucket
// alone, for CUDA graphs (docs/gpu.md, "CUDA graphs"). A captured graph replays
// its launches with their grid sizes and host arguments baked in: every array
// a tier's kernel reads must keep its length, and every scalar (sequences,
// longest sequence, rows, keys) its value, from one step of the bucket to the
// next. Only the arrays' contents change; a replay reads them from the same
// buffers.
//
// The fixed form has two tiers, own and state, whatever the step holds:
//   rows       own: `tokens` rows (it has them already: every query row is in
//              it once); state: kStateChunks * tokens (a row per chunk of its
//              state: cascade_plan.h); a tier's spare rows form sequences of
//              at most `tokens` rows without keys, so no merge entry reads them;
//   keys       own: a power of two from 64 (a shared segment's keys appear once
//              per question in it, so it can exceed the step's keys); state:
//              the bucket's keys. Spare keys form one sequence without rows;
//   sequences  own: tokens + 2; state: tokens + keys / kStateChunkKeys +
//              kStateChunks + 1: the step's, then empty ones, then the spare
//              ones (FlashAttention-2 launches a block for each, so no more);
//   max_q/k    `tokens` (no sequence has more rows) and the tier's keys;
//   merge      (1 + kStateChunks) * tokens entries, the step's first.
// A plan with a window that cuts a state (one tier per window) has no fixed
// form: its step runs without a graph.
#pragma once
#include <cstdint>

#include "batch/cascade_plan.h"

namespace tq {

// The most keys the own tier may hold in the fixed form.
constexpr int32_t kMaxFixedOwnKeys = 32768;

// Puts `plan` (over `tokens` query rows and `keys` keys) in the fixed form; false, leaving it as
// it is, where it has none.
bool fix_cascade_shape(CascadePlan& plan, int32_t tokens, int32_t keys);

}  // namespace tq
