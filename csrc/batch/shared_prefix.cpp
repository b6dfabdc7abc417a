#include "batch/shared_prefix.h"

#include <algorithm>
#include <numeric>

namespace tq {
namespace {

// A shared segment shorter than this saves too little to be worth one.
constexpr int64_t kMinSharedTokens = 4;
// Runs are at most this long, which bounds the cut's search at n * kMaxRun steps
// for a batch of many alike questions (a longer run would save one prefix more per kMaxRun).
constexpr size_t kMaxRun = 512;

int64_t common_prefix(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  return std::mismatch(a.begin(), a.begin() + static_cast<int64_t>(std::min(a.size(), b.size())), b.begin()).first - a.begin();
}

// The longest prefix of at most `prefix` tokens that ends where a key pair does: at an odd position.
int64_t ending_a_pair(int64_t prefix, int64_t first_position) { return prefix - (first_position + prefix) % 2; }

}  // namespace

std::vector<SharedRun> plan_shared_prefixes(const std::vector<const std::vector<int64_t>*>& questions, const std::vector<int64_t>& readout_at,
                                            int64_t first_position) {
  const size_t n = questions.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return *questions[a] < *questions[b]; });
  // In sorted order the common prefix of a run is the minimum over adjacent pairs.
  std::vector<int64_t> adjacent(n, 0);
  for (size_t i = 1; i < n; ++i) adjacent[i] = common_prefix(*questions[order[i - 1]], *questions[order[i]]);

  // saved[j]: most tokens saved over the first j sorted questions; cut[j]: where its last run starts.
  std::vector<int64_t> saved(n + 1, 0), shared_of(n + 1, 0);
  std::vector<size_t> cut(n + 1, 0);
  for (size_t j = 1; j <= n; ++j) {
    saved[j] = saved[j - 1];  // question j - 1 alone
    cut[j] = j - 1;
    int64_t prefix = readout_at[order[j - 1]];  // the readout stays in the question's own tokens
    for (size_t i = j - 1; i-- > 0 && j - i <= kMaxRun;) {
      prefix = std::min({prefix, adjacent[i + 1], readout_at[order[i]]});
      const int64_t shared = ending_a_pair(prefix, first_position);
      if (shared < kMinSharedTokens) break;
      const int64_t gain = saved[i] + static_cast<int64_t>(j - i - 1) * shared;
      if (gain > saved[j]) {
        saved[j] = gain;
        cut[j] = i;
        shared_of[j] = shared;
      }
    }
  }
  std::vector<SharedRun> runs;
  for (size_t j = n; j > 0; j = cut[j]) {
    SharedRun run;
    run.shared_tokens = cut[j] + 1 < j ? shared_of[j] : 0;
    for (size_t k = cut[j]; k < j; ++k) run.members.push_back(order[k]);
    runs.push_back(std::move(run));
  }
  std::reverse(runs.begin(), runs.end());
  return runs;
}

}  // namespace tq
