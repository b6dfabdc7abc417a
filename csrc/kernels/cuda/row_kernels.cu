// add_rms_norm: one block per row (a token's hidden state): every thread squares
// its share of a chunk of the row into shared memory, the first 16 threads carry
// their lanes' running sums over it (the CPU kernels' 16 lanes, each a sum in
// element order: that order is what keeps the bits, so it is not a tree), thread
// 0 turns the lane sums into the row's scale, and every thread writes its strided
// share of the outputs. qk_norm_rope: one warp per head (a head is at most 256
// values, too little for a block and its barriers): the same lane sums by lanes
// 0-15, each lane taking the sixteen by shuffle and forming the scale alike.
// gated_mul: one block per row, its threads along the row. The arithmetic is
// kernels/math/row_kernels_math.h, the CPU kernels' own.
#include "kernels/cuda/row_kernels.h"
#include "kernels/math/row_kernels_math.h"

namespace tq::cuda {

using rows::AddRmsNormArgs;
using rows::GatedMulArgs;
using rows::QkNormRopeArgs;

namespace {

constexpr int kThreads = 128;     // add_rms_norm's block (a row)
constexpr int kRowThreads = 256;  // gated_mul's block (a row of the MLP's width)
constexpr int kMaxHeadDim = 256;

using rows::load;
using rows::put;

// The scale of row x[0, n), by the block; every thread gets it.
__device__ float block_norm_scale(const float* x, int n, float eps) {
  __shared__ float squares[rows::kNormChunk];
  __shared__ float lane_sums[rows::kNormLanes];
  __shared__ float scale;
  const int whole = n - n % rows::kNormLanes;  // the tail's squares are norm_scale's
  float acc = 0.0f;
  for (int base = 0; base < whole; base += rows::kNormChunk) {
    const int len = min(rows::kNormChunk, whole - base);
    for (int j = threadIdx.x; j < len; j += blockDim.x) squares[j] = rows::square(x[base + j]);
    __syncthreads();
    if (threadIdx.x < rows::kNormLanes) acc = rows::lane_sum_of_squares(acc, squares, len, threadIdx.x);
    __syncthreads();
  }
  if (threadIdx.x < rows::kNormLanes) lane_sums[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x == 0) scale = rows::norm_scale(lane_sums, x, n, eps);
  __syncthreads();
  return scale;
}

__global__ void add_rms_norm_kernel(AddRmsNormArgs a) {
  float* x = a.residual + static_cast<int64_t>(blockIdx.x) * a.n;
  if (a.addend) {
    for (int j = threadIdx.x; j < a.n; j += blockDim.x)
      x[j] = exact::add(x[j], load(a.addend, static_cast<int64_t>(blockIdx.x) * a.addend_stride + j, a.addend_bf16));
    __syncthreads();
  }
  const float scale = block_norm_scale(x, a.n, a.eps);
  for (int j = threadIdx.x; j < a.n; j += blockDim.x) put(a.out, static_cast<int64_t>(blockIdx.x) * a.n + j, rows::norm_out(x[j], scale, a.weight[j]), a.out_bf16);
}

// Warp w of block b: item b * kHeadsPerBlock + w, the (token, head) pair; heads [0, heads) are q's, then kv_heads of k,
// then kv_heads of v. A warp past the last item returns whole (no block barrier follows).
constexpr int kWarp = 32, kHeadsPerBlock = 8;
__global__ void qk_norm_rope_kernel(QkNormRopeArgs a) {
  __shared__ float inputs[kHeadsPerBlock][kMaxHeadDim], normed_rows[kHeadsPerBlock][kMaxHeadDim];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int per_token = a.heads + 2 * a.kv_heads, d = a.head_dim;
  const int item = blockIdx.x * kHeadsPerBlock + warp;
  if (item >= a.tokens * per_token) return;
  const int t = item / per_token, h = item % per_token;
  const int64_t in_row = static_cast<int64_t>(t) * a.token_stride + static_cast<int64_t>(h) * d;
  // k and v heads: their row in the cache, at the token's slot.
  const int64_t slot_row = h < a.heads ? 0 : (a.slots[t] * a.kv_heads + (h - a.heads) % a.kv_heads) * d;
  if (h >= a.heads + a.kv_heads) {  // v: into its cache slot as it is
    for (int j = lane; j < d; j += kWarp) put(a.v_cache, slot_row + j, load(a.qkv, in_row + j, a.qkv_bf16), a.out_bf16);
    return;
  }
  const bool is_q = h < a.heads;
  const float* norm = is_q ? a.q_norm : a.k_norm;
  const float* row = inputs[warp];
  for (int j = lane; j < d; j += kWarp) inputs[warp][j] = load(a.qkv, in_row + j, a.qkv_bf16);
  __syncwarp();
  if (norm) {
    // Lanes 0-15 sum their squares in element order; every lane takes the sixteen sums and forms the same scale.
    const float mine = lane < rows::kNormLanes ? rows::norm_lane_sum(row, d, lane) : 0.0f;
    float lane_sums[rows::kNormLanes];
    for (int l = 0; l < rows::kNormLanes; ++l) lane_sums[l] = __shfl_sync(0xffffffffu, mine, l);
    const float scale = rows::norm_scale(lane_sums, row, d, a.eps);
    for (int j = lane; j < d; j += kWarp) normed_rows[warp][j] = rows::norm_out(row[j], scale, norm[j]);
    __syncwarp();
    row = normed_rows[warp];
  }
  void* out = is_q ? a.q_out : a.k_cache;
  const int64_t out_row = is_q ? (static_cast<int64_t>(t) * a.heads + h) * d : slot_row;
  const float* c = a.rope_rows ? a.cos + a.rope_rows[t] * d : nullptr;
  const float* s = a.rope_rows ? a.sin + a.rope_rows[t] * d : nullptr;
  for (int j = lane; j < d; j += kWarp) put(out, out_row + j, c ? rows::rope_out(row, c, s, d, j) : row[j], a.out_bf16);
}

// Block r: row r, its threads along the row (no 64-bit division per element).
__global__ void gated_mul_kernel(GatedMulArgs a) {
  const int64_t in_row = static_cast<int64_t>(blockIdx.x) * a.stride, out_row = static_cast<int64_t>(blockIdx.x) * a.n;
  for (int j = threadIdx.x; j < a.n; j += blockDim.x) {
    const float g = load(a.gate, in_row + j, a.in_bf16), u = load(a.up, in_row + j, a.in_bf16);
    put(a.out, out_row + j, rows::gated(g, u, a.gelu_tanh), a.in_bf16);
  }
}

}  // namespace

cudaError_t launch_add_rms_norm(const AddRmsNormArgs& args, cudaStream_t stream) {
  if (args.rows == 0) return cudaSuccess;
  add_rms_norm_kernel<<<args.rows, kThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

cudaError_t launch_qk_norm_rope(const QkNormRopeArgs& args, cudaStream_t stream) {
  if (args.tokens == 0) return cudaSuccess;
  if (args.head_dim > kMaxHeadDim) return cudaErrorInvalidValue;
  const int items = args.tokens * (args.heads + 2 * args.kv_heads);
  qk_norm_rope_kernel<<<(items + kHeadsPerBlock - 1) / kHeadsPerBlock, kHeadsPerBlock * kWarp, 0, stream>>>(args);
  return cudaGetLastError();
}

cudaError_t launch_gated_mul(const GatedMulArgs& args, cudaStream_t stream) {
  if (args.rows == 0 || args.n == 0) return cudaSuccess;
  gated_mul_kernel<<<args.rows, kRowThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace tq::cuda
