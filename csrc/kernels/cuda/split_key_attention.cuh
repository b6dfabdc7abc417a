// Split-key attention's kernel body and launch shape (split_key_attention.cu launches it; its head says how it
// works), apart from the launch so that a host compiler builds it too: the CPU checks run this body through
// host_emulation.h against its host twin, split_key::attend_row (test/native/cuda_bodies_check.cpp). One translation
// unit of a program includes this.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/host_emulation.h"
#include "kernels/math/split_key_math.h"

namespace tq::cuda {
namespace {

__device__ inline int least(int a, int b) { return a < b ? a : b; }

using split_key::SplitKeyArgs;
using split_key::SplitKeyLaunch;

constexpr int kTileLanes = 32;
constexpr int kSplitKeyWarps = split_key::kBlockWarps;
constexpr int kPerLane = split_key::kMaxDim / kTileLanes;
static_assert(split_key::kTileKeys == kTileLanes, "a tile's keys are a warp's lanes");

// A tile row's stride in shared memory, in elements: padded so that lanes reading 32 rows at once spread over the
// banks (bf16: 16 bytes more, keeping rows 16-byte aligned for the wide loads; fp32: one element more).
template <typename T>
__host__ __device__ int tile_stride(int dim) {
  return dim + (sizeof(T) == 2 ? 8 : 1);
}

template <typename T>
size_t split_key_shared_bytes(int dim) {
  return 2 * kTileLanes * tile_stride<T>(dim) * sizeof(T) + kSplitKeyWarps * dim * sizeof(float);
}

// The slots of a tile's keys that this thread's pieces read, loaded a tile ahead of the keys and values themselves: so
// that their loads, issued while the block computes on the tile before, need not first wait out a round trip to
// memory for their addresses.
template <int kPieces>
struct TileSlots {
  int64_t slot[kPieces] = {};
  const int64_t* from = nullptr;  // the tile's keys' slots
  int count = 0;                  // its keys

  __device__ void fetch(const SplitKeyArgs& a, bool wide, const int64_t* keys, int n) {
    from = keys, count = n;
    if (!wide) return;
    const int pieces = a.dim / 8;
#pragma unroll
    for (int p = 0; p < kPieces; ++p) {
      const int c = threadIdx.x + p * kSplitKeyWarps * kTileLanes;
      if (c >= count * pieces) break;
      slot[p] = __ldg(keys + c / pieces);
    }
  }
};

// A tile's keys and values on their way from the store into shared memory: fetched into registers while the block
// computes on the tile before (the loads' latency hidden behind that work), then put. bf16 rows of a multiple of 8
// elements move in 16-byte pieces, at most kPieces a thread (the launch's choice by head dim: registers held for the
// largest would cost the smaller dims a block per SM); other rows are read element by element as they are put.
template <typename T, int kPieces>
struct TileFetch {
  uint4 k[kPieces], v[kPieces];
  const int64_t* slots = nullptr;  // the tile's keys' slots
  int count = 0;                   // its keys

  __device__ static bool wide(const SplitKeyArgs& a) { return sizeof(T) == 2 && a.dim % 8 == 0; }

  // The tile whose slots `at_slots` holds (fetched the tile before).
  __device__ void fetch(const SplitKeyArgs& a, const TileSlots<kPieces>& at_slots, int kv_head) {
    slots = at_slots.from, count = at_slots.count;
    if (!wide(a)) return;
    const int pieces = a.dim / 8;
#pragma unroll
    for (int p = 0; p < kPieces; ++p) {
      const int c = threadIdx.x + p * kSplitKeyWarps * kTileLanes;
      if (c >= count * pieces) break;
      const int64_t at = (at_slots.slot[p] * a.kv_heads + kv_head) * a.dim + (c % pieces) * 8;
      k[p] = __ldg(reinterpret_cast<const uint4*>(static_cast<const T*>(a.k_store) + at));
      v[p] = __ldg(reinterpret_cast<const uint4*>(static_cast<const T*>(a.v_store) + at));
    }
  }

  __device__ void put(const SplitKeyArgs& a, int kv_head, T* k_tile, T* v_tile) const {
    const int stride = tile_stride<T>(a.dim);
    if (wide(a)) {
      const int pieces = a.dim / 8;
#pragma unroll
      for (int p = 0; p < kPieces; ++p) {
        const int c = threadIdx.x + p * kSplitKeyWarps * kTileLanes;
        if (c >= count * pieces) break;
        const int at = (c / pieces) * stride + (c % pieces) * 8;
        store_vector(k_tile + at, k[p]);
        store_vector(v_tile + at, v[p]);
      }
      return;
    }
    for (int c = threadIdx.x; c < count * a.dim; c += kSplitKeyWarps * kTileLanes) {
      const int j = c / a.dim, d = c % a.dim;
      const int64_t at = (slots[j] * a.kv_heads + kv_head) * a.dim + d;
      k_tile[j * stride + d] = static_cast<const T*>(a.k_store)[at];
      v_tile[j * stride + d] = static_cast<const T*>(a.v_store)[at];
    }
  }
};

template <typename T, int kPieces>
__global__ void split_key_kernel(SplitKeyLaunch launch) {
  unsigned char* shared = dynamic_shared<unsigned char>();
  // The block's tier: the grid's x runs over the tiers' sequences in turn; its z over the most item groups of one.
  int tier = 0, seq = blockIdx.x;
  for (; tier + 1 < launch.tiers && seq >= launch.tier[tier].sequences; ++tier) seq -= launch.tier[tier].sequences;
  const SplitKeyArgs a = launch.tier[tier];
  const int kv_head = blockIdx.y, lane = threadIdx.x % kTileLanes;
  if (static_cast<int>(blockIdx.z) >= split_key::item_groups(a, kSplitKeyWarps)) return;
  // The whole block leaves where its first warp has no item (no barrier is left waiting); else each warp its own.
  if (!split_key::block_item(a, seq, kv_head, blockIdx.z, 0, kSplitKeyWarps).active) return;
  const auto [row, head, active] = split_key::block_item(a, seq, kv_head, blockIdx.z, threadIdx.x / kTileLanes, kSplitKeyWarps);
  const int stride = tile_stride<T>(a.dim);
  T* k_tile = reinterpret_cast<T*>(shared);
  T* v_tile = k_tile + kTileLanes * stride;
  float* qf = reinterpret_cast<float*>(v_tile + kTileLanes * stride) + (threadIdx.x / kTileLanes) * a.dim;
  if (active) {
    const T* q = static_cast<const T*>(a.q) + a.q_rows[row] * a.q_row_stride + head * a.q_head_stride;
    for (int d = lane; d < a.dim; d += kTileLanes) qf[d] = split_key::element(q, d);
  }
  const int first = a.cu_k[seq], n = a.cu_k[seq + 1] - first;
  // The tiles the block reads: those holding a key one of its rows sees; each warp computes on those its row sees.
  const split_key::KeyRange span = split_key::block_keys(a, seq, kv_head, blockIdx.z, kSplitKeyWarps);
  const split_key::KeyRange seen = active ? split_key::row_keys(a, seq, row) : split_key::KeyRange{0, -1};
  // This lane's slice of the output: elements [lane * per_lane, (lane + 1) * per_lane) below dim.
  const int per_lane = (a.dim + kTileLanes - 1) / kTileLanes, mine = lane * per_lane;
  float acc[kPerLane] = {};
  float top = -INFINITY, sum = 0.0f;
  // Tiles on their way at once: this one's keys and values going into shared memory, the next kSets' in registers
  // (kSets sets, taken in turn), and the slots of the one after those. Two sets where a tile is at most two 16-byte
  // pieces a thread (head dims to 128); one above, where a second set's registers would cost a block an SM.
  constexpr int kSets = kPieces <= 2 ? 2 : 1;
  TileFetch<T, kPieces> even, odd;
  TileSlots<kPieces> ahead;
  const bool wide = TileFetch<T, kPieces>::wide(a);
  const auto slots_of = [&](int t) { ahead.fetch(a, wide, a.k_rows + first + t, least(n - t, kTileLanes)); };
  const int begin = split_key::tile_of(span.first);
  if (span.last >= span.first) {
    slots_of(begin);
    even.fetch(a, ahead, kv_head);
    if (kSets == 2 && begin + kTileLanes <= span.last) {
      slots_of(begin + kTileLanes);
      odd.fetch(a, ahead, kv_head);
    }
    if (begin + kSets * kTileLanes <= span.last) slots_of(begin + kSets * kTileLanes);
  }
  // Tile t from its set of registers, which then takes tile t + kSets' keys and values; the slots then tile t + kSets + 1's.
  const bool has_item = active;  // (a lambda takes no structured binding before C++20)
  const auto walk = [&](int t, TileFetch<T, kPieces>& tile) {
    const int count = least(n - t, kTileLanes);
    __syncthreads();  // the tiles' last readers are done (and, the first time, every q row is in place)
    tile.put(a, kv_head, k_tile, v_tile);
    __syncthreads();
    if (t + kSets * kTileLanes <= span.last) {
      tile.fetch(a, ahead, kv_head);
      if (t + (kSets + 1) * kTileLanes <= span.last) slots_of(t + (kSets + 1) * kTileLanes);
    }
    if (!has_item || t > seen.last || t + count <= seen.first) return;  // the warp's row sees none of this tile
    const bool sees = lane < count && t + lane >= seen.first && t + lane <= seen.last;
    const float s = sees ? split_key::wide_score(a, qf, k_tile + lane * stride) : -INFINITY;
    float tile_top = s;
    for (int offset = kTileLanes / 2; offset > 0; offset /= 2) tile_top = fmaxf(tile_top, __shfl_xor_sync(0xffffffffu, tile_top, offset));
    const float next = fmaxf(top, tile_top), alpha = split_key::rescale(top, next);
    const float p = lane < count ? split_key::weight(s, next) : 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) acc[i] = exact::mul(acc[i], alpha);  // all kPerLane: acc stays in registers
    float tile_sum = 0.0f;
    // A loop of fixed length (the tile's keys, guarded by its count): its shuffles and value loads are issued ahead of
    // the multiply-adds that wait for them, where a loop of run-time length waited out each key's in turn.
#pragma unroll
    for (int j = 0; j < kTileLanes; ++j) {
      if (j >= count) break;
      const float pj = __shfl_sync(0xffffffffu, p, j);
      tile_sum = exact::add(tile_sum, pj);
      split_key::add_weighted<kPerLane>(acc, pj, v_tile + j * stride, mine, per_lane, a.dim);
    }
    sum = exact::add(exact::mul(sum, alpha), tile_sum);
    top = next;
  };
  // kSets tiles a turn, so that each set of registers is named where it is used (an array indexed at run time would put
  // them in local memory).
  for (int t = begin; t <= span.last; t += kSets * kTileLanes) {
    walk(t, even);
    if (kSets == 2 && t + kTileLanes <= span.last) walk(t + kTileLanes, odd);
  }
  if (!active) return;
  T* out = static_cast<T*>(a.out) + (static_cast<int64_t>(row) * a.heads + head) * a.dim;
  const bool any = seen.last >= seen.first;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i)
    if (i < per_lane && mine + i < a.dim) exact::store(any ? exact::div(acc[i], sum) : 0.0f, out + mine + i);
  if (lane == 0) a.lse[static_cast<int64_t>(head) * a.rows + row] = any ? split_key::log_sum_exp(top, sum) : -INFINITY;
}

// A launch's shape: its grid, block and dynamic shared memory, and the kernel's instance (its tile's 16-byte pieces a
// thread: 32 keys of dim / 8 pieces over the block's threads; fp32 tiles move element-wise, one).
struct SplitKeyShape {
  dim3 grid, block;
  size_t shared_bytes = 0;
  int pieces = 1;
};

template <typename T>
SplitKeyShape split_key_shape(const SplitKeyLaunch& launch) {
  const SplitKeyArgs& a = launch.tier[0];
  unsigned sequences = 0, groups = 0;
  for (int t = 0; t < launch.tiers; ++t) {
    sequences += static_cast<unsigned>(launch.tier[t].sequences);
    const unsigned g = static_cast<unsigned>(split_key::item_groups(launch.tier[t], kSplitKeyWarps));
    groups = groups > g ? groups : g;
  }
  int pieces = 1;
  if (sizeof(T) == 2) {
    const int needed = (kTileLanes * a.dim / 8 + kSplitKeyWarps * kTileLanes - 1) / (kSplitKeyWarps * kTileLanes);
    pieces = needed <= 1 ? 1 : needed <= 2 ? 2 : split_key::kMaxDim / 64;
  }
  return {dim3(sequences, static_cast<unsigned>(a.kv_heads), groups), dim3(kSplitKeyWarps * kTileLanes), split_key_shared_bytes<T>(a.dim), pieces};
}

}  // namespace
}  // namespace tq::cuda
