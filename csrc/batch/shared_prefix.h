// Text that several questions about one state begin with (a shared option
// list or instructions, the chat template's opening) is computed once: the
// questions are sorted, cut into runs, and each run's common prefix becomes a
// segment between the state and the questions' own remaining tokens
// (packed_tokens.h). The cut maximizes the tokens saved; a question's readout
// position always stays in its own segment, so it is always computed.
//
// A shared segment ends where a pair of keys ends (kernels/cpu/attention/key_pairs.h: the
// keys at positions 2i and 2i + 1 of one segment share a vdpbf16ps step of
// attention's mix): its last position is odd. Otherwise the question's keys at
// the cut, one step when it is packed alone, would be two steps beside a
// question it shares text with, and their adds would round in another order:
// the same request answered with other bits in another batch (seen on an Intel
// Xeon under load). A run's prefix is shortened by one token where needed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tq {

struct SharedRun {
  int64_t shared_tokens = 0;    // 0: the members are packed on their own
  std::vector<size_t> members;  // indices into the questions given
};

// questions[i]: the tokens of question i; readout_at[i]: its readout index;
// first_position: the position of a question's first token (its state's
// length). Every question is in exactly one run.
std::vector<SharedRun> plan_shared_prefixes(const std::vector<const std::vector<int64_t>*>& questions, const std::vector<int64_t>& readout_at,
                                            int64_t first_position);

}  // namespace tq
