// Portable math: results are identical bit for bit on every executor because they use only
// IEEE-rounded +, -, *, / and sqrt (no library exp, no fused multiply-add: host code builds
// with -ffp-contract=off and CUDA with --fmad=false). The double overloads serve the fp64
// "truth" mode and use the C library.
#pragma once
#include <math.h>

#include <bit>

#include "ops/bf16.h"
#include "ops/hd.h"

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

template <class T>
SP_HDI T pm_sigmoid(T x) { return T(1) / (T(1) + pm_exp(-x)); }

template <class T>
SP_HDI T pm_silu(T x) { return x / (T(1) + pm_exp(-x)); }

}  // namespace spindle
