// The compiler's x86 intrinsics, for the CPU kernels. GCC 12's AVX-512 intrinsics start some results from an
// undefined vector (`__m512 __Y = __Y;`), which -Wuninitialized (in -Wall -Wextra: node-gyp's flags for binding.gyp's
// build) reports at every kernel that inlines them: GCC bug 105593, mended in GCC 13. Ignored for the header's own
// lines alone, so the kernels' own code is still checked.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
