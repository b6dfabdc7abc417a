// One warp per (tier row, head), over its sequence's keys a tile of 32 at a
// time: lane j scores key j (its whole dot product, in order of d, so that a
// score is one lane's and not a shuffle tree's), the lanes agree on the tile's
// maximum, then every lane walks the tile's weights in key order (each taken
// from its lane by shuffle) into its own slice of the output and into the
// running sum, which every lane so holds alike. That is attend_row's order,
// operation for operation. Keys and values are read where the cache stores
// them, through the tier's slots; the row's q is read through its query row.
#include "kernels/cuda/split_key_attention.h"

namespace tq::cuda {
namespace {

using split_key::SplitKeyArgs;

constexpr int kLanes = 32;
constexpr int kWarps = 4;
constexpr int kPerLane = split_key::kMaxDim / kLanes;
static_assert(split_key::kTileKeys == kLanes, "a tile's keys are a warp's lanes");

template <typename T>
__global__ void split_key_kernel(SplitKeyArgs a) {
  __shared__ float q_shared[kWarps][split_key::kMaxDim];
  const int warp = threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (item >= static_cast<int64_t>(a.rows) * a.heads) return;  // a whole warp leaves: no barrier below spans warps
  const int row = static_cast<int>(item / a.heads), head = static_cast<int>(item % a.heads);
  const T* q = static_cast<const T*>(a.q) + a.q_rows[row] * a.q_row_stride + head * a.q_head_stride;
  float* qf = q_shared[warp];
  for (int d = lane; d < a.dim; d += kLanes) qf[d] = split_key::element(q, d);
  __syncwarp();
  const int64_t seq = a.row_seq[row];
  const int first = a.cu_k[seq], n = a.cu_k[seq + 1] - first, kv_head = head / (a.heads / a.kv_heads);
  // This lane's slice of the output: elements [lane * per_lane, (lane + 1) * per_lane) below dim.
  const int per_lane = (a.dim + kLanes - 1) / kLanes, mine = lane * per_lane;
  float acc[kPerLane] = {};
  float top = -INFINITY, sum = 0.0f;
  for (int t = 0; t < n; t += kLanes) {
    const int count = min(n - t, kLanes);
    int64_t slot = 0;
    float s = -INFINITY;
    if (lane < count) {
      slot = a.k_rows[first + t + lane];
      s = split_key::wide_score(a, qf, split_key::store_row<T>(a, a.k_store, slot, kv_head));
    }
    float tile_top = s;
    for (int offset = kLanes / 2; offset > 0; offset /= 2) tile_top = fmaxf(tile_top, __shfl_xor_sync(0xffffffffu, tile_top, offset));
    const float next = fmaxf(top, tile_top), alpha = split_key::rescale(top, next);
    const float p = lane < count ? split_key::weight(s, next) : 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) acc[i] = exact::mul(acc[i], alpha);  // all kPerLane: acc stays in registers
    float tile_sum = 0.0f;
    for (int j = 0; j < count; ++j) {
      const float pj = __shfl_sync(0xffffffffu, p, j);
      const T* v = split_key::store_row<T>(a, a.v_store, __shfl_sync(0xffffffffu, slot, j), kv_head);
      tile_sum = exact::add(tile_sum, pj);
      split_key::add_weighted<kPerLane>(acc, pj, v, mine, per_lane, a.dim);
    }
    sum = exact::add(exact::mul(sum, alpha), tile_sum);
    top = next;
  }
  T* out = static_cast<T*>(a.out) + (static_cast<int64_t>(row) * a.heads + head) * a.dim;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i)
    if (i < per_lane && mine + i < a.dim) exact::store(n > 0 ? exact::div(acc[i], sum) : 0.0f, out + mine + i);
  if (lane == 0) a.lse[static_cast<int64_t>(head) * a.rows + row] = n > 0 ? split_key::log_sum_exp(top, sum) : -INFINITY;
}

}  // namespace

cudaError_t launch_split_key_attention(const SplitKeyArgs& args, cudaStream_t stream) {
  const int64_t items = static_cast<int64_t>(args.rows) * args.heads;
  if (items == 0) return cudaSuccess;
  if (args.dim > split_key::kMaxDim || args.kv_heads <= 0 || args.heads % args.kv_heads != 0) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((items + kWarps - 1) / kWarps)), block(kWarps * kLanes);
  if (args.bf16) split_key_kernel<uint16_t><<<grid, block, 0, stream>>>(args);
  else split_key_kernel<float><<<grid, block, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace tq::cuda
