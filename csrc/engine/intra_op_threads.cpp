#include "engine/intra_op_threads.h"

#include <ATen/Parallel.h>

// OpenMP's own call where this build compiles with OpenMP (the CPU builds). A CUDA build links no OpenMP runtime of its
// own (CMakeLists.txt), so it asks ATen, whose libtorch carries one.
#if AT_PARALLEL_OPENMP && defined(_OPENMP)
#define TQ_SETS_OPENMP 1
#include <omp.h>
#else
#define TQ_SETS_OPENMP 0
#endif

namespace tq {

void set_intra_op_threads(int threads) {
#if TQ_SETS_OPENMP
  at::internal::lazy_init_num_threads();
  omp_set_num_threads(threads);
#else
  at::set_num_threads(threads);
#endif
}

}  // namespace tq
