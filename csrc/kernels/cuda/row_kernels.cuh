// The fused row kernels' bodies and launch shapes (row_kernels.cu launches them; its head says how each works), apart
// from the launches so that a host compiler builds them too: the CPU checks run these bodies through
// host_emulation.h and compare their bits with the host forms (test/native/row_kernels_check.cpp). One translation
// unit of a program includes this (its functions are that unit's own).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/host_emulation.h"
#include "kernels/math/row_kernel_args.h"
#include "kernels/math/row_kernels_math.h"

namespace tq::cuda {

using rows::AddRmsNormArgs;
using rows::GatedMulArgs;
using rows::QkNormRopeArgs;

namespace {

// add_rms_norm's block (a row): enough threads that each loads kRowAhead elements once (a row of 1,024: 128 threads;
// of 8,192: 1,024), so that a row is one round trip to memory up to 8,192 values.
constexpr int kRowAhead = 8, kMinRowThreads = 128, kMaxRowThreads = 1024;
constexpr int kRowThreads = 256;  // gated_mul's block (a row of the MLP's width)
constexpr int kMaxHeadDim = 256;
constexpr int kDefaultSharedBytes = 48 << 10;  // a launch's dynamic shared memory without opting in

using rows::load;
using rows::put;

// load() through the read-only cache: for an array no thread of the kernel writes, so the compiler may issue the
// loads of a loop ahead of its stores. The same values, so the same bits.
__device__ float load_read_only(const void* p, int64_t i, bool bf16) {
  return bf16 ? exact::widen(__ldg(static_cast<const uint16_t*>(p) + i)) : __ldg(static_cast<const float*>(p) + i);
}

__global__ void add_rms_norm_kernel(AddRmsNormArgs a) {
  float* row = dynamic_shared<float>();  // [n]: the residual after the add; then [n] the norm's weights
  float* weights = row + a.n;
  __shared__ float lane_sums[rows::kNormLanes];
  __shared__ float scale;
  block_shared(lane_sums, scale);
  const int64_t r = blockIdx.x;
  float* residual = a.residual + r * a.n;
  // The weights are read with the row, in the same round trip to memory, not after the row's scale is known; and a
  // thread's kRowAhead elements of each are loaded before any is put, in loops of fixed length: a loop that puts each
  // element as it comes waits out one round trip per element (the compiler issues no load of the next iteration ahead).
  for (int base = threadIdx.x; base < a.n; base += kRowAhead * blockDim.x) {
    float res[kRowAhead], add[kRowAhead], w[kRowAhead];
#pragma unroll
    for (int k = 0; k < kRowAhead; ++k) {
      const int j = base + k * blockDim.x;
      if (j >= a.n) break;
      w[k] = __ldg(a.weight + j);
      res[k] = residual[j];
      if (a.addend) add[k] = load_read_only(a.addend, r * a.addend_stride + j, a.addend_bf16);
    }
#pragma unroll
    for (int k = 0; k < kRowAhead; ++k) {
      const int j = base + k * blockDim.x;
      if (j >= a.n) break;
      weights[j] = w[k];
      row[j] = a.addend ? exact::add(res[k], add[k]) : res[k];
    }
  }
  __syncthreads();
  if (a.addend)
    for (int j = threadIdx.x; j < a.n; j += blockDim.x) residual[j] = row[j];
  if (threadIdx.x < rows::kNormLanes) lane_sums[threadIdx.x] = rows::norm_lane_sum(row, a.n, threadIdx.x);
  __syncthreads();
  if (threadIdx.x == 0) scale = rows::norm_scale(lane_sums, row, a.n, a.eps);
  __syncthreads();
  for (int j = threadIdx.x; j < a.n; j += blockDim.x) put(a.out, r * a.n + j, rows::norm_out(row[j], scale, weights[j]), a.out_bf16);
}

// Warp w of block b: item b * kHeadsPerBlock + w, the (token, head) pair; heads [0, heads) are q's, then kv_heads of k,
// then kv_heads of v. A warp past the last item returns whole (no block barrier follows).
constexpr int kWarp = 32, kHeadsPerBlock = 8;

// kQuad: bf16 in and out and a head of 128 values, each lane moving its 4 neighbours in one 8-byte access where
// the strided form took four of 2 bytes (the kernel is bound by its accesses; its share of a step: docs/gpu.md).
// The same arithmetic on each value either way.
constexpr int kQuadHeadDim = 4 * kWarp;
using rows::Bf16Quad;
static_assert(sizeof(Bf16Quad) == sizeof(uint2) && alignof(Bf16Quad) <= alignof(uint2), "a quad is one 8-byte access");
// Through the read-only cache: every array a kernel here reads in quads (qkv, gate and up) is one no thread of it
// writes, so the compiler may issue a loop's next loads ahead of this iteration's stores.
__device__ Bf16Quad read_quad(const void* base, int64_t element, int lane) {
  const uint2 bits = __ldg(reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(base) + element) + lane);
  return {bits.x, bits.y};
}
__device__ void write_quad(void* base, int64_t element, int lane, Bf16Quad q) {
  store_vector(reinterpret_cast<uint2*>(static_cast<uint16_t*>(base) + element) + lane, make_uint2(q.lo, q.hi));
}

// Four neighbouring fp32 values of an array no thread writes, in one 16-byte access (p 16-byte aligned: takes_quads).
__device__ void load_four(const float* p, float* to) {
  const float4 v = __ldg(reinterpret_cast<const float4*>(p));
  to[0] = v.x, to[1] = v.y, to[2] = v.z, to[3] = v.w;
}

// The quad form: a block per token, its warps taking the token's heads in turn (warp w: heads w, w + 8, ...), lane l
// elements 4l..4l+3 of a head of 128. Every global load a block needs is issued before any value is used: the
// token's RoPE table row index and cache slot, the norms' weights, each warp's heads' values (kHeadsAhead of them at
// once), and the table row's entries, which are the same for every head of the token and so read once. A
// block then waits out two round trips to memory for a whole token, where a warp per head waited out two for one
// head, and a launch is tokens blocks, not tokens x heads / 8 (the kernel was bound by its blocks' latency:
// docs/gpu.md, "The row kernels' loads"). The heads' values go to shared memory as they arrive and are computed on
// from there one head at a time (held in registers, four heads' norms unrolled took 168 registers a thread). Each
// value is the same function of the same inputs as in the strided form (row_kernels_math.h), so the same bits.
constexpr int kHeadsAhead = 4;  // a warp's heads loaded at once (a token of 32 heads: all of them)

// The RoPE table's entries for the lane's four elements: the token's, the same for each of its heads.
struct TokenTable {
  float cos_at[4] = {}, sin_at[4] = {};
};

// Head h of token t: q heads [0, heads), then kv_heads of k, then of v. Where it goes: q's output, or the cache's
// slot (`slot`, the token's: read once for its heads) and (where asked) the step's keys at the token's row.
struct HeadPlace {
  bool is_v, is_q;
  int64_t in_row, out_row, step_row;
};
__device__ HeadPlace head_place(const QkNormRopeArgs& a, int t, int h, int64_t slot) {
  const int d = a.head_dim;
  const bool is_q = h < a.heads, is_v = h >= a.heads + a.kv_heads;
  const int kv = is_q ? 0 : (h - a.heads) % a.kv_heads;
  const int64_t in_row = static_cast<int64_t>(t) * a.token_stride + static_cast<int64_t>(h) * d;
  const int64_t out_row = is_q ? (static_cast<int64_t>(t) * a.heads + h) * d : (slot * a.kv_heads + kv) * d;
  return {is_v, is_q, in_row, out_row, is_q ? 0 : (static_cast<int64_t>(t) * a.kv_heads + kv) * d};
}

// A head's norm scale, the same in every lane of the warp: lanes 0-15 sum their squares in element order, and every
// lane takes the sixteen sums and forms the scale alike.
__device__ float warp_norm_scale(const float* row, int d, float eps, int lane) {
  const float mine = lane < rows::kNormLanes ? rows::norm_lane_sum(row, d, lane) : 0.0f;
  float lane_sums[rows::kNormLanes];
  for (int l = 0; l < rows::kNormLanes; ++l) lane_sums[l] = __shfl_sync(0xffffffffu, mine, l);
  return rows::norm_scale(lane_sums, row, d, eps);
}

// A q or k head's norm (where `norm`, by the lane's four `weights`) and RoPE (where the token has a table row), from
// its values in `inputs` (the whole head, widened), through `normed` (the warp's row: the norm's lane sums and RoPE's
// partners read the whole head): its lane's narrowed quad.
__device__ Bf16Quad quad_norm_rope(const QkNormRopeArgs& a, const float* inputs, bool norm, const float (&weights)[4], const TokenTable& table,
                                   float* normed, int lane) {
  const int d = a.head_dim, half = d / 2, first = 4 * lane;
  float mine[4];
  for (int i = 0; i < 4; ++i) mine[i] = inputs[first + i];
  const float* row = inputs;
  if (norm) {
    const float scale = warp_norm_scale(inputs, d, a.eps, lane);
    __syncwarp();  // the warp's last head has been read out of `normed`
    for (int i = 0; i < 4; ++i) normed[first + i] = mine[i] = rows::norm_out(mine[i], scale, weights[i]);
    __syncwarp();
    row = normed;
  }
  float quad[4];
  for (int i = 0; i < 4; ++i) {
    const int j = first + i;
    quad[i] = a.rope_rows ? rows::rope_value(mine[i], row[j < half ? j + half : j - half], table.cos_at[i], table.sin_at[i], j < half) : mine[i];
  }
  return rows::narrow_quad(quad);
}

// The warp's heads from `base` (base, base + kHeadsPerBlock, ...: kHeadsAhead of them): their quads, loaded together.
__device__ void fetch_heads(const QkNormRopeArgs& a, int t, int base, int per_token, int lane, Bf16Quad (&raw)[kHeadsAhead]) {
#pragma unroll
  for (int k = 0; k < kHeadsAhead; ++k) {
    const int h = base + k * kHeadsPerBlock;
    if (h < per_token) raw[k] = read_quad(a.qkv, static_cast<int64_t>(t) * a.token_stride + static_cast<int64_t>(h) * a.head_dim, lane);
  }
}

// Those quads widened into their rows of `heads_in` ([kHeadsAhead][kQuadHeadDim]), for the whole warp to read.
__device__ void put_heads(const Bf16Quad (&raw)[kHeadsAhead], int base, int per_token, int lane, float* heads_in) {
  __syncwarp();  // the rows' last heads have been read
#pragma unroll
  for (int k = 0; k < kHeadsAhead; ++k)
    if (base + k * kHeadsPerBlock < per_token) rows::widen_quad(raw[k], heads_in + k * kQuadHeadDim + 4 * lane);
  __syncwarp();
}

// heads_in: the warp's [kHeadsAhead][kQuadHeadDim] rows; normed: its [kQuadHeadDim] row.
__device__ void qk_norm_rope_token(const QkNormRopeArgs& a, float* heads_in, float* normed) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, first = 4 * lane;
  const int t = blockIdx.x, per_token = a.heads + 2 * a.kv_heads;
  // Issued in this order, so that no load waits behind one whose address is not known yet (a warp issues in order):
  // the table row's index and the token's slot, the norms' weights, the warp's first heads; then the table row's
  // entries, whose address waits for the index while the rest are in flight.
  const int64_t table_row = a.rope_rows ? a.rope_rows[t] * a.head_dim : 0;
  const int64_t slot = a.kv_heads > 0 ? a.slots[t] : 0;
  float q_weights[4] = {}, k_weights[4] = {};
  if (a.q_norm) load_four(a.q_norm + first, q_weights);
  if (a.k_norm) load_four(a.k_norm + first, k_weights);
  Bf16Quad raw[kHeadsAhead];
  fetch_heads(a, t, warp, per_token, lane, raw);
  TokenTable table;
  if (a.rope_rows) {
    load_four(a.cos + table_row + first, table.cos_at);
    load_four(a.sin + table_row + first, table.sin_at);
  }
  for (int base = warp; base < per_token; base += kHeadsPerBlock * kHeadsAhead) {
    if (base != warp) fetch_heads(a, t, base, per_token, lane, raw);  // a token of more than 32 heads: the next ones
    put_heads(raw, base, per_token, lane, heads_in);
#pragma unroll 1
    for (int k = 0; k < kHeadsAhead; ++k) {
      const int h = base + k * kHeadsPerBlock;
      if (h >= per_token) break;
      const HeadPlace place = head_place(a, t, h, slot);
      const float* in = heads_in + k * kQuadHeadDim;
      if (place.is_v) {  // v: into its cache slot as it is, widened and narrowed as the strided form does (a NaN's payload too)
        const auto narrowed = rows::narrow_quad(in + first);
        write_quad(a.v_cache, place.out_row, lane, narrowed);
        if (a.v_step) write_quad(a.v_step, place.step_row, lane, narrowed);
        continue;
      }
      float weights[4];
      for (int i = 0; i < 4; ++i) weights[i] = place.is_q ? q_weights[i] : k_weights[i];
      const auto narrowed = quad_norm_rope(a, in, place.is_q ? a.q_norm != nullptr : a.k_norm != nullptr, weights, table, normed, lane);
      write_quad(place.is_q ? a.q_out : a.k_cache, place.out_row, lane, narrowed);
      if (!place.is_q && a.k_step) write_quad(a.k_step, place.step_row, lane, narrowed);
    }
  }
}

template <bool kQuad>
__global__ void qk_norm_rope_kernel(QkNormRopeArgs a) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if constexpr (kQuad) {
    __shared__ float heads_in[kHeadsPerBlock][kHeadsAhead * kQuadHeadDim], normed[kHeadsPerBlock][kQuadHeadDim];
    block_shared(heads_in, normed);
    qk_norm_rope_token(a, heads_in[warp], normed[warp]);
    return;
  }
  __shared__ float inputs[kHeadsPerBlock][kMaxHeadDim], normed_rows[kHeadsPerBlock][kMaxHeadDim];
  block_shared(inputs, normed_rows);
  const int per_token = a.heads + 2 * a.kv_heads, d = a.head_dim;
  const int item = blockIdx.x * kHeadsPerBlock + warp;
  if (item >= a.tokens * per_token) return;
  const int t = item / per_token, h = item % per_token;
  const HeadPlace place = head_place(a, t, h, h < a.heads ? 0 : a.slots[t]);
  if (place.is_v) {  // v: into its cache slot as it is
    for (int j = lane; j < d; j += kWarp) {
      const float value = load(a.qkv, place.in_row + j, a.qkv_bf16);
      put(a.v_cache, place.out_row + j, value, a.out_bf16);
      if (a.v_step) put(a.v_step, place.step_row + j, value, a.out_bf16);
    }
    return;
  }
  const float* norm = place.is_q ? a.q_norm : a.k_norm;
  const float* row = inputs[warp];
  for (int j = lane; j < d; j += kWarp) inputs[warp][j] = load(a.qkv, place.in_row + j, a.qkv_bf16);
  __syncwarp();
  if (norm) {
    const float scale = warp_norm_scale(row, d, a.eps, lane);
    for (int j = lane; j < d; j += kWarp) normed_rows[warp][j] = rows::norm_out(row[j], scale, norm[j]);
    __syncwarp();
    row = normed_rows[warp];
  }
  void* out = place.is_q ? a.q_out : a.k_cache;
  const float* c = a.rope_rows ? a.cos + a.rope_rows[t] * d : nullptr;
  const float* s = a.rope_rows ? a.sin + a.rope_rows[t] * d : nullptr;
  void* step = place.is_q ? nullptr : a.k_step;
  for (int j = lane; j < d; j += kWarp) {
    const float value = c ? rows::rope_out(row, c, s, d, j) : row[j];
    put(out, place.out_row + j, value, a.out_bf16);
    if (step) put(step, place.step_row + j, value, a.out_bf16);
  }
}

// Whether every access of qk_norm_rope's kQuad form is an aligned one: 8 bytes of bf16, 16 of fp32 (the norm's weights, the RoPE
// tables, whose rows of 128 values keep a 16-byte aligned table's alignment).
bool takes_quads(const QkNormRopeArgs& a) {
  const auto aligned = [](const void* p, size_t bytes) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % bytes == 0; };
  const auto aligned8 = [&](const void* p) { return aligned(p, sizeof(uint2)); };
  const auto aligned16 = [&](const void* p) { return aligned(p, sizeof(float4)); };
  return a.qkv_bf16 && a.out_bf16 && a.head_dim == kQuadHeadDim && a.token_stride % 4 == 0 && aligned8(a.qkv) && aligned8(a.q_out) &&
         aligned8(a.k_cache) && aligned8(a.v_cache) && aligned8(a.k_step) && aligned8(a.v_step) && aligned16(a.q_norm) &&
         aligned16(a.k_norm) && aligned16(a.cos) && aligned16(a.sin);
}

// Block r: row r, its threads along the row (no 64-bit division per element). kQuad: bf16 rows whose width and
// offsets are multiples of 4, each thread taking four neighbours in one 8-byte access of each array.
constexpr int kQuadsAhead = 4;  // a thread's quads in flight at once (a row of 4,096 values: all of them)
template <bool kQuad>
__global__ void gated_mul_kernel(GatedMulArgs a) {
  const int64_t in_row = static_cast<int64_t>(blockIdx.x) * a.stride, out_row = static_cast<int64_t>(blockIdx.x) * a.n;
  if constexpr (kQuad) {
    // kQuadsAhead quads of gate and up loaded before any is computed on: one round trip to memory for them all.
    const int quads = a.n / 4;
    for (int base = threadIdx.x; base < quads; base += kQuadsAhead * blockDim.x) {
      Bf16Quad gate[kQuadsAhead], up[kQuadsAhead];
#pragma unroll
      for (int k = 0; k < kQuadsAhead; ++k) {
        const int q = base + k * blockDim.x;
        if (q < quads) gate[k] = read_quad(a.gate, in_row, q), up[k] = read_quad(a.up, in_row, q);
      }
#pragma unroll
      for (int k = 0; k < kQuadsAhead; ++k) {
        const int q = base + k * blockDim.x;
        if (q >= quads) break;
        float g[4], u[4], out[4];
        rows::widen_quad(gate[k], g);
        rows::widen_quad(up[k], u);
        for (int i = 0; i < 4; ++i) out[i] = rows::gated(g[i], u[i], a.gelu_tanh);
        write_quad(a.out, out_row, q, rows::narrow_quad(out));
      }
    }
  } else {
    for (int j = threadIdx.x; j < a.n; j += blockDim.x) {
      const float g = load_read_only(a.gate, in_row + j, a.in_bf16), u = load_read_only(a.up, in_row + j, a.in_bf16);
      put(a.out, out_row + j, rows::gated(g, u, a.gelu_tanh), a.in_bf16);
    }
  }
}


// A launch's shape: its grid and blocks, its dynamic shared memory, and whether it takes the kernel's quad form.
struct Launch {
  dim3 grid, block;
  size_t shared_bytes = 0;
  bool quads = false;
};

Launch add_rms_norm_launch(const AddRmsNormArgs& a) {
  const int per_pass = (a.n + kRowAhead - 1) / kRowAhead, threads = std::min(kMaxRowThreads, std::max(kMinRowThreads, (per_pass + kWarp - 1) / kWarp * kWarp));
  return {dim3(static_cast<unsigned>(a.rows)), dim3(threads), 2 * static_cast<size_t>(a.n) * sizeof(float), false};  // the row and the weights
}

// The quad form a block per token; the strided one a warp per (token, head).
Launch qk_norm_rope_launch(const QkNormRopeArgs& a) {
  if (takes_quads(a)) return {dim3(static_cast<unsigned>(a.tokens)), dim3(kHeadsPerBlock * kWarp), 0, true};
  const int items = a.tokens * (a.heads + 2 * a.kv_heads);
  return {dim3(static_cast<unsigned>((items + kHeadsPerBlock - 1) / kHeadsPerBlock)), dim3(kHeadsPerBlock * kWarp), 0, false};
}

Launch gated_mul_launch(const GatedMulArgs& a) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % sizeof(uint2) == 0; };
  const bool quads = a.in_bf16 && a.n % 4 == 0 && a.stride % 4 == 0 && aligned(a.gate) && aligned(a.up) && aligned(a.out);
  return {dim3(static_cast<unsigned>(a.rows)), dim3(kRowThreads), 0, quads};
}

}  // namespace
}  // namespace tq::cuda
