// A step's keys laid out in pairs for attention's mix on the vdpbf16ps GEMM
// family, which adds two keys per instruction: (acc + p1 v1) + p0 v0 in one
// lane. Which keys share an instruction changes the rounding, so the pairs
// must be the same for a query whatever the batch, the chunk or the cache:
// they are fixed by the keys themselves. Within a segment's run of keys
// (packed_tokens.h: a segment's keys lie together, in position order), the
// keys at positions 2i and 2i + 1 form a pair; a key without its partner in
// the run (the run starts at an odd position or ends at an even one) is paired
// with a gap, a key that no query sees. A key a query does not see, gap or
// masked, has probability 0 and adds exactly 0, so a query's chain is its own
// pairs in position order, however many other keys lie between them.
//
// Places are the padded key order: each pair takes places 2t and 2t + 1.
// Without torch, so that test/native/pairs_check.cpp can check it with the kernels.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tq {

// positions, segments: a step's n keys (step_plan.h). Returns the key at each
// place, -1 at a gap.
std::vector<int64_t> pair_keys(const int64_t* positions, const int64_t* segments, int64_t n);

}  // namespace tq
