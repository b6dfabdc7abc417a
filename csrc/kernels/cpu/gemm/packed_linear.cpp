#include "kernels/cpu/gemm/packed_linear.h"

#include <atomic>
#include <list>
#include <tuple>
#include <unordered_map>

#include "kernels/cpu/gemm/weight_memory.h"
#if TQ_ONEDNN
#include "kernels/cpu/gemm/onednn.h"
#endif

namespace tq {

#if TQ_ONEDNN
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// The packed layout is chosen for M = 128 and then used for every M: measured
// on the bench shapes, primitives for M from 1 to 1000 all select brgemm with it.
constexpr int64_t kPackingRows = 128;

dnnl::matmul::primitive_desc describe(int64_t m, int64_t k, int64_t n, dt src, const dnnl::memory::desc& weights, bool bias, dt dst,
                                      const dnnl::primitive_attr& attr = {}) {
  dnnl::memory::desc src_md({m, k}, src, tag::ab), dst_md({m, n}, dst, tag::ab);
  if (!bias) return {dnnl::matmul::desc(src_md, weights, dst_md), attr, onednn::cpu()};
  dnnl::memory::desc bias_md({1, n}, dt::f32, tag::ab);
  return {dnnl::matmul::desc(src_md, weights, bias_md, dst_md), attr, onednn::cpu()};
}

// Primitives depend on shapes and epilogue, not on the weights, so one cache
// serves every layer. A forward pass needs a handful per distinct M. The cache
// is per thread: oneDNN's shared scratchpad (its default build) requires a
// primitive to run on the thread that created it, and each engine has its own
// thread. Each holds JIT code and buffers, and under varied load M takes
// hundreds of values: the cache is bounded, least recently used first out.
using Key = std::tuple<int64_t, int64_t, int64_t, int, bool, int, bool>;
struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = 0;
    std::apply([&](auto... v) { ((h = h * 1000003u ^ std::hash<int64_t>()(static_cast<int64_t>(v))), ...); }, k);
    return h;
  }
};
constexpr size_t kMaxCachedPrimitives = 64;
struct Compiled {
  dnnl::matmul::primitive_desc desc;
  dnnl::matmul primitive;
};

class PrimitiveCache {
 public:
  // The entry for key, made by make() when absent; it becomes the most recently used.
  template <typename Make>
  const Compiled& get(const Key& key, Make&& make) {
    auto it = index_.find(key);
    if (it != index_.end()) {
      order_.splice(order_.begin(), order_, it->second);
      return it->second->second;
    }
    if (order_.size() >= kMaxCachedPrimitives) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
    order_.emplace_front(key, make());
    index_.emplace(key, order_.begin());
    count_ = static_cast<int64_t>(order_.size());
    return order_.front().second;
  }
  static std::atomic<int64_t> count_;

 private:
  std::list<std::pair<Key, Compiled>> order_;
  std::unordered_map<Key, std::list<std::pair<Key, Compiled>>::iterator, KeyHash> index_;
};
std::atomic<int64_t> PrimitiveCache::count_{0};

}  // namespace

int64_t cached_primitives() { return PrimitiveCache::count_.load(); }
int64_t max_cached_primitives() { return static_cast<int64_t>(kMaxCachedPrimitives); }
#else
int64_t cached_primitives() { return 0; }
int64_t max_cached_primitives() { return 0; }
#endif

PackedLinear::PackedLinear(const at::Tensor& weight, const at::Tensor& bias, bool invariant, Isa isa, bool native)
    : invariant_(invariant), in_(weight.size(1)), out_(weight.size(0)), dtype_(weight.scalar_type()) {
  if (invariant) {
    gemm_ = InvariantGemm(weight, bias, isa, native);
    return;
  }
#if TQ_ONEDNN
  const dt type = onednn::type_of(dtype_);
  auto plain = weight.contiguous();
  const dnnl::memory::desc any({in_, out_}, type, tag::any), plain_md({in_, out_}, type, tag::ba);
  auto pd = describe(kPackingRows, in_, out_, type, any, bias.defined(), dt::f32);
  packed_ = weight_buffer(static_cast<int64_t>(pd.weights_desc().get_size()));
  auto from = onednn::wrap(plain_md, plain.data_ptr()), to = onednn::wrap(pd.weights_desc(), packed_.data_ptr());
  onednn::run(dnnl::reorder(from, to), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
  if (bias.defined()) bias_ = bias.to(at::kFloat).reshape({1, out_}).contiguous();
#else
  TORCH_CHECK(false, "PackedLinear: this build has no oneDNN; only the batch-invariant kernels");
#endif
}

int64_t PackedLinear::bytes() const {
  if (invariant_) return gemm_.bytes();
  return packed_.nbytes() + (bias_.defined() ? bias_.nbytes() : 0);
}

void PackedLinear::run(const at::Tensor& x, at::Tensor& out, bool add_into) const {
  const int64_t m = x.size(0);
  if (m == 0) return;
  if (invariant_) return gemm_.run(x, out, add_into);
#if TQ_ONEDNN
  TORCH_CHECK(x.scalar_type() == dtype_ && x.size(1) == in_, "PackedLinear: input ", x.sizes(), " ", x.scalar_type(), " for weights [",
              out_, ", ", in_, "] ", dtype_);
  const dt src = onednn::type_of(dtype_), dst = onednn::type_of(out.scalar_type());
  thread_local PrimitiveCache primitives;
  const Key key{m, in_, out_, static_cast<int>(src), bias_.defined(), static_cast<int>(dst), add_into};
  const Compiled& compiled = primitives.get(key, [&] {
    dnnl::primitive_attr attr;
    if (add_into) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    const dnnl::memory::desc any({in_, out_}, src, tag::any);
    auto weights = describe(kPackingRows, in_, out_, src, any, bias_.defined(), dt::f32).weights_desc();
    auto desc = describe(m, in_, out_, src, weights, bias_.defined(), dst, attr);
    return Compiled{desc, dnnl::matmul(desc)};
  });
  const auto& pd = compiled.desc;
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, onednn::wrap(pd.src_desc(), x.data_ptr())},
                                             {DNNL_ARG_WEIGHTS, onednn::wrap(pd.weights_desc(), packed_.data_ptr())},
                                             {DNNL_ARG_DST, onednn::wrap(pd.dst_desc(), out.data_ptr())}};
  if (bias_.defined()) args.emplace(DNNL_ARG_BIAS, onednn::wrap(pd.bias_desc(), bias_.data_ptr()));
  onednn::run(compiled.primitive, args);
#endif
}

at::Tensor PackedLinear::operator()(const at::Tensor& x, at::ScalarType out_dtype) const {
  auto out = at::empty({x.size(0), out_}, x.options().dtype(out_dtype));
  run(x.contiguous(), out, /*add_into=*/false);
  return out;
}

void PackedLinear::add_into(const at::Tensor& x, at::Tensor& residual) const {
  TORCH_CHECK(residual.scalar_type() == at::kFloat && residual.is_contiguous() && residual.size(0) == x.size(0) && residual.size(1) == out_,
              "PackedLinear::add_into: residual ", residual.sizes());
  run(x.contiguous(), residual, /*add_into=*/true);
}

}  // namespace tq
