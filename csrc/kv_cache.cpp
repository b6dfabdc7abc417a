#include "kv_cache.h"

#include <string>

#include "errors.h"

namespace tq {

BlockPool::BlockPool(int64_t num_blocks) : ref_count_(num_blocks, 0) {
  free_.reserve(num_blocks);
  // Reverse so that allocation hands out low block ids first.
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

std::vector<int32_t> BlockPool::allocate(int64_t n) {
  if (n > free_blocks())
    throw EngineError(code::kCacheCapacity,
                      "the KV cache needs " + std::to_string(n) + " more blocks but has " + std::to_string(free_blocks()) +
                          " free of " + std::to_string(total_blocks()),
                      {{"neededBlocks", n}, {"freeBlocks", free_blocks()}});
  std::vector<int32_t> out(free_.end() - n, free_.end());
  free_.resize(free_.size() - n);
  for (auto b : out) ref_count_[b] = 1;
  return out;
}

void BlockPool::retain(const std::vector<int32_t>& blocks) {
  for (auto b : blocks) ++ref_count_[b];
}

void BlockPool::release(const std::vector<int32_t>& blocks) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it)
    if (--ref_count_[*it] == 0) free_.push_back(*it);
}

KvCache::KvCache(const KvCacheShape& shape) : shape_(shape), pool_(shape.num_blocks) {
  // at::empty reserves address space; pages become resident only when written.
  auto opts = at::TensorOptions().dtype(shape.dtype);
  for (int64_t l = 0; l < shape.layers; ++l) {
    k_.push_back(at::empty({shape.num_blocks * shape.block_size, shape.kv_heads, shape.head_dim}, opts));
    v_.push_back(at::empty({shape.num_blocks * shape.block_size, shape.kv_heads, shape.head_dim}, opts));
  }
}

void KvCache::write(int64_t layer, const at::Tensor& slots, const at::Tensor& k, const at::Tensor& v) {
  k_[layer].index_copy_(0, slots, k.to(shape_.dtype));
  v_[layer].index_copy_(0, slots, v.to(shape_.dtype));
}

at::Tensor KvCache::keys(int64_t layer, const at::Tensor& slots) const { return k_[layer].index_select(0, slots); }
at::Tensor KvCache::values(int64_t layer, const at::Tensor& slots) const { return v_[layer].index_select(0, slots); }

int64_t KvCache::bytes() const {
  return 2 * shape_.layers * shape_.num_blocks * shape_.block_size * shape_.kv_heads * shape_.head_dim *
         static_cast<int64_t>(at::elementSize(shape_.dtype));
}

Sequence::Sequence(KvCache& cache, int64_t length, const Sequence* parent)
    : cache_(cache), parent_(parent), length_(length) {
  const int64_t bs = cache.shape().block_size;
  blocks_ = cache.pool().allocate((length + bs - 1) / bs);
}

Sequence::~Sequence() { cache_.pool().release(blocks_); }

int64_t Sequence::slot(int64_t i) const {
  const int64_t bs = cache_.shape().block_size;
  return static_cast<int64_t>(blocks_[i / bs]) * bs + i % bs;
}

}  // namespace tq
