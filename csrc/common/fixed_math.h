// exp, log, pow, sin and cos in float64, written out in plain arithmetic (no
// libm, no vector library), so that they give the same bits on every CPU and
// build: RoPE's tables (model/rotary.cpp, vision/vision_tower.cpp) feed every
// answer, and libm's and ATen's versions of these functions differ by CPU
// (glibc picks an FMA version of sin, cos and pow where the CPU has FMA; ATen
// picks its vector width by CPU). Accurate to a few units in the last place of
// a double, far below the fp32 rounding the tables get (docs/arithmetic.md).
#pragma once

namespace tq::fixed_math {

double exp(double x);
double log(double x);  // x > 0
double pow(double base, double exponent);  // base > 0
// |x| below 2^20 (a million radians: RoPE's angles are positions times frequencies of at most 1).
void sin_cos(double x, double& sin, double& cos);

}  // namespace tq::fixed_math
