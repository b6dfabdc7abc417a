// add_rms_norm: one block per row (a token's hidden state), the row held in shared
// memory from its one read to its last use, the norm's weights read beside it in
// the same pass (not a round trip after the scale): the first 16 threads sum their lanes'
// squares there (the CPU kernels' 16 lanes, each a sum in element order: that order
// is what keeps the bits, so it is not a tree), thread 0 turns the lane sums into
// the row's scale, and every thread writes its strided share of the outputs. Why
// shared memory: a row is a few KB, so the kernel's time is latency. A loop whose
// iterations each load and then put what they loaded waits out one round trip to
// memory per iteration (nvcc does not unroll it, so no load is issued ahead): a
// thread loads its kRowAhead elements into registers in a loop of fixed length
// first, then puts them. qk_norm_rope: a warp per head (a head is at most 256
// values, too little for a block and its barriers), the same lane sums by lanes
// 0-15, each lane taking the sixteen by shuffle and forming the scale alike; in
// its quad form (bf16, heads of 128) a block per token, whose warps take its heads
// four at a time with their loads issued together (row_kernels.cuh says why).
// gated_mul: one block per row, its threads along the row. Where bf16 rows and
// heads allow, qk_norm_rope and gated_mul move four values in one access. The arithmetic is
// kernels/math/row_kernels_math.h, the CPU kernels' own.
#include "kernels/cuda/row_kernels.h"
#include "kernels/cuda/row_kernels.cuh"

namespace tq::cuda {

constexpr int kMaxDevices = 64;  // devices whose shared-memory opt-in is remembered (others opt in at every launch)

cudaError_t launch_add_rms_norm(const AddRmsNormArgs& args, cudaStream_t stream) {
  if (args.rows == 0) return cudaSuccess;
  const Launch launch = add_rms_norm_launch(args);
  const size_t shared_bytes = launch.shared_bytes;
  // Over 48 KB (a hidden size over 6,144) the kernel must opt in to more shared memory: once a device for the largest
  // asked there (the attribute is the function's on the current device), not at every launch.
  static size_t opted_in[kMaxDevices] = {};
  int device = 0;
  if (shared_bytes > kDefaultSharedBytes && (cudaGetDevice(&device) != cudaSuccess || device >= kMaxDevices || shared_bytes > opted_in[device])) {
    const cudaError_t e = cudaFuncSetAttribute(add_rms_norm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes));
    if (e != cudaSuccess) return e;
    if (device < kMaxDevices) opted_in[device] = shared_bytes;
  }
  add_rms_norm_kernel<<<launch.grid, launch.block, shared_bytes, stream>>>(args);
  return cudaGetLastError();
}

cudaError_t launch_qk_norm_rope(const QkNormRopeArgs& args, cudaStream_t stream) {
  if (args.tokens == 0) return cudaSuccess;
  if (args.head_dim > kMaxHeadDim) return cudaErrorInvalidValue;
  const Launch launch = qk_norm_rope_launch(args);
  if (launch.quads) qk_norm_rope_kernel<true><<<launch.grid, launch.block, 0, stream>>>(args);
  else qk_norm_rope_kernel<false><<<launch.grid, launch.block, 0, stream>>>(args);
  return cudaGetLastError();
}

cudaError_t launch_gated_mul(const GatedMulArgs& args, cudaStream_t stream) {
  if (args.rows == 0 || args.n == 0) return cudaSuccess;
  const Launch launch = gated_mul_launch(args);
  if (launch.quads) gated_mul_kernel<true><<<launch.grid, launch.block, 0, stream>>>(args);
  else gated_mul_kernel<false><<<launch.grid, launch.block, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace tq::cuda
