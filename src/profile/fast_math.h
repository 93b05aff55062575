// ln and exp for the profiler without libm (libstrata.so is to link none of
// the C++ or math runtimes): accurate to about 1e-10 relative, which is far below
// the sampling noise, and cheap enough for once per sample.
#pragma once

#include <cstdint>
#include <cstring>

namespace strata::detail {

// Natural logarithm of x > 0 (normal doubles).
inline double fast_ln(double x) noexcept {
  std::uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  int exponent = static_cast<int>((bits >> 52) & 0x7ff) - 1023;
  bits = (bits & ((std::uint64_t{1} << 52) - 1)) | (std::uint64_t{1023} << 52);  // mantissa in [1, 2)
  double m;
  std::memcpy(&m, &bits, sizeof m);
  if (m > 1.4142135623730951) {  // keep m in [sqrt(1/2), sqrt(2)): the series converges fast
    m *= 0.5;
    ++exponent;
  }
  // ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172
  double s = (m - 1.0) / (m + 1.0);
  double s2 = s * s;
  double series =
      s * (2.0 + s2 * (2.0 / 3 + s2 * (2.0 / 5 + s2 * (2.0 / 7 + s2 * (2.0 / 9 + s2 * (2.0 / 11 + s2 * (2.0 / 13)))))));
  return exponent * 0.6931471805599453 + series;
}

// e^x for x <= 0 (underflows to 0 below -700).
inline double fast_exp_nonpositive(double x) noexcept {
  if (x < -700.0) return 0.0;
  // e^x = 2^k * e^r, k = round(x / ln 2), |r| <= ln2 / 2
  double kd = x * 1.4426950408889634;
  auto k = static_cast<std::int64_t>(kd - 0.5);  // x <= 0: rounds to nearest
  double r = x - static_cast<double>(k) * 0.6931471805599453;
  // Taylor series to r^10: error < 1e-10 for |r| <= 0.35
  double p = 1.0;
  for (int n = 10; n >= 1; --n) p = 1.0 + p * r / n;
  std::uint64_t bits = static_cast<std::uint64_t>(k + 1023) << 52;
  double scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// 1 / (1 - e^(-size/interval)): how many allocations of `size` bytes one
// sample stands for when samples are taken every `interval` bytes on average.
inline double unsampling_factor(double size, double interval) noexcept {
  if (size <= 0.0 || interval <= 0.0) return 1.0;
  double x = size / interval;
  // 1 - e^-x loses precision for tiny x: use the series there.
  double p = x < 1e-5 ? x * (1.0 - x * 0.5) : 1.0 - fast_exp_nonpositive(-x);
  return 1.0 / p;
}

}  // namespace strata::detail
