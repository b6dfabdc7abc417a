// Paged KV cache. Keys and values of every layer live in one pool of
// fixed-size blocks (default 16 tokens); a sequence owns a block table, and a
// token's slot is blocks[i / block_size] * block_size + i % block_size.
//
// A question's tokens are a sequence of their own whose positions continue
// after the state's (positions live in PackedTokens): they start at offset 0
// of their own blocks, so many questions share the state's blocks without
// copy-on-write of its partial last block. A sequence may start with blocks
// found in the prefix cache (block_pool.h); it only ever writes to blocks it
// allocated itself.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "cache/block_pool.h"

namespace tq {

struct KvCacheShape {
  int64_t layers = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 16;
  int64_t num_blocks = 0;
  at::ScalarType dtype = at::kFloat;
  at::Device device = at::kCPU;

  int64_t bytes_per_block() const { return 2 * layers * block_size * kv_heads * head_dim * static_cast<int64_t>(at::elementSize(dtype)); }
};

class KvCache {
 public:
  KvCache(const KvCacheShape& shape, uint64_t identity);
  const KvCacheShape& shape() const { return shape_; }
  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }
  // Stores k, v ([T, kv_heads, head_dim]) of one layer at the given slots (int64, on the cache's device).
  void write(int64_t layer, const at::Tensor& slots, const at::Tensor& k, const at::Tensor& v);
  at::Tensor keys(int64_t layer, const at::Tensor& slots) const;
  at::Tensor values(int64_t layer, const at::Tensor& slots) const;
  // A layer's whole store, [slots, kv_heads, head_dim]: where a fused kernel writes (kernels/fused/).
  at::Tensor& key_layer(int64_t layer) { return k_[layer]; }
  at::Tensor& value_layer(int64_t layer) { return v_[layer]; }
  // A slot outside every block the pool hands out (one extra block, zeros at start): where a
  // bucketed step's padding tokens write and read their keys and values (batch/step_buckets.h).
  int64_t scratch_slot() const { return shape_.num_blocks * shape_.block_size; }
  int64_t bytes() const { return shape_.num_blocks * shape_.bytes_per_block(); }

 private:
  KvCacheShape shape_;
  BlockPool pool_;
  // Per layer: [num_blocks, block_size, kv_heads, head_dim], kept as its view [num_blocks * block_size, kv_heads, head_dim].
  std::vector<at::Tensor> k_, v_;
};

// A run of tokens with its own blocks, optionally starting with cached blocks.
// Releases its blocks when destroyed.
class Sequence {
 public:
  Sequence(KvCache& cache, int64_t length, BlockPool::Match cached = {});
  ~Sequence();
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  int64_t length() const { return length_; }
  int64_t cached_tokens() const { return cached_tokens_; }
  const std::vector<int32_t>& blocks() const { return blocks_; }
  int64_t slot(int64_t i) const;  // slot of own token i

 private:
  KvCache& cache_;
  int64_t length_;
  int64_t cached_tokens_;
  std::vector<int32_t> blocks_;
};

}  // namespace tq
