// One block per row (a token's hidden state, or one head of q, k or v): every
// thread squares its share of a chunk of the row into shared memory, the
// first 16 threads carry their lanes' running sums over it (the CPU kernels'
// 16 lanes, each a sum in element order: that order is what keeps the bits, so
// it is not a tree), thread 0 turns the lane sums into the row's scale, and
// every thread writes its strided share of the outputs. The arithmetic is
// kernels/math/row_kernels_math.h, the CPU kernels' own.
#include "kernels/cuda/row_kernels.h"
#include "kernels/math/row_kernels_math.h"

namespace tq::cuda {

using rows::AddRmsNormArgs;
using rows::GatedMulArgs;
using rows::QkNormRopeArgs;

namespace {

constexpr int kThreads = 128;
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

// Block (token, head): heads [0, heads) are q's, then kv_heads of k, then kv_heads of v.
__global__ void qk_norm_rope_kernel(QkNormRopeArgs a) {
  __shared__ float row[kMaxHeadDim];
  const int per_token = a.heads + 2 * a.kv_heads, d = a.head_dim;
  const int t = blockIdx.x / per_token, h = blockIdx.x % per_token;
  const float* x = a.qkv + static_cast<int64_t>(t) * a.token_stride + static_cast<int64_t>(h) * d;
  // k and v heads: their row in the cache, at the token's slot.
  const int64_t slot_row = h < a.heads ? 0 : (a.slots[t] * a.kv_heads + (h - a.heads) % a.kv_heads) * d;
  if (h >= a.heads + a.kv_heads) {  // v: into its cache slot as it is
    for (int j = threadIdx.x; j < d; j += blockDim.x) put(a.v_cache, slot_row + j, x[j], a.out_bf16);
    return;
  }
  const bool is_q = h < a.heads;
  const float* norm = is_q ? a.q_norm : a.k_norm;
  for (int j = threadIdx.x; j < d; j += blockDim.x) row[j] = x[j];
  __syncthreads();
  if (norm) {
    const float scale = block_norm_scale(row, d, a.eps);
    float normed[kMaxHeadDim / kThreads];
    for (int j = threadIdx.x, i = 0; j < d; j += blockDim.x, ++i) normed[i] = rows::norm_out(row[j], scale, norm[j]);
    __syncthreads();
    for (int j = threadIdx.x, i = 0; j < d; j += blockDim.x, ++i) row[j] = normed[i];
    __syncthreads();
  }
  void* out = is_q ? a.q_out : a.k_cache;
  const int64_t out_row = is_q ? (static_cast<int64_t>(t) * a.heads + h) * d : slot_row;
  const float* c = a.rope_rows ? a.cos + a.rope_rows[t] * d : nullptr;
  const float* s = a.rope_rows ? a.sin + a.rope_rows[t] * d : nullptr;
  for (int j = threadIdx.x; j < d; j += blockDim.x) put(out, out_row + j, c ? rows::rope_out(row, c, s, d, j) : row[j], a.out_bf16);
}

__global__ void gated_mul_kernel(GatedMulArgs a) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(a.rows) * a.n) return;
  const int64_t r = i / a.n, j = i % a.n;
  const float g = load(a.gate, r * a.stride + j, a.in_bf16), u = load(a.up, r * a.stride + j, a.in_bf16);
  put(a.out, i, rows::gated(g, u, a.gelu_tanh), a.in_bf16);
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
  qk_norm_rope_kernel<<<args.tokens * (args.heads + 2 * args.kv_heads), kThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

cudaError_t launch_gated_mul(const GatedMulArgs& args, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(args.rows) * args.n;
  if (n == 0) return cudaSuccess;
  gated_mul_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace tq::cuda
