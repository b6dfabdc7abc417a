// Every product and sum rounded on its own, in the order written (see fixed_math.h).
#pragma GCC optimize("fp-contract=off")
#include "common/fixed_math.h"

#include <cmath>
#include <cstdint>
#include <stdexcept>

namespace tq::fixed_math {
namespace {

// ln 2 and pi / 2 split into parts of at most 33 significant bits, the last holding the rest: k * part is
// exact for |k| < 2^20, so a reduction's first subtractions lose nothing.
constexpr double kLn2[] = {0x1.62e42fee00000p-1, 0x1.a39ef35793c76p-33};
constexpr double kHalfPi[] = {0x1.921fb54400000p+0, 0x1.0b4611a600000p-34, 0x1.3198a2e037073p-69};
constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;
constexpr double kLn2Value = 0x1.62e42fefa39efp-1;

// Sum of c[i] x^i, i = 0 .. n-1, by Horner's rule from the highest.
double polynomial(const double* c, int n, double x) {
  double p = c[n - 1];
  for (int i = n - 2; i >= 0; --i) p = p * x + c[i];
  return p;
}

// 1 / i!, i = 0 .. 23.
struct InverseFactorials {
  double v[24];
  InverseFactorials() {
    double f = 1;
    for (int i = 0; i < 24; ++i) {
      if (i > 0) f = f * i;  // exact up to 22!, and within an ulp after
      v[i] = 1.0 / f;
    }
  }
};
const InverseFactorials& inverse_factorials() {
  static const InverseFactorials table;
  return table;
}

}  // namespace

double exp(double x) {
  if (x > 709) return INFINITY;
  if (x < -745) return 0;
  // x = k ln2 + r, |r| <= ln2 / 2: e^r by its Taylor series to r^17 (the next term is below 2^-60 of it).
  const double k = std::nearbyint(x / kLn2Value);
  const double r = (x - k * kLn2[0]) - k * kLn2[1];
  return std::ldexp(polynomial(inverse_factorials().v, 18, r), static_cast<int>(k));
}

double log(double x) {
  if (!(x > 0)) throw std::invalid_argument("fixed_math::log of a value that is not positive");
  // x = m 2^e with m in [sqrt(1/2), sqrt(2)); ln m = 2 atanh(z), z = (m - 1) / (m + 1), |z| <= 0.172:
  // 2 (z + z^3 / 3 + ... + z^31 / 31), the next term below 2^-80.
  int e;
  double m = std::frexp(x, &e);
  if (m < 0.70710678118654752) {
    m = m * 2;
    e = e - 1;
  }
  const double z = (m - 1) / (m + 1), z2 = z * z;
  double odd[16];
  for (int i = 0; i < 16; ++i) odd[i] = 1.0 / (2 * i + 1);
  const double ln_m = 2 * (z * polynomial(odd, 16, z2));
  return e * kLn2[0] + (e * kLn2[1] + ln_m);
}

double pow(double base, double exponent) { return fixed_math::exp(exponent * fixed_math::log(base)); }

void sin_cos(double x, double& sin, double& cos) {
  if (!(std::fabs(x) < 0x1p20)) throw std::invalid_argument("fixed_math::sin_cos of an angle of 2^20 radians or more");
  // x = n pi/2 + r, |r| <= pi/4; then the Taylor series of sin r (to r^23) and cos r (to r^22), and the
  // quadrant n mod 4 picks which, with which sign.
  const double n = std::nearbyint(x * kTwoOverPi);
  const double r = ((x - n * kHalfPi[0]) - n * kHalfPi[1]) - n * kHalfPi[2], r2 = r * r;
  const auto& f = inverse_factorials().v;
  double sin_terms[12], cos_terms[12];
  for (int i = 0; i < 12; ++i) {
    sin_terms[i] = (i % 2 ? -1 : 1) * f[2 * i + 1];
    cos_terms[i] = (i % 2 ? -1 : 1) * f[2 * i];
  }
  const double s = r * polynomial(sin_terms, 12, r2), c = polynomial(cos_terms, 12, r2);
  switch (static_cast<int64_t>(n) & 3) {
    case 0: sin = s, cos = c; break;
    case 1: sin = c, cos = -s; break;
    case 2: sin = -s, cos = -c; break;
    default: sin = -c, cos = s; break;
  }
}

}  // namespace tq::fixed_math
