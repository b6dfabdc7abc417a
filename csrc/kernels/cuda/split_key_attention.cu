// One launch for a step's tiers of a layer (a warm question's own and its
// state's), a block per (tier, sequence, key head, group of kWarps items), an
// item being one of the sequence's rows with one of the query heads that share
// the key head. The
// block walks the keys its rows see a tile of 32 at a time (the sequence's
// tiles, from its first key; a warp skips a tile its row sees none of, and
// scores a key it does not see as -inf): its threads copy the
// tile's keys and values from their slots in the cache's store into shared
// memory (each read once for all the block's rows and heads, where a warp per
// item read them each time: L2's bandwidth, not the arithmetic, bounded that;
// the next tile's loads in flight while the block computes on this one),
// then each warp takes its item through the tile: lane j scores key j (its
// whole dot product, in order of d, so that a score is one lane's and not a
// shuffle tree's), the lanes agree on the tile's maximum, and every lane walks
// the tile's weights in key order (each taken from its lane by shuffle) into
// its own slice of the output and into the running sum, which every lane so
// holds alike. That is attend_row's order, operation for operation: where the
// keys come from changes no bit.
#include "kernels/cuda/split_key_attention.h"

namespace tq::cuda {
namespace {

using split_key::SplitKeyArgs;
using split_key::SplitKeyLaunch;

constexpr int kLanes = 32;
constexpr int kWarps = split_key::kBlockWarps;
constexpr int kPerLane = split_key::kMaxDim / kLanes;
static_assert(split_key::kTileKeys == kLanes, "a tile's keys are a warp's lanes");

// A tile row's stride in shared memory, in elements: padded so that lanes reading 32 rows at once spread over the
// banks (bf16: 16 bytes more, keeping rows 16-byte aligned for the wide loads; fp32: one element more).
template <typename T>
__host__ __device__ int tile_stride(int dim) {
  return dim + (sizeof(T) == 2 ? 8 : 1);
}

template <typename T>
size_t shared_bytes(int dim) {
  return 2 * kLanes * tile_stride<T>(dim) * sizeof(T) + kWarps * dim * sizeof(float);
}

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

  __device__ void fetch(const SplitKeyArgs& a, const int64_t* from, int keys, int kv_head) {
    slots = from, count = keys;
    if (!wide(a)) return;
    const int pieces = a.dim / 8;
#pragma unroll
    for (int p = 0; p < kPieces; ++p) {
      const int c = threadIdx.x + p * kWarps * kLanes;
      if (c >= count * pieces) break;
      const int64_t at = (slots[c / pieces] * a.kv_heads + kv_head) * a.dim + (c % pieces) * 8;
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
        const int c = threadIdx.x + p * kWarps * kLanes;
        if (c >= count * pieces) break;
        const int at = (c / pieces) * stride + (c % pieces) * 8;
        *reinterpret_cast<uint4*>(k_tile + at) = k[p];
        *reinterpret_cast<uint4*>(v_tile + at) = v[p];
      }
      return;
    }
    for (int c = threadIdx.x; c < count * a.dim; c += kWarps * kLanes) {
      const int j = c / a.dim, d = c % a.dim;
      const int64_t at = (slots[j] * a.kv_heads + kv_head) * a.dim + d;
      k_tile[j * stride + d] = static_cast<const T*>(a.k_store)[at];
      v_tile[j * stride + d] = static_cast<const T*>(a.v_store)[at];
    }
  }
};

template <typename T, int kPieces>
__global__ void split_key_kernel(SplitKeyLaunch launch) {
  extern __shared__ __align__(16) unsigned char shared[];
  // The block's tier: the grid's x runs over the tiers' sequences in turn; its z over the most item groups of one.
  int tier = 0, seq = blockIdx.x;
  for (; tier + 1 < launch.tiers && seq >= launch.tier[tier].sequences; ++tier) seq -= launch.tier[tier].sequences;
  const SplitKeyArgs a = launch.tier[tier];
  const int kv_head = blockIdx.y, lane = threadIdx.x % kLanes;
  if (static_cast<int>(blockIdx.z) >= split_key::item_groups(a, kWarps)) return;
  // The whole block leaves where its first warp has no item (no barrier is left waiting); else each warp its own.
  if (!split_key::block_item(a, seq, kv_head, blockIdx.z, 0, kWarps).active) return;
  const auto [row, head, active] = split_key::block_item(a, seq, kv_head, blockIdx.z, threadIdx.x / kLanes, kWarps);
  const int stride = tile_stride<T>(a.dim);
  T* k_tile = reinterpret_cast<T*>(shared);
  T* v_tile = k_tile + kLanes * stride;
  float* qf = reinterpret_cast<float*>(v_tile + kLanes * stride) + (threadIdx.x / kLanes) * a.dim;
  if (active) {
    const T* q = static_cast<const T*>(a.q) + a.q_rows[row] * a.q_row_stride + head * a.q_head_stride;
    for (int d = lane; d < a.dim; d += kLanes) qf[d] = split_key::element(q, d);
  }
  const int first = a.cu_k[seq], n = a.cu_k[seq + 1] - first;
  // The tiles the block reads: those holding a key one of its rows sees; each warp computes on those its row sees.
  const split_key::KeyRange span = split_key::block_keys(a, seq, kv_head, blockIdx.z, kWarps);
  const split_key::KeyRange seen = active ? split_key::row_keys(a, seq, row) : split_key::KeyRange{0, -1};
  // This lane's slice of the output: elements [lane * per_lane, (lane + 1) * per_lane) below dim.
  const int per_lane = (a.dim + kLanes - 1) / kLanes, mine = lane * per_lane;
  float acc[kPerLane] = {};
  float top = -INFINITY, sum = 0.0f;
  TileFetch<T, kPieces> tile;
  const int begin = split_key::tile_of(span.first);
  if (span.last >= span.first) tile.fetch(a, a.k_rows + first + begin, min(n - begin, kLanes), kv_head);
  for (int t = begin; t <= span.last; t += kLanes) {
    const int count = min(n - t, kLanes);
    __syncthreads();  // the tiles' last readers are done (and, the first time, every q row is in place)
    tile.put(a, kv_head, k_tile, v_tile);
    __syncthreads();
    if (t + kLanes <= span.last) tile.fetch(a, a.k_rows + first + t + kLanes, min(n - t - kLanes, kLanes), kv_head);  // the next, in flight
    if (!active || t > seen.last || t + count <= seen.first) continue;  // the warp's row sees none of this tile
    const bool sees = lane < count && t + lane >= seen.first && t + lane <= seen.last;
    const float s = sees ? split_key::wide_score(a, qf, k_tile + lane * stride) : -INFINITY;
    float tile_top = s;
    for (int offset = kLanes / 2; offset > 0; offset /= 2) tile_top = fmaxf(tile_top, __shfl_xor_sync(0xffffffffu, tile_top, offset));
    const float next = fmaxf(top, tile_top), alpha = split_key::rescale(top, next);
    const float p = lane < count ? split_key::weight(s, next) : 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) acc[i] = exact::mul(acc[i], alpha);  // all kPerLane: acc stays in registers
    float tile_sum = 0.0f;
    for (int j = 0; j < count; ++j) {
      const float pj = __shfl_sync(0xffffffffu, p, j);
      tile_sum = exact::add(tile_sum, pj);
      split_key::add_weighted<kPerLane>(acc, pj, v_tile + j * stride, mine, per_lane, a.dim);
    }
    sum = exact::add(exact::mul(sum, alpha), tile_sum);
    top = next;
  }
  if (!active) return;
  T* out = static_cast<T*>(a.out) + (static_cast<int64_t>(row) * a.heads + head) * a.dim;
  const bool any = seen.last >= seen.first;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i)
    if (i < per_lane && mine + i < a.dim) exact::store(any ? exact::div(acc[i], sum) : 0.0f, out + mine + i);
  if (lane == 0) a.lse[static_cast<int64_t>(head) * a.rows + row] = any ? split_key::log_sum_exp(top, sum) : -INFINITY;
}

template <typename T, int kPieces>
cudaError_t launch_for(const SplitKeyLaunch& launch, cudaStream_t stream) {
  const SplitKeyArgs& a = launch.tier[0];
  const size_t bytes = shared_bytes<T>(a.dim);
  // Over 48 KB (fp32 at the largest head dims) a kernel must opt in; the attribute is the device's, so it is set each time.
  if (bytes > (48 << 10))
    if (const cudaError_t e = cudaFuncSetAttribute(split_key_kernel<T, kPieces>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
        e != cudaSuccess)
      return e;
  unsigned sequences = 0, groups = 0;
  for (int t = 0; t < launch.tiers; ++t) {
    sequences += static_cast<unsigned>(launch.tier[t].sequences);
    groups = max(groups, static_cast<unsigned>(split_key::item_groups(launch.tier[t], kWarps)));
  }
  const dim3 grid(sequences, static_cast<unsigned>(a.kv_heads), groups);
  split_key_kernel<T, kPieces><<<grid, kWarps * kLanes, bytes, stream>>>(launch);
  return cudaGetLastError();
}

// A tile's 16-byte pieces a thread: 32 keys of dim / 8 pieces over the block's threads (fp32 tiles move element-wise).
template <typename T>
cudaError_t launch_by_dim(const SplitKeyLaunch& launch, cudaStream_t stream) {
  if constexpr (sizeof(T) != 2) {
    return launch_for<T, 1>(launch, stream);
  } else {
    const int pieces = (kLanes * launch.tier[0].dim / 8 + kWarps * kLanes - 1) / (kWarps * kLanes);
    if (pieces <= 1) return launch_for<T, 1>(launch, stream);
    return pieces <= 2 ? launch_for<T, 2>(launch, stream) : launch_for<T, split_key::kMaxDim / 64>(launch, stream);
  }
}

}  // namespace

cudaError_t launch_split_key_attention(const SplitKeyLaunch& launch, cudaStream_t stream) {
  if (launch.tiers < 1 || launch.tiers > split_key::kLaunchTiers) return cudaErrorInvalidValue;
  const SplitKeyArgs& first = launch.tier[0];
  bool work = false;
  for (int t = 0; t < launch.tiers; ++t) {
    const SplitKeyArgs& a = launch.tier[t];
    // One grid, one block shape: the tiers of one layer's step, alike in heads, dims and dtype.
    if (a.dim > split_key::kMaxDim || a.kv_heads <= 0 || a.heads % a.kv_heads != 0 || a.dim != first.dim || a.heads != first.heads ||
        a.kv_heads != first.kv_heads || a.bf16 != first.bf16)
      return cudaErrorInvalidValue;
    work = work || (a.rows > 0 && a.sequences > 0 && a.max_rows > 0);
  }
  if (!work) return cudaSuccess;
  return first.bf16 ? launch_by_dim<uint16_t>(launch, stream) : launch_by_dim<float>(launch, stream);
}

}  // namespace tq::cuda
