// fp8_gemm.h has the math. A block computes 64 rows x 128 columns with 8
// warps (2 x 4, 32 x 32 outputs each: 2 x 4 mma tiles of 16 x 8), walking k
// in blocks of kFp8Align bytes: each thread copies its 16-byte pieces of the
// next block into registers while the warps multiply the current one from
// shared memory. Fragments, as the PTX ISA lays out mma.m16n8k32 for 8-bit
// types (g = lane / 4, t = lane % 4; each register 4 consecutive k):
//   A (16 x 32, row-major): a0 row g, k 4t..; a1 row g+8; a2 row g, k 16+4t..; a3 row g+8, k 16+4t..
//   B (32 x 8, by column):  b0 column g, k 4t..; b1 column g, k 16+4t..
//   C (16 x 8, fp32):       c0, c1 row g, columns 2t, 2t+1; c2, c3 row g+8
// A column of B is a row of W ([n, k], k contiguous), so both operands are
// read as 4-byte words of k-contiguous rows. The rows in shared memory are
// kFp8Align + 16 bytes apart so that the 32 lanes' words (8 rows x 4) fall
// in 32 different banks.
#include "kernels/cuda/fp8_gemm.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

namespace tq::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kTileRows = 64, kTileCols = 128;
constexpr int kStride = kFp8Align + 16;
static_assert(kThreads / 4 == kTileRows && kTileCols == 2 * kTileRows && kFp8Align == 4 * 16,
              "per k block, each thread copies a 16-byte piece of one x row and of two w rows");

__device__ float load_value(const Fp8QuantizeArgs& a, int64_t row, int64_t k) {
  const int64_t at = row * a.ldx + k;
  if (a.x_bf16) return __uint_as_float(static_cast<uint32_t>(static_cast<const uint16_t*>(a.x)[at]) << 16);
  return static_cast<const float*>(a.x)[at];
}

// One block per row: the row's largest magnitude (max is exact, so its order does not matter), then its
// bytes, zeros from k to padded (fp8_padded_k(k)).
__global__ void __launch_bounds__(kThreads) fp8_quantize_kernel(Fp8QuantizeArgs a, int64_t padded) {
  const int64_t row = blockIdx.x;
  float amax = 0.0f;
  for (int64_t k = threadIdx.x; k < a.k; k += kThreads) amax = fmaxf(amax, fabsf(load_value(a, row, k)));
  for (int offset = 16; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  __shared__ float warp_max[kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
  __syncthreads();
  amax = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) amax = fmaxf(amax, warp_max[w]);
  const float inverse = amax > 0.0f ? kFp8Max / amax : 0.0f;
  if (threadIdx.x == 0) a.scale[row] = amax / kFp8Max;
  uint8_t* q = a.q + row * a.ldq;
  for (int64_t k = threadIdx.x; k < padded; k += kThreads)
    q[k] = k < a.k ? __nv_cvt_float_to_fp8(load_value(a, row, k) * inverse, __NV_SATFINITE, __NV_E4M3) : 0;
}

__device__ __forceinline__ uint32_t word(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

// d += a b over 32 k, on the tensor cores.
__device__ __forceinline__ void mma_e4m3(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();  // fp8 mma needs sm_89 or newer: the caller checks the device first
#endif
}

__global__ void __launch_bounds__(kThreads) fp8_gemm_kernel(Fp8GemmArgs a) {
  __shared__ __align__(16) uint8_t xs[kTileRows * kStride];
  __shared__ __align__(16) uint8_t ws[kTileCols * kStride];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int warp_row = (warp / 4) * 32, warp_col = (warp % 4) * 32;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTileRows, col0 = static_cast<int64_t>(blockIdx.x) * kTileCols;

  // Per k block, each thread copies 16 bytes of one x row and of two w rows; rows past m or n are zeros.
  const int copy_row = threadIdx.x / 4, copy_at = (threadIdx.x % 4) * 16;
  uint4 x_next, w_next[2];
  auto fetch = [&](int64_t k0) {
    const uint4 zero = make_uint4(0, 0, 0, 0);
    const int64_t r = row0 + copy_row;
    x_next = r < a.m ? *reinterpret_cast<const uint4*>(a.x + r * a.ld + k0 + copy_at) : zero;
    for (int h = 0; h < 2; ++h) {
      const int64_t c = col0 + copy_row + h * (kTileCols / 2);
      w_next[h] = c < a.n ? *reinterpret_cast<const uint4*>(a.w + c * a.ld + k0 + copy_at) : zero;
    }
  };

  float acc[2][4][4] = {};
  const int64_t blocks = a.ld / kFp8Align;
  fetch(0);
  for (int64_t kb = 0; kb < blocks; ++kb) {
    __syncthreads();  // every warp has read the previous block
    *reinterpret_cast<uint4*>(xs + copy_row * kStride + copy_at) = x_next;
    for (int h = 0; h < 2; ++h) *reinterpret_cast<uint4*>(ws + (copy_row + h * (kTileCols / 2)) * kStride + copy_at) = w_next[h];
    __syncthreads();
    if (kb + 1 < blocks) fetch((kb + 1) * kFp8Align);
    // The block's sums start from zero in the tensor cores and are added to acc in fp32 (fp8_gemm.h says why).
    float part[2][4][4] = {};
    for (int kk = 0; kk < kFp8Align; kk += 32) {
      uint32_t af[2][4], bf[4][2];
      for (int i = 0; i < 2; ++i) {
        const uint8_t* p = xs + (warp_row + i * 16 + g) * kStride + kk + t * 4;
        af[i][0] = word(p);
        af[i][1] = word(p + 8 * kStride);
        af[i][2] = word(p + 16);
        af[i][3] = word(p + 8 * kStride + 16);
      }
      for (int j = 0; j < 4; ++j) {
        const uint8_t* p = ws + (warp_col + j * 8 + g) * kStride + kk + t * 4;
        bf[j][0] = word(p);
        bf[j][1] = word(p + 16);
      }
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 4; ++j) mma_e4m3(part[i][j], af[i], bf[j]);
    }
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j)
        for (int e = 0; e < 4; ++e) acc[i][j][e] += part[i][j][e];
  }

  // The last step: one fp32 expression per output, as the CPU's int8 GEMM.
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int e = 0; e < 4; ++e) {
        const int64_t r = row0 + warp_row + i * 16 + g + (e >= 2 ? 8 : 0);
        const int64_t c = col0 + warp_col + j * 8 + t * 2 + (e & 1);
        if (r >= a.m || c >= a.n) continue;
        const int64_t at = r * a.ldc + c;
        const float init = a.accumulate ? static_cast<const float*>(a.out)[at] : a.bias ? a.bias[c] : 0.0f;
        const float y = fmaf(acc[i][j][e], a.x_scale[r] * a.w_scale[c], init);
        if (a.out_bf16) static_cast<__nv_bfloat16*>(a.out)[at] = __float2bfloat16_rn(y);
        else static_cast<float*>(a.out)[at] = y;
      }
}

}  // namespace

cudaError_t launch_fp8_quantize(const Fp8QuantizeArgs& args, cudaStream_t stream) {
  if (args.rows == 0) return cudaSuccess;
  fp8_quantize_kernel<<<static_cast<unsigned>(args.rows), kThreads, 0, stream>>>(args, fp8_padded_k(args.k));
  return cudaGetLastError();
}

cudaError_t launch_fp8_gemm(const Fp8GemmArgs& args, cudaStream_t stream) {
  if (args.m == 0 || args.n == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((args.n + kTileCols - 1) / kTileCols), static_cast<unsigned>((args.m + kTileRows - 1) / kTileRows));
  fp8_gemm_kernel<<<grid, kThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace tq::cuda
