// Paged KV cache. Keys and values of every layer live in one pool of
// fixed-size blocks (default 16 tokens); a sequence owns a block table, and a
// token's slot is blocks[i / block_size] * block_size + i % block_size.
//
// A sequence may have a parent whose tokens come before its own (a question's
// parent is its state). The child's own tokens start at offset 0 of its own
// blocks, so many children share the parent's blocks without copy-on-write of
// a partial last block. Blocks are reference counted, so that prefix caching
// (shared blocks found by hash) plugs into the same pool.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace tq {

struct KvCacheShape {
  int64_t layers = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 16;
  int64_t num_blocks = 0;
  at::ScalarType dtype = at::kFloat;
};

class BlockPool {
 public:
  explicit BlockPool(int64_t num_blocks);
  // Takes n free blocks with reference count 1; throws KV_CACHE_CAPACITY when short.
  std::vector<int32_t> allocate(int64_t n);
  void retain(const std::vector<int32_t>& blocks);
  void release(const std::vector<int32_t>& blocks);
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t total_blocks() const { return static_cast<int64_t>(ref_count_.size()); }

 private:
  std::vector<int32_t> free_;
  std::vector<int32_t> ref_count_;
};

class KvCache {
 public:
  explicit KvCache(const KvCacheShape& shape);
  const KvCacheShape& shape() const { return shape_; }
  BlockPool& pool() { return pool_; }
  // Stores k, v ([T, kv_heads, head_dim]) of one layer at the given slots.
  void write(int64_t layer, const at::Tensor& slots, const at::Tensor& k, const at::Tensor& v);
  at::Tensor keys(int64_t layer, const at::Tensor& slots) const;
  at::Tensor values(int64_t layer, const at::Tensor& slots) const;
  int64_t bytes() const;

 private:
  KvCacheShape shape_;
  BlockPool pool_;
  std::vector<at::Tensor> k_, v_;  // per layer: [num_blocks * block_size, kv_heads, head_dim]
};

// A run of tokens with its own blocks, optionally continuing a parent sequence.
// Returns its blocks to the pool when destroyed.
class Sequence {
 public:
  Sequence(KvCache& cache, int64_t length, const Sequence* parent = nullptr);
  ~Sequence();
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  int64_t length() const { return length_; }
  int64_t start_position() const { return parent_ ? parent_->start_position() + parent_->length() : 0; }
  int64_t slot(int64_t i) const;  // slot of own token i

 private:
  KvCache& cache_;
  const Sequence* parent_;
  int64_t length_;
  std::vector<int32_t> blocks_;
};

}  // namespace tq
