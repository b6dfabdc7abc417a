// State boundaries (a state's partial last block) waiting to enter the prefix
// cache. With registration "after", the server registers a state's boundary
// once it has sent the response, so the next question about the same state
// hits every token; until then its blocks are held here under a ticket. Under
// memory pressure the held blocks are given back first (the tickets are dropped).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cache/block_pool.h"

namespace tq {

class PendingBoundaries {
 public:
  explicit PendingBoundaries(BlockPool& pool) : pool_(pool) {}
  ~PendingBoundaries() { drop_all(); }
  // Retains the blocks holding `tokens` and returns the ticket that registers them.
  int64_t hold(const std::vector<int32_t>& blocks, const std::vector<int64_t>& tokens, const std::string& salt = "");
  // Enters a held boundary into the prefix cache; false when it was dropped.
  bool register_boundary(int64_t ticket);
  // Releases every held boundary's blocks; returns how many were dropped.
  int64_t drop_all();
  int64_t size() const { return static_cast<int64_t>(held_.size()); }

 private:
  struct Held {
    std::vector<int32_t> blocks;
    std::vector<int64_t> tokens;
    std::string salt;
  };
  BlockPool& pool_;
  std::map<int64_t, Held> held_;
  int64_t next_ticket_ = 0;
};

}  // namespace tq
