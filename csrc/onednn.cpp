#include "onednn.h"

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

dnnl::memory wrap(const dnnl::memory::desc& desc, const void* data) { return dnnl::memory(desc, cpu(), const_cast<void*>(data)); }

void run(const dnnl::primitive& primitive, const std::unordered_map<int, dnnl::memory>& args) {
  dnnl::stream stream(cpu());
  primitive.execute(stream, args);
  stream.wait();
}

}  // namespace tq::onednn
