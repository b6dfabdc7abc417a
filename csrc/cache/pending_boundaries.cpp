#include "cache/pending_boundaries.h"

namespace tq {

int64_t PendingBoundaries::hold(const std::vector<int32_t>& blocks, const std::vector<int64_t>& tokens, const std::string& salt) {
  pool_.retain(blocks);
  const int64_t ticket = next_ticket_++;
  held_.emplace(ticket, Held{blocks, tokens, salt});
  return ticket;
}

bool PendingBoundaries::register_boundary(int64_t ticket) {
  auto it = held_.find(ticket);
  if (it == held_.end()) return false;  // dropped under memory pressure
  pool_.register_prefix(it->second.blocks, it->second.tokens, /*include_partial=*/true, it->second.salt);
  pool_.release(it->second.blocks);
  held_.erase(it);
  return true;
}

int64_t PendingBoundaries::drop_all() {
  const int64_t n = size();
  for (auto& [ticket, h] : held_) pool_.release(h.blocks);
  held_.clear();
  return n;
}

}  // namespace tq
