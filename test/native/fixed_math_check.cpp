// common/fixed_math.h against libm's long double functions (x87, 64-bit significands: an independent
// reference more precise than either double), over the values RoPE tables take: inverse frequencies
// theta^(-i/d) for the thetas and dimensions of real checkpoints, and angles position * frequency up to
// position 2^17. Prints the worst error in units of the last place of a double, and how many fp32 table
// entries (the double result rounded to fp32) differ from the reference rounded to fp32.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <algorithm>

#include "common/fixed_math.h"

using namespace tq;

namespace {

double ulps(double got, long double want) {
  const long double ulp = std::ldexp(1.0L, std::ilogb(static_cast<double>(want)) - 52);
  return static_cast<double>(std::fabs(static_cast<long double>(got) - want) / ulp);
}

}  // namespace

int main() {
  double worst_pow = 0, worst_sin = 0, worst_cos = 0, worst_exp = 0, worst_log = 0;
  int64_t values = 0, fp32_differing = 0;
  for (double theta : {10000.0, 500000.0, 1000000.0, 5000000.0})
    for (int64_t dim : {32, 64, 96, 128, 256})
      for (int64_t i = 0; i < dim; i += 2) {
        const double e = static_cast<double>(i) / static_cast<double>(dim);
        const double inv = 1.0 / fixed_math::pow(theta, e);
        worst_pow = std::max(worst_pow, ulps(fixed_math::pow(theta, e), std::pow(static_cast<long double>(theta), static_cast<long double>(e))));
        for (int64_t p = 1; p < (int64_t{1} << 17); p = p * 3 / 2 + 1) {
          const double angle = static_cast<double>(p) * inv;
          double s, c;
          fixed_math::sin_cos(angle, s, c);
          const long double ls = std::sin(static_cast<long double>(angle)), lc = std::cos(static_cast<long double>(angle));
          // Near a zero the relative error of a result says nothing of its absolute error: measured against the scale 1.
          worst_sin = std::max(worst_sin, std::fabs(static_cast<double>(ls)) > 0x1p-10 ? ulps(s, ls) : 0);
          worst_cos = std::max(worst_cos, std::fabs(static_cast<double>(lc)) > 0x1p-10 ? ulps(c, lc) : 0);
          fp32_differing += (static_cast<float>(s) != static_cast<float>(ls)) + (static_cast<float>(c) != static_cast<float>(lc));
          values += 2;
        }
      }
  for (double x = -700; x < 700; x += 0.37) worst_exp = std::max(worst_exp, ulps(fixed_math::exp(x), std::exp(static_cast<long double>(x))));
  for (double x = 1e-300; x < 1e300; x *= 1.7)
    if (std::fabs(std::log(x)) > 1e-3) worst_log = std::max(worst_log, ulps(fixed_math::log(x), std::log(static_cast<long double>(x))));
  std::printf("{\"worstPowUlps\": %.3f, \"worstSinUlps\": %.3f, \"worstCosUlps\": %.3f, \"worstExpUlps\": %.3f, \"worstLogUlps\": %.3f, "
              "\"tableValues\": %ld, \"fp32Differing\": %ld}\n",
              worst_pow, worst_sin, worst_cos, worst_exp, worst_log, static_cast<long>(values), static_cast<long>(fp32_differing));
}
