#include "kernels/cpu/attention/key_pairs.h"

namespace tq {

std::vector<int64_t> pair_keys(const int64_t* p, const int64_t* s, int64_t n) {
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(n + n / 2 + 2));
  for (int64_t j = 0; j < n; ++j) {
    // The second place of a pair only for the partner of the key before it.
    if (order.size() % 2 == 1 && !(s[j] == s[j - 1] && p[j] == p[j - 1] + 1 && p[j] % 2 == 1)) order.push_back(-1);
    // An odd position starts a pair only behind a gap.
    if (order.size() % 2 == 0 && p[j] % 2 == 1) order.push_back(-1);
    order.push_back(j);
  }
  if (order.size() % 2 == 1) order.push_back(-1);
  return order;
}

}  // namespace tq
