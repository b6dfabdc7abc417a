// A linear layer whose weights are packed once, at load, into the blocked
// layout oneDNN's brgemm kernels read. at::linear hands oneDNN the plain
// [out, in] matrix and so re-packs it on every call: at M = 49 (a question on
// a cached state) that re-pack cost a third of the time, and in fp32 at::linear
// goes to OpenBLAS at half oneDNN's rate. The epilogue fuses what used to be a
// separate pass over the output: the residual add.
//
// With batch invariance on (the default), the layer runs on the engine's own
// GEMM instead (invariant_gemm.h), whose result for a row does not depend on
// the other rows; oneDNN's does (by up to 2.7e-4 at K = 4864).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>

#include "kernels/cpu/gemm/invariant_gemm.h"
#include "kernels/layer_kernels.h"

namespace tq {

class PackedLinear : public Linear {
 public:
  PackedLinear() = default;
  // weight: [out, in] in the compute dtype (bf16 or fp32); bias: [out] or undefined.
  // invariant: on the invariant GEMM at level isa (native: bf16 on AMX tiles), else on oneDNN.
  PackedLinear(const at::Tensor& weight, const at::Tensor& bias, bool invariant, Isa isa, bool native = false);

  // x W^T (+ b) for x [M, in] in the compute dtype, returned in out_dtype.
  at::Tensor operator()(const at::Tensor& x, at::ScalarType out_dtype) const override;
  // residual += x W^T, with residual [M, out] fp32 (oneDNN's sum post-op).
  void add_into(const at::Tensor& x, at::Tensor& residual) const override;
  int64_t bytes() const override;

 private:
  void run(const at::Tensor& x, at::Tensor& out, bool add_into) const;

  bool invariant_ = false;
  InvariantGemm gemm_;  // when invariant_
  int64_t in_ = 0, out_ = 0;
  at::ScalarType dtype_ = at::kFloat;
  at::Tensor packed_;  // uint8 bytes in oneDNN's blocked layout (oneDNN path)
  at::Tensor bias_;    // [1, out] fp32, or undefined (oneDNN path)
};

// oneDNN primitives the engine thread keeps, one per (M, shape, epilogue), at most
// max_cached_primitives() (64): the least recently used goes first.
int64_t cached_primitives();
int64_t max_cached_primitives();

}  // namespace tq
