#include "cache/block_pool.h"

#include <algorithm>
#include <string>

#include "common/errors.h"

namespace tq {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

BlockPool::BlockPool(int64_t num_blocks, int64_t block_size, uint64_t identity)
    : block_size_(block_size), identity_(mix(identity)), info_(num_blocks) {
  for (int32_t b = 0; b < num_blocks; ++b) info_[b].lru_pos = lru_.insert(lru_.end(), b);
}

uint64_t BlockPool::chain(uint64_t parent_hash, const int64_t* tokens, int64_t n) const {
  uint64_t h = mix(parent_hash ^ identity_) ^ static_cast<uint64_t>(n);
  for (int64_t i = 0; i < n; ++i) h = mix(h ^ static_cast<uint64_t>(tokens[i]));
  return h;
}

uint64_t BlockPool::seed(const std::string& salt) { return salt.empty() ? 0 : mix(std::hash<std::string>{}(salt)) | 1; }

bool BlockPool::holds(int32_t b, int32_t parent, const std::vector<int64_t>& tokens, int64_t start, int64_t len, const std::string& salt) const {
  const Block& blk = info_[b];
  return blk.parent == parent && (parent >= 0 || blk.salt == salt) && static_cast<int64_t>(blk.tokens.size()) == len &&
         std::equal(blk.tokens.begin(), blk.tokens.end(), tokens.begin() + start);
}

void BlockPool::uncache(int32_t b) {
  Block& blk = info_[b];
  if (!blk.cached) return;
  if (!blk.salt.empty() && --salted_first_blocks_[blk.salt] == 0) salted_first_blocks_.erase(blk.salt);
  blk.salt.clear();
  auto range = by_hash_.equal_range(blk.hash);
  for (auto it = range.first; it != range.second; ++it)
    if (it->second == b) {
      by_hash_.erase(it);
      break;
    }
  blk.cached = false;
  blk.tokens.clear();
  blk.parent = -1;
  ++stats_.evicted_blocks;
}

std::vector<int32_t> BlockPool::allocate(int64_t n) {
  if (n > free_blocks())
    throw EngineError(code::kCacheCapacity,
                      "a segment needs " + std::to_string(n) + " more KV blocks but only " + std::to_string(free_blocks()) + " of the cache's " +
                          std::to_string(total_blocks()) + " are free (raise --cache-mib)",
                      {{"neededBlocks", n}, {"freeBlocks", free_blocks()}});
  std::vector<int32_t> out;
  out.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    int32_t b = lru_.front();
    lru_.pop_front();
    uncache(b);
    info_[b].refs = 1;
    out.push_back(b);
  }
  // In ascending order: the blocks a segment takes at once then lie in runs of slots (all of them, from a fresh pool),
  // which attention reads in place rather than gathered (kernels/cascade/partial_attention.h, store_runs). A cached
  // prefix's blocks are evicted tail first: they would come back in descending order.
  std::sort(out.begin(), out.end());
  return out;
}

void BlockPool::retain(const std::vector<int32_t>& blocks) {
  for (auto b : blocks)
    if (info_[b].refs++ == 0) lru_.erase(info_[b].lru_pos);
}

void BlockPool::release(const std::vector<int32_t>& blocks) {
  // Empty blocks go to the front (reused first). Cached blocks go to the back
  // in reverse order, so that the tail of a prefix is evicted before its head.
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    Block& blk = info_[*it];
    if (--blk.refs == 0) blk.lru_pos = blk.cached ? lru_.insert(lru_.end(), *it) : lru_.insert(lru_.begin(), *it);
  }
}

BlockPool::Match BlockPool::match(const std::vector<int64_t>& tokens, const std::string& salt) {
  Match m;
  ++stats_.lookups;
  uint64_t h = seed(salt);
  int32_t parent = -1;
  const int64_t n = static_cast<int64_t>(tokens.size());
  for (int64_t start = 0; start < n; start += block_size_) {
    const int64_t len = std::min(block_size_, n - start);
    const uint64_t key = chain(h, tokens.data() + start, len);
    int32_t found = -1;
    auto range = by_hash_.equal_range(key);
    for (auto it = range.first; it != range.second && found < 0; ++it)
      if (holds(it->second, parent, tokens, start, len, salt)) found = it->second;
    if (found < 0) break;
    m.blocks.push_back(found);
    m.tokens += len;
    h = key;
    parent = found;
    if (len < block_size_) break;  // a partial block ends the prefix
  }
  retain(m.blocks);
  stats_.hit_tokens += m.tokens;
  stats_.miss_tokens += n - m.tokens;
  stats_.hit_blocks += static_cast<int64_t>(m.blocks.size());
  return m;
}

void BlockPool::register_prefix(const std::vector<int32_t>& blocks, const std::vector<int64_t>& tokens, bool include_partial,
                                const std::string& salt) {
  uint64_t h = seed(salt);
  int32_t parent = -1;
  const int64_t n = static_cast<int64_t>(tokens.size());
  for (size_t i = 0; i < blocks.size(); ++i) {
    const int64_t start = static_cast<int64_t>(i) * block_size_;
    if (start >= n) break;
    const int64_t len = std::min(block_size_, n - start);
    if (len < block_size_ && !include_partial) break;
    const uint64_t key = chain(h, tokens.data() + start, len);
    Block& blk = info_[blocks[i]];
    if (!blk.cached) {
      // Another block may already hold this content (computed by another request): keep that one.
      bool known = false;
      auto range = by_hash_.equal_range(key);
      for (auto it = range.first; it != range.second && !known; ++it) {
        known = holds(it->second, parent, tokens, start, len, salt);
        if (known) parent = it->second;
      }
      if (known) {
        h = key;
        continue;
      }
      blk.cached = true;
      blk.hash = key;
      blk.parent = parent;
      blk.tokens.assign(tokens.begin() + start, tokens.begin() + start + len);
      if (parent < 0 && !salt.empty()) {
        blk.salt = salt;
        ++salted_first_blocks_[salt];
      }
      by_hash_.emplace(key, blocks[i]);
      ++stats_.registered_blocks;
    }
    h = key;
    parent = blocks[i];
  }
}

CacheStats BlockPool::stats() const {
  CacheStats s = stats_;
  s.cached_blocks = static_cast<int64_t>(by_hash_.size());
  s.free_blocks = free_blocks();
  s.total_blocks = total_blocks();
  s.salts = static_cast<int64_t>(salted_first_blocks_.size());
  return s;
}

}  // namespace tq
