// The fused row kernels as the engine calls them (FusedRowOps: add_rms_norm, gated_mul_halves, qk_norm_rope_store with
// the K/V cache and step-key writes) on CUDA against their host forms, bit for bit, where this is a CUDA build on a
// machine with a GPU: the GPU window runs it after its build, so that a kernel whose launch differs from its arithmetic
// on the hardware (a load, an alignment, the quad or strided form the launch picks) is named before the engine's calls
// use it. Their bodies meet the host forms on the CPU too, through the emulation (cuda_bodies_check); here the device
// runs the launches. Elsewhere the same comparison runs with the CPU as the "device" (the check itself exercised; it
// says which device ran). One JSON line per kernel: {"part", "device", "compared", "differ"}.
#include <ATen/ATen.h>

#include <cstdio>
#include <vector>

#include "kernels/kernel_stack.h"
#include "kernels/layer_kernels.h"

using namespace tq;

namespace {

const at::Device kTarget = at::hasCUDA() ? at::Device(at::kCUDA) : at::Device(at::kCPU);

// The same bits: each element's, NaNs included.
bool same(const at::Tensor& on_target, const at::Tensor& on_host) {
  const auto as_bits = [](const at::Tensor& t) { return t.cpu().contiguous().view(t.element_size() == 2 ? at::kShort : at::kInt); };
  return on_target.sizes() == on_host.sizes() && on_target.scalar_type() == on_host.scalar_type() && as_bits(on_target).equal(as_bits(on_host));
}

at::Tensor to_target(const at::Tensor& t) { return t.defined() ? t.to(kTarget) : t; }

struct Tally {
  const char* part;
  int64_t compared = 0, differ = 0;
  void count(const at::Tensor& on_target, const at::Tensor& on_host) {
    ++compared;
    if (!same(on_target, on_host)) ++differ;
  }
  ~Tally() {
    std::printf("{\"part\":\"%s\",\"device\":\"%s\",\"compared\":%lld,\"differ\":%lld}\n", part, kTarget.is_cuda() ? "cuda" : "cpu", (long long)compared,
                (long long)differ);
  }
};

// Rows of one and of a warm question's and a prefill's sizes; widths of the models' (1,024 to 9,000: a thread's
// elements in two passes), and 37 (no quads); without an addend, with an fp32 or a bf16 one; out in fp32 and bf16.
void check_add_rms_norm(const FusedRowOps& ops) {
  Tally tally{"addRmsNorm"};
  for (const int64_t rows : {1, 24, 1000})
    for (const int64_t n : {37, 1024, 2500, 9000})
      for (const int addend_kind : {0, 1, 2})
        for (const auto out_dtype : {at::kFloat, at::kBFloat16}) {
          const auto residual = at::randn({rows, n}) * 3, weight = at::randn({n}) + 1;
          const auto addend = addend_kind == 0 ? at::Tensor() : at::randn({rows, n}).to(addend_kind == 1 ? at::kFloat : at::kBFloat16);
          auto on_host = residual.clone(), on_target = residual.to(kTarget);
          const auto out_host = ops.add_rms_norm(on_host, addend, weight, 1e-6, out_dtype);
          const auto out_target = ops.add_rms_norm(on_target, to_target(addend), weight.to(kTarget), 1e-6, out_dtype);
          tally.count(out_target, out_host);
          tally.count(on_target, on_host);  // the residual, after the add
        }
}

// Gate and up of the models' widths (3,072, 4,864, 14,336) and one without quads (37), SiLU and GELU-tanh, fp32 and
// bf16, gate values wide enough to reach the exp's clamps.
void check_gated_mul(const FusedRowOps& ops) {
  Tally tally{"gatedMul"};
  for (const int64_t rows : {1, 24, 300})
    for (const int64_t n : {37, 3072, 4864, 14336})
      for (const auto dtype : {at::kFloat, at::kBFloat16})
        for (const auto act : {GateActivation::Silu, GateActivation::GeluTanh}) {
          const auto gate_up = at::cat({at::randn({rows, n}) * 30, at::randn({rows, n})}, 1).to(dtype);
          tally.count(ops.gated_mul_halves(gate_up.to(kTarget), act), ops.gated_mul_halves(gate_up, act));
        }
}

// Heads of the families' shapes (Qwen3's 16/8 x 128: the quad form; 14/2 x 64; 8/2 x 80 and 6/3 x 256: strided), with
// and without per-head norms, qkv in fp32 and bf16, into a cache of twice the tokens' slots and the step's keys; and
// heads without keys (8/0 x 128 and x 64), as LayerKernels::rope calls it where a family's norm or RoPE runs apart
// (OLMo 2's whole-projection norm, Phi-4-mini's partial RoPE: docs/gpu.md, "The fused forward").
void check_qk_norm_rope(const FusedRowOps& ops) {
  Tally tally{"qkNormRope"};
  struct Heads {
    int64_t heads, kv_heads, dim;
  };
  for (const int64_t tokens : {1, 24, 300})
    for (const auto [heads, kv_heads, dim] : std::vector<Heads>{{16, 8, 128}, {14, 2, 64}, {8, 2, 80}, {6, 3, 256}, {8, 0, 128}, {8, 0, 64}})
      for (const bool norms : {false, true})
        for (const auto in_dtype : {at::kFloat, at::kBFloat16})
          for (const auto out_dtype : {at::kFloat, at::kBFloat16}) {
            const auto qkv = (at::randn({tokens, (heads + 2 * kv_heads) * dim}) * 2).to(in_dtype);
            const auto q_norm = norms ? at::randn({dim}) + 1 : at::Tensor(), k_norm = norms ? at::randn({dim}) + 1 : at::Tensor();
            const auto angles = at::arange(400, at::kFloat).unsqueeze(1) * at::rand({dim});
            const auto cos = angles.cos().contiguous(), sin = angles.sin().contiguous();
            const auto positions = at::randint(0, 400, {tokens}, at::kLong);
            const auto slots = at::randperm(2 * tokens, at::kLong).slice(0, 0, tokens).contiguous();
            // Each side's cache, step keys and q; the target's then compared with the host's.
            const auto run = [&](const at::Device& device) {
              const auto on = [&](const at::Tensor& t) { return t.defined() ? t.to(device) : t; };
              auto key_cache = at::zeros({2 * tokens, kv_heads, dim}, at::TensorOptions().dtype(out_dtype).device(device));
              auto value_cache = at::zeros_like(key_cache);
              StepKeys step{at::zeros({tokens, kv_heads, dim}, key_cache.options()), at::zeros({tokens, kv_heads, dim}, key_cache.options())};
              const auto q = ops.qk_norm_rope_store(on(qkv), heads, kv_heads, on(q_norm), on(k_norm), 1e-6, on(cos), on(sin), on(positions), key_cache,
                                                    value_cache, on(slots), out_dtype, step);
              return std::vector<at::Tensor>{q, key_cache, value_cache, step.k, step.v};
            };
            const auto on_host = run(at::kCPU), on_target = run(kTarget);
            for (size_t i = 0; i < on_host.size(); ++i) tally.count(on_target[i], on_host[i]);
          }
}

}  // namespace

int main() {
  at::manual_seed(11);
  // ATen's GEMMs under the fused row kernels, as the CUDA engine's default forward (kernels/kernel_stack.h); the row
  // kernels run where their tensors are.
  KernelStackOptions options;
  options.aten = true;
  options.fused_rows = true;
  const auto kernels = make_layer_kernels(options);
  const FusedRowOps& ops = *kernels->fused_rows();
  check_add_rms_norm(ops);
  check_gated_mul(ops);
  check_qk_norm_rope(ops);
  return 0;
}
