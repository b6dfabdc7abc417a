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
// the next tile's loads in flight while the block computes on this one, and
// the slots of the one after, so that those loads never wait on their addresses),
// then each warp takes its item through the tile: lane j scores key j (its
// whole dot product, in order of d, so that a score is one lane's and not a
// shuffle tree's), the lanes agree on the tile's maximum, and every lane walks
// the tile's weights in key order (each taken from its lane by shuffle) into
// its own slice of the output and into the running sum, which every lane so
// holds alike. That is attend_row's order, operation for operation: where the
// keys come from changes no bit.
#include "kernels/cuda/split_key_attention.h"
#include "kernels/cuda/split_key_attention.cuh"

namespace tq::cuda {
namespace {

template <typename T, int kPieces>
cudaError_t launch_for(const SplitKeyLaunch& launch, const SplitKeyShape& shape, cudaStream_t stream) {
  // Over 48 KB (fp32 at the largest head dims) a kernel must opt in; the attribute is the device's, so it is set each time.
  if (shape.shared_bytes > (48 << 10))
    if (const cudaError_t e = cudaFuncSetAttribute(split_key_kernel<T, kPieces>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shape.shared_bytes));
        e != cudaSuccess)
      return e;
  split_key_kernel<T, kPieces><<<shape.grid, shape.block, shape.shared_bytes, stream>>>(launch);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_by_dim(const SplitKeyLaunch& launch, cudaStream_t stream) {
  const SplitKeyShape shape = split_key_shape<T>(launch);
  if constexpr (sizeof(T) != 2) {
    return launch_for<T, 1>(launch, shape, stream);
  } else {
    if (shape.pieces == 1) return launch_for<T, 1>(launch, shape, stream);
    return shape.pieces == 2 ? launch_for<T, 2>(launch, shape, stream) : launch_for<T, split_key::kMaxDim / 64>(launch, shape, stream);
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
