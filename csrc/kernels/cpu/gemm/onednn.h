// What the engine's direct oneDNN calls share: the CPU engine, dtype mapping
// and synchronous execution. oneDNN is the library libtorch's own CPU matmuls
// run on; calling it directly lets weights stay packed (packed_linear.h) and
// attention read queries, keys and values in place through strides (attention.cpp).
#pragma once
#include <ATen/ATen.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

namespace tq::onednn {

dnnl::engine& cpu();
// bf16 or fp32; anything else is a programming error.
dnnl::memory::data_type type_of(at::ScalarType t);
// Whether oneDNN can build a bf16 matmul on this CPU (it needs AVX-512; on AVX2 it cannot).
bool bf16_matmul_supported();
dnnl::memory wrap(const dnnl::memory::desc& desc, const void* data);
// Runs a primitive on the calling thread (and its OpenMP team) to completion.
void run(const dnnl::primitive& primitive, const std::unordered_map<int, dnnl::memory>& args);

}  // namespace tq::onednn
