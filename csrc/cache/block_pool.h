// The KV cache's block bookkeeping and its prefix cache.
//
// Blocks are reference counted. An unreferenced block sits on an LRU list and
// keeps its cached contents until it is handed out again (lazy eviction, as in
// vLLM): allocation takes the least recently used block and drops its hash.
//
// Prefix caching: a block of a state is keyed by a chained hash of (the parent
// block's hash, the block's token ids), seeded with the model/dtype identity.
// A hit is verified against the stored token ids and parent block, so by
// induction the whole matched prefix is exactly the request's tokens: no answer
// can come from a hash collision. Full blocks are registered as soon as they
// are computed; a state's partial last block (its "boundary") is registered on
// request, so that the next question about the same state hits every token.
//
// A cache salt (a tenant's, docs/operations.md) seeds the chain: a state's blocks under one salt
// form their own prefix tree, which lookups under another salt (or none) never reach. A first
// block keeps its salt and a hit verifies it too, so that not even a hash collision crosses
// salts; later blocks are reached only through their parents.
#pragma once
#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

namespace tq {

struct CacheStats {
  int64_t lookups = 0;            // states looked up
  int64_t hit_tokens = 0, miss_tokens = 0;
  int64_t hit_blocks = 0;
  int64_t registered_blocks = 0;  // blocks entered into the prefix cache
  int64_t evicted_blocks = 0;     // cached blocks whose contents were dropped for reuse
  int64_t cached_blocks = 0;      // blocks currently holding a cached prefix
  int64_t free_blocks = 0;        // unreferenced blocks (cached or empty)
  int64_t total_blocks = 0;
  int64_t salts = 0;              // distinct cache salts whose prefixes hold cached blocks (by their first block)
};

class BlockPool {
 public:
  BlockPool(int64_t num_blocks, int64_t block_size, uint64_t identity);

  // n blocks with reference count 1; evicts least recently used cached blocks
  // as needed. Throws KV_CACHE_CAPACITY when fewer than n blocks are unreferenced.
  std::vector<int32_t> allocate(int64_t n);
  void retain(const std::vector<int32_t>& blocks);
  void release(const std::vector<int32_t>& blocks);

  // The longest cached prefix of `tokens`, whole blocks then possibly a
  // registered partial last block. The matched blocks are retained.
  struct Match {
    std::vector<int32_t> blocks;
    int64_t tokens = 0;
  };
  Match match(const std::vector<int64_t>& tokens, const std::string& salt = "");

  // Enters the blocks holding `tokens` (block i holds tokens [i*bs, (i+1)*bs))
  // into the prefix cache: every full block, and the partial last one when
  // `include_partial`. Blocks whose content is already cached are left out.
  void register_prefix(const std::vector<int32_t>& blocks, const std::vector<int64_t>& tokens, bool include_partial, const std::string& salt = "");

  int64_t block_size() const { return block_size_; }
  int64_t free_blocks() const { return static_cast<int64_t>(lru_.size()); }
  int64_t total_blocks() const { return static_cast<int64_t>(info_.size()); }
  CacheStats stats() const;

 private:
  struct Block {
    int32_t refs = 0;
    bool cached = false;
    uint64_t hash = 0;
    int32_t parent = -1;          // the cached block before this one in its prefix, -1 at the start
    std::vector<int64_t> tokens;  // verified on every hit
    std::string salt;             // a first block's cache salt (empty: none), verified on every hit
    std::list<int32_t>::iterator lru_pos;
  };
  uint64_t chain(uint64_t parent_hash, const int64_t* tokens, int64_t n) const;
  // The hash a prefix's chain starts from under `salt`.
  static uint64_t seed(const std::string& salt);
  // Whether cached block `b` holds `tokens[start, start + len)` after `parent` (and, a first block, under `salt`).
  bool holds(int32_t b, int32_t parent, const std::vector<int64_t>& tokens, int64_t start, int64_t len, const std::string& salt) const;
  void uncache(int32_t block);

  int64_t block_size_;
  uint64_t identity_;
  std::vector<Block> info_;
  std::list<int32_t> lru_;  // unreferenced blocks, least recently used first
  std::unordered_multimap<uint64_t, int32_t> by_hash_;
  std::unordered_map<std::string, int64_t> salted_first_blocks_;  // cached first blocks by salt (non-empty)
  CacheStats stats_;
};

}  // namespace tq
