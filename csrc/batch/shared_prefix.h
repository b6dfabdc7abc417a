// Text that several questions about one state begin with (a shared option
// list or instructions, the chat template's opening) is computed once: the
// questions are sorted, cut into runs, and each run's common prefix becomes a
// segment between the state and the questions' own remaining tokens
// (packed_tokens.h). The cut maximizes the tokens saved; a question's readout
// position always stays in its own segment, so it is always computed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tq {

struct SharedRun {
  int64_t shared_tokens = 0;    // 0: the members are packed on their own
  std::vector<size_t> members;  // indices into the questions given
};

// questions[i]: the tokens of question i; readout_at[i]: its readout index.
// Every question is in exactly one run.
std::vector<SharedRun> plan_shared_prefixes(const std::vector<const std::vector<int64_t>*>& questions, const std::vector<int64_t>& readout_at);

}  // namespace tq
