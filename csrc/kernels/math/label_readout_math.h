// The readout's arithmetic, defined once for both its implementations: the
// CPU readout (engine/readout.cpp), which is the tested definition, and the
// CUDA kernel (kernels/cuda/label_readout.cu), which runs these same functions
// on the device. Every operation is an IEEE fp32 multiply or add rounded on
// its own (no fused multiply-add), in a fixed order, so a label's logit is the
// same bits on both and never depends on the batch its question is in.
//
// The dot product of a label's lm_head row with the hidden state is split over
// 32 lanes (a CUDA warp): lane l sums row[i] * hidden[i] for i = l, l + 32, ...
// in increasing i; the 32 partial sums are then combined by a fixed tree (at
// offsets 16, 8, 4, 2, 1, lane l adds lane l + offset), the order of a warp's
// shuffle reduction. Log-probabilities: logits / T, the maximum, then the sum
// of exponentials in label order.
#pragma once
#include "kernels/math/host_device_math.h"

namespace tq::readout {

using exact::add;
using exact::mul;
using exact::widen;

constexpr int kLanes = 32;
// Labels per question at most (the format allows 255); the kernel keeps a question's logits in shared memory.
constexpr int kMaxLabels = 256;

// Lane `lane`'s share of row . hidden over n elements.
template <typename W>
TQ_HOST_DEVICE inline float lane_partial(const W* row, const float* hidden, int64_t n, int lane) {
  float acc = 0.0f;
  for (int64_t i = lane; i < n; i += kLanes) acc = add(acc, mul(widen(row[i]), hidden[i]));
  return acc;
}

// The CPU twin of the warp's reduction: partial[0] ends up holding the dot product.
TQ_HOST_DEVICE inline float combine_lanes(float* partial) {
  for (int offset = kLanes / 2; offset > 0; offset /= 2)
    for (int l = 0; l < offset; ++l) partial[l] = add(partial[l], partial[l + offset]);
  return partial[0];
}

// Gemma's final logit soft-capping: cap * tanh(logit / cap), or the logit as it is (cap 0).
TQ_HOST_DEVICE inline float soft_cap(float logit, float cap) { return cap > 0.0f ? cap * tanhf(logit / cap) : logit; }

// out[i] = logits[i] / T - log(sum_j exp(logits[j] / T)), for n labels.
TQ_HOST_DEVICE inline void log_probs(const float* logits, int n, float temperature, float* out) {
  float top = -INFINITY;
  for (int i = 0; i < n; ++i) top = fmaxf(top, logits[i] / temperature);
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum = add(sum, expf(add(logits[i] / temperature, -top)));
  const float lse = add(top, logf(sum));
  for (int i = 0; i < n; ++i) out[i] = add(logits[i] / temperature, -lse);
}

}  // namespace tq::readout

