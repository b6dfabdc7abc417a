// Compiled only where the build has oneDNN (TQ_ONEDNN): a CUDA libtorch carries oneDNN headers of another major
// version without the library, and this file must not depend on the build's source list to stay out of such a build.
#if TQ_ONEDNN
#include "kernels/cpu/gemm/onednn.h"

namespace tq::onednn {

dnnl::engine& cpu() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::memory::data_type type_of(at::ScalarType t) {
  if (t == at::kBFloat16) return dnnl::memory::data_type::bf16;
  TORCH_CHECK(t == at::kFloat, "oneDNN path: unsupported dtype ", t);
  return dnnl::memory::data_type::f32;
}

bool bf16_matmul_supported() {
  static const bool yes = [] {
    using dt = dnnl::memory::data_type;
    const dnnl::memory::desc a({2, 16}, dt::bf16, dnnl::memory::format_tag::ab), b({16, 16}, dt::bf16, dnnl::memory::format_tag::ab),
        c({2, 16}, dt::f32, dnnl::memory::format_tag::ab);
    try {
      dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), cpu());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return yes;
}

dnnl::memory wrap(const dnnl::memory::desc& desc, const void* data) { return dnnl::memory(desc, cpu(), const_cast<void*>(data)); }

void run(const dnnl::primitive& primitive, const std::unordered_map<int, dnnl::memory>& args) {
  dnnl::stream stream(cpu());
  primitive.execute(stream, args);
  stream.wait();
}

}  // namespace tq::onednn
#endif  // TQ_ONEDNN
