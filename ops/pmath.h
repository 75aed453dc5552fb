// Portable math: results are identical bit for bit on every executor because they use only
// IEEE-rounded +, -, *, / and sqrt (no library exp, no fused multiply-add: host code builds
// with -ffp-contract=off and CUDA with --fmad=false). The double overloads serve the fp64
// "truth" mode and use the C library.
#pragma once
#include <math.h>

#include <bit>

#include "ops/bf16.h"
#include "tasks/host_device.h"

namespace spindle {

// exp(x) within about 1 ulp: x = n*ln2 + r with a two-part ln2 (Cody-Waite), a degree-7
// Taylor polynomial on |r| <= ln2/2, then an exact scale by 2^n.
SP_HDI float pm_exp(float x) {
  if (x != x) return x;
  if (x > 88.72283f) return f32_from_bits(0x7f800000u);
  if (x < -103.97208f) return 0.0f;
  const float n = floorf(x * 1.44269504f + 0.5f);
  const float r = (x - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int e = int(n);
  if (e > 127) {  // 2^128 is not a float: scale by 2 first (exact)
    p = p * 2.0f;
    e = 127;
  }
  if (e < -126) {  // subnormal result: scale in two exact steps
    p = p * f32_from_bits(uint32_t(e + 126 + 127) << 23);
    e = -126;
  }
  return p * f32_from_bits(uint32_t(e + 127) << 23);
}
SP_HDI double pm_exp(double x) { return exp(x); }

SP_HDI float pm_sqrt(float x) { return sqrtf(x); }
SP_HDI double pm_sqrt(double x) { return sqrt(x); }

template <class T>
SP_HDI T pm_rsqrt(T x) { return T(1) / pm_sqrt(x); }

// 1/K, exactly, for K a power of two (2^-31 at the least, a normal float).
SP_HDI float inverse_power_of_two(uint32_t K) {
#if defined(__CUDA_ARCH__)
  const uint32_t n = __ffs(K) - 1;
#else
  const uint32_t n = std::countr_zero(K);
#endif
  return f32_from_bits((127u - n) << 23);
}

// log(x) within 3 ulp (tests/ops_gdn.cpp): x = m·2^e with m in [sqrt(1/2), sqrt(2)), log m = 2·atanh(s),
// s = (m − 1)/(m + 1), by its odd series to s^13 (|s| <= 0.172), plus e·ln2 in two parts.
SP_HDI float pm_log(float x) {
  if (x != x || x < 0.0f) return f32_from_bits(0x7fc00000u);
  if (x == 0.0f) return f32_from_bits(0xff800000u);
  if (x > 3.40282347e38f) return x;
  int e = 0;
  if (x < 1.17549435e-38f) {  // subnormal: scale into the normal range (exact)
    x = x * 8388608.0f;
    e = -23;
  }
  const uint32_t u = bits_from_f32(x);
  e += int(u >> 23) - 127;
  float m = f32_from_bits((u & 0x007fffffu) | 0x3f800000u);
  if (m > 1.41421356f) {
    m = m * 0.5f;
    e += 1;
  }
  const float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
  float p = 1.0f / 13.0f;
  p = p * s2 + 1.0f / 11.0f;
  p = p * s2 + 1.0f / 9.0f;
  p = p * s2 + 1.0f / 7.0f;
  p = p * s2 + 1.0f / 5.0f;
  p = p * s2 + 1.0f / 3.0f;
  p = p * s2 + 1.0f;
  const float n = float(e);
  return (n * 1.428606765330187e-06f + 2.0f * s * p) + n * 0.693145751953125f;
}
SP_HDI double pm_log(double x) { return log(x); }

// log(1 + y) for y >= 0 as log(u) · y / (u − 1), u = 1 + y rounded, which cancels the error
// of that rounding (Goldberg); y itself where 1 + y rounds to 1.
SP_HDI float pm_log1p(float y) {
  const float u = 1.0f + y;
  return u == 1.0f ? y : pm_log(u) * (y / (u - 1.0f));
}
SP_HDI double pm_log1p(double y) { return log1p(y); }

template <class T>
SP_HDI T pm_sigmoid(T x) { return T(1) / (T(1) + pm_exp(-x)); }

template <class T>
SP_HDI T pm_silu(T x) { return x / (T(1) + pm_exp(-x)); }

}  // namespace spindle
