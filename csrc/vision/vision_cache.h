// The vision tower's outputs by image key, least recently used first out,
// within a byte budget: an image that comes back after different text (so its
// KV blocks cannot be reused) skips the ViT.
#pragma once
#include <ATen/ATen.h>

#include <list>
#include <map>
#include <utility>

#include "vision/image_prompt.h"

namespace tq {

struct VisionCacheStats {
  int64_t hits = 0, misses = 0, entries = 0, bytes = 0, budget_bytes = 0;
};

class VisionCache {
 public:
  explicit VisionCache(int64_t budget_bytes) { stats_.budget_bytes = budget_bytes; }

  // The cached embeddings of `key`, or an undefined tensor (counted as a miss).
  at::Tensor find(const ImageKey& key) {
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      ++stats_.misses;
      return {};
    }
    ++stats_.hits;
    order_.splice(order_.end(), order_, it->second.second);
    return it->second.first;
  }

  void insert(const ImageKey& key, const at::Tensor& embeds) {
    const int64_t bytes = static_cast<int64_t>(embeds.nbytes());
    if (bytes > stats_.budget_bytes || entries_.count(key)) return;
    while (stats_.bytes + bytes > stats_.budget_bytes) {
      auto oldest = entries_.find(order_.front());
      stats_.bytes -= static_cast<int64_t>(oldest->second.first.nbytes());
      entries_.erase(oldest);
      order_.pop_front();
    }
    order_.push_back(key);
    entries_.emplace(key, std::make_pair(embeds, std::prev(order_.end())));
    stats_.bytes += bytes;
  }

  VisionCacheStats stats() const {
    auto s = stats_;
    s.entries = static_cast<int64_t>(entries_.size());
    return s;
  }

 private:
  std::list<ImageKey> order_;  // least recently used first
  std::map<ImageKey, std::pair<at::Tensor, std::list<ImageKey>::iterator>> entries_;
  VisionCacheStats stats_;
};

}  // namespace tq
