#include "model/rotary.h"

#include <cmath>

#include "common/fixed_math.h"

namespace tq {

at::Tensor inverse_powers(double theta, int64_t dim) {
  auto out = at::empty({dim / 2}, at::kDouble);
  double* p = out.data_ptr<double>();
  for (int64_t i = 0; i < dim / 2; ++i) p[i] = 1.0 / fixed_math::pow(theta, static_cast<double>(2 * i) / static_cast<double>(dim));
  return out;
}

std::pair<at::Tensor, at::Tensor> cos_sin(const at::Tensor& angles) {
  const auto a = angles.to(at::kDouble).contiguous();
  auto cos = at::empty_like(a), sin = at::empty_like(a);
  const double* x = a.data_ptr<double>();
  double *c = cos.data_ptr<double>(), *s = sin.data_ptr<double>();
  for (int64_t i = 0; i < a.numel(); ++i) fixed_math::sin_cos(x[i], s[i], c[i]);
  return {cos, sin};
}

at::Tensor inverse_frequencies(const RopeConfig& r, int64_t rotary_dim, bool long_factors) {
  auto inv = inverse_powers(r.theta, rotary_dim);
  switch (r.scaling) {
    case RopeConfig::Scaling::None:
      return inv;
    case RopeConfig::Scaling::Linear:
      return inv / r.factor;
    case RopeConfig::Scaling::LongRope: {
      const auto& f = long_factors ? r.long_factor : r.short_factor;
      return inv / at::tensor(f, at::kDouble);
    }
    case RopeConfig::Scaling::Llama3: {
      // Llama 3's wavelength-dependent scaling: long wavelengths divided by factor, short ones
      // kept, the band between interpolated.
      const double old_len = static_cast<double>(r.original_max_position_embeddings);
      const double low_wavelen = old_len / r.low_freq_factor, high_wavelen = old_len / r.high_freq_factor;
      auto wavelen = 2.0 * M_PI / inv;
      auto scaled = at::where(wavelen > low_wavelen, inv / r.factor, inv);
      auto smooth = (old_len / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
      auto smoothed = (1.0 - smooth) * scaled / r.factor + smooth * scaled;
      auto medium = (wavelen >= high_wavelen).logical_and(wavelen <= low_wavelen);
      return at::where(medium, smoothed, scaled);
    }
  }
  return inv;
}

RotaryTables rotary_tables(const RopeConfig& r, int64_t rotary_dim, int64_t max_positions, at::Device device) {
  const auto positions = at::arange(max_positions, at::kDouble);
  auto angles = at::outer(positions, inverse_frequencies(r, rotary_dim));
  const bool longrope = r.scaling == RopeConfig::Scaling::LongRope;
  if (longrope) angles = at::cat({angles, at::outer(positions, inverse_frequencies(r, rotary_dim, true))});
  RotaryTables t;
  // longrope scales cos and sin by its attention factor (1 otherwise). Both halves of a row share their
  // frequencies (the rotate-half layout): each value is computed once, then the half repeated.
  const auto [cos, sin] = cos_sin(angles);
  const auto both_halves = [&](const at::Tensor& half) {
    const auto scaled = (half * r.attention_factor).to(at::kFloat);
    return at::cat({scaled, scaled}, -1).to(device);
  };
  t.cos = both_halves(cos);
  t.sin = both_halves(sin);
  t.long_offset = longrope ? max_positions : 0;
  return t;
}

}  // namespace tq
