#include "kernels/kernel_stack.h"

#include "kernels/aten/aten_layer_kernels.h"
#include "kernels/cascade/cascade_layer_kernels.h"
#include "kernels/fused/fused_layer_kernels.h"

namespace tq {

std::unique_ptr<LayerKernels> make_layer_kernels(const KernelStackOptions& o) {
  auto kernels = o.aten ? aten_layer_kernels(o.device, o.quantization, o.batch_invariant, o.own_gemm)
                        : shifted_layer_kernels(cpu_layer_kernels(o.batch_invariant, o.isa, o.dtype, o.quantization, o.native_arithmetic),
                                                o.buffer_shift);
  if (o.fused_rows) kernels = fused_layer_kernels(std::move(kernels));
  if (o.cascade_attention) kernels = cascade_layer_kernels(std::move(kernels), o.dtype, o.fixed_shapes, o.state_attention);
  return kernels;
}

}  // namespace tq
