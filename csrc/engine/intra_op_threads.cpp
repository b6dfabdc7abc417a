#include "engine/intra_op_threads.h"

#include <ATen/Parallel.h>

#if AT_PARALLEL_OPENMP
#include <omp.h>
#endif

namespace tq {

void set_intra_op_threads(int threads) {
#if AT_PARALLEL_OPENMP
  at::internal::lazy_init_num_threads();
  omp_set_num_threads(threads);
#else
  at::set_num_threads(threads);
#endif
}

}  // namespace tq
