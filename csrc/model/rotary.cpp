#include "model/rotary.h"

#include <cmath>
#include <vector>

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
  const bool longrope = r.scaling == RopeConfig::Scaling::LongRope;
  std::vector<at::Tensor> frequencies{inverse_frequencies(r, rotary_dim).contiguous()};
  if (longrope) frequencies.push_back(inverse_frequencies(r, rotary_dim, true).contiguous());
  const int64_t half = rotary_dim / 2;
  auto cos = at::empty({max_positions * static_cast<int64_t>(frequencies.size()), rotary_dim}, at::kFloat), sin = at::empty_like(cos);
  float *c = cos.data_ptr<float>(), *s = sin.data_ptr<float>();
  // Written in one pass, each row as it is computed (an engine's open makes tens of thousands of rows: float64 tables,
  // then scaled, rounded and both halves joined by tensor ops, took several times the sines' own time). Each value
  // as those ops gave it: the angle a float64 product, its cosine and sine fixed_math's, times longrope's attention
  // factor (1 otherwise) in float64, rounded to fp32; both halves of a row share their frequencies (rotate-half).
  for (size_t part = 0; part < frequencies.size(); ++part) {
    const double* inverse = frequencies[part].data_ptr<double>();
    for (int64_t p = 0; p < max_positions; ++p) {
      float* cos_row = c + (static_cast<int64_t>(part) * max_positions + p) * rotary_dim;
      float* sin_row = s + (cos_row - c);
      for (int64_t i = 0; i < half; ++i) {
        double sine, cosine;
        fixed_math::sin_cos(static_cast<double>(p) * inverse[i], sine, cosine);
        cos_row[i] = cos_row[i + half] = static_cast<float>(cosine * r.attention_factor);
        sin_row[i] = sin_row[i + half] = static_cast<float>(sine * r.attention_factor);
      }
    }
  }
  RotaryTables t;
  t.cos = cos.to(device);
  t.sin = sin.to(device);
  t.long_offset = longrope ? max_positions : 0;
  return t;
}

}  // namespace tq
