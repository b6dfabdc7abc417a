#include "cache/kv_cache.h"

namespace tq {

KvCache::KvCache(const KvCacheShape& shape, uint64_t identity) : shape_(shape), pool_(shape.num_blocks, shape.block_size, identity) {
  // On the CPU at::empty reserves address space; pages become resident only when written.
  auto opts = at::TensorOptions().dtype(shape.dtype).device(shape.device);
  // num_blocks + 1: the last is the scratch block, zeroed (the others are written before they are read).
  auto blocks = [&] {
    auto all = at::empty({shape.num_blocks + 1, shape.block_size, shape.kv_heads, shape.head_dim}, opts);
    all[shape.num_blocks].zero_();
    return all.view({(shape.num_blocks + 1) * shape.block_size, shape.kv_heads, shape.head_dim});
  };
  for (int64_t l = 0; l < shape.layers; ++l) {
    k_.push_back(blocks());
    v_.push_back(blocks());
  }
}

void KvCache::write(int64_t layer, const at::Tensor& slots, const at::Tensor& k, const at::Tensor& v) {
  k_[layer].index_copy_(0, slots, k.to(shape_.dtype));
  v_[layer].index_copy_(0, slots, v.to(shape_.dtype));
}

at::Tensor KvCache::keys(int64_t layer, const at::Tensor& slots) const { return k_[layer].index_select(0, slots); }
at::Tensor KvCache::values(int64_t layer, const at::Tensor& slots) const { return v_[layer].index_select(0, slots); }

Sequence::Sequence(KvCache& cache, int64_t length, BlockPool::Match cached)
    : cache_(cache), length_(length), cached_tokens_(cached.tokens), blocks_(std::move(cached.blocks)) {
  const int64_t bs = cache.shape().block_size;
  const int64_t needed = (length + bs - 1) / bs - static_cast<int64_t>(blocks_.size());
  if (needed > 0) {
    try {
      auto fresh = cache.pool().allocate(needed);
      blocks_.insert(blocks_.end(), fresh.begin(), fresh.end());
    } catch (...) {
      cache.pool().release(blocks_);
      throw;
    }
  }
}

Sequence::~Sequence() { cache_.pool().release(blocks_); }

int64_t Sequence::slot(int64_t i) const {
  const int64_t bs = cache_.shape().block_size;
  return static_cast<int64_t>(blocks_[i / bs]) * bs + i % bs;
}

}  // namespace tq
