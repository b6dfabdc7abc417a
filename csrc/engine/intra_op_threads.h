// How many threads the calling thread's CPU work runs on: ATen's operators,
// oneDNN's and the engine's own kernels, all on OpenMP's threads.
#pragma once

namespace tq {

// Sets the calling thread's OpenMP thread count to `threads`, as
// at::set_num_threads does, without rebuilding caffe2's pthreadpool, which
// at::set_num_threads also does every time it is called. That pool serves
// QNNPACK and XNNPACK, which the engine never calls, and each new pool's
// threads spin for milliseconds waiting for work that never comes, at every
// engine's open (bench/README.md, "Where a start's CPU goes"). ATen's
// once-per-thread set-up runs first, so that it
// cannot reset the count at the thread's first parallel operator. Where ATen
// runs on another parallel backend, or this build does not compile with
// OpenMP (a CUDA build), at::set_num_threads does it.
void set_intra_op_threads(int threads);

}  // namespace tq
