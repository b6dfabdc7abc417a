// The few-row GEMM of our own (kernels/cuda/few_rows_mma.h) on the GPU, each tiling as the engine's form runs it where
// asked for (GemmForm's Own forms, kernels/aten/few_rows_gemm.h; the engine option ownGemm): whether it gives a row the
// bits cuBLAS gives the same row inside a cold state's 1,024-row at::linear, and how fast it is beside at::linear on the
// same rows. `tq_cli gemm-rows`; the window's profile step runs it in a process of its own, so that a fault costs the
// probe and not the engine (docs/gpu.md, "The GEMM on few rows").
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace tq {

struct OwnGemmTiling {
  std::string form;             // gemm_form_name: own_32x16, ...
  bool same_bits = false;       // its rows as the cold state's GEMM gives them
  double max_abs_diff = 0;      // against the cold rows: a rounding's, or a wrong product's
  double us = 0;
};

struct OwnGemmTrial {
  int64_t rows = 0, out = 0, in = 0;
  bool linear_same_bits = false;  // at::linear's on the same rows (split-K off: the engine's batch-invariant cuBLAS)
  double linear_us = 0;
  std::vector<OwnGemmTiling> own;  // each tiling that takes the shape
};

// bf16 x [rows, in] and w [out, in], random, on `device`: a CUDA device of a CUDA build, else EngineError. timed: false
// launches each GEMM once and times none (µs 0), for a profiler that should see each once.
OwnGemmTrial probe_own_gemm(int64_t rows, int64_t out, int64_t in, at::Device device, bool timed = true);

}  // namespace tq
