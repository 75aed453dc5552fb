// docs/numerics.md in GLSL: bf16 rounding, exact division and square root, and the portable
// exp/log/silu/sigmoid/rsqrt of ops/pmath.h. Every float local and float function is `precise`,
// so no product is fused into an add (tests/vulkan_numerics.cpp checks the SPIR-V for it).
//
// Vulkan guarantees correct rounding only for +, -, * and conversions; OpFDiv and sqrt may be
// off by ulps (NVIDIA's are). So division and square root are done on the bits with integer
// arithmetic, which rounds to nearest even exactly as the host's IEEE hardware does.
#ifndef SP_NUMERICS_GLSL
#define SP_NUMERICS_GLSL

const uint F32_INF = 0x7f800000u;
const uint F32_DEFAULT_NAN = 0xffc00000u;  // what x86 returns for 0/0, inf/inf, sqrt(-1)

// NaN tests on the bits: a compiler may assume no NaN in float comparisons.
bool is_nan(float x) { return (floatBitsToUint(x) & 0x7fffffffu) > F32_INF; }

// Round to nearest even, NaN kept quiet (ops/bf16.h).
uint f32_to_bf16(float f) {
  uint u = floatBitsToUint(f);
  if ((u & 0x7fffffffu) > F32_INF) return (u >> 16) | 0x40u;
  u += 0x7fffu + ((u >> 16) & 1u);
  return u >> 16;
}

precise float bf16_to_f32(uint h) { return uintBitsToFloat(h << 16); }

// r(x): x rounded to bf16, as a float.
precise float rounded(float x) { return bf16_to_f32(f32_to_bf16(x)); }

// Index of the highest set bit of a nonzero 64-bit value.
int msb64(uint64_t m) {
  const uint hi = uint(m >> 32);
  return hi != 0u ? 32 + findMSB(hi) : findMSB(uint(m));
}

// The float nearest to m * 2^e (+ a positive amount below the last bit when sticky), ties to
// even, with overflow to infinity and gradual underflow. m != 0.
float round_pack(uint sign, int e, uint64_t m, bool sticky) {
  const int top = e + msb64(m);  // m * 2^e lies in [2^top, 2^(top+1))
  if (top > 127) return uintBitsToFloat(sign | F32_INF);
  // Bits to drop: keep 24 significant bits, or fewer below 2^-126 (last bit weighs 2^-149).
  const bool normal = top >= -126;
  const int drop = normal ? msb64(m) - 23 : -149 - e;
  if (drop > 64) return uintBitsToFloat(sign);  // below half the smallest subnormal
  uint64_t sig;
  if (drop <= 0) {
    sig = m << uint(-drop);
  } else {
    sig = drop == 64 ? 0ul : m >> uint(drop);
    const uint64_t rest = drop == 64 ? m : m & ((1ul << uint(drop)) - 1ul);
    const uint64_t halfway = 1ul << uint(drop - 1);
    if (rest > halfway || (rest == halfway && (sticky || (sig & 1ul) != 0ul))) sig += 1ul;
  }
  // With the hidden bit in sig, a carry out of the significand moves the exponent up (and
  // a subnormal up to the smallest normal) by itself.
  const uint exponent = normal ? uint(top + 126) : 0u;
  return uintBitsToFloat(sign | ((exponent << 23) + uint(sig)));
}

// Finite nonzero x = m * 2^e with m in [2^23, 2^24).
void unpack_finite(uint bits, out uint m, out int e) {
  const uint biased = (bits >> 23) & 0xffu;
  m = bits & 0x7fffffu;
  e = biased == 0u ? -149 : int(biased) - 150;
  if (biased != 0u) m |= 0x800000u;
  const int shift = 23 - findMSB(m);
  m <<= uint(shift);
  e -= shift;
}

float quiet(uint bits) { return uintBitsToFloat(bits | 0x400000u); }

// a / b, correctly rounded.
float exact_div(float a, float b) {
  const uint ua = floatBitsToUint(a), ub = floatBitsToUint(b);
  const uint sign = (ua ^ ub) & 0x80000000u;
  const uint aa = ua & 0x7fffffffu, ab = ub & 0x7fffffffu;
  if (aa > F32_INF) return quiet(ua);
  if (ab > F32_INF) return quiet(ub);
  if (aa == F32_INF) return uintBitsToFloat(ab == F32_INF ? F32_DEFAULT_NAN : sign | F32_INF);
  if (ab == F32_INF) return uintBitsToFloat(sign);
  if (ab == 0u) return uintBitsToFloat(aa == 0u ? F32_DEFAULT_NAN : sign | F32_INF);
  if (aa == 0u) return uintBitsToFloat(sign);
  uint ma, mb;
  int ea, eb;
  unpack_finite(ua, ma, ea);
  unpack_finite(ub, mb, eb);
  const uint64_t n = uint64_t(ma) << 40;  // quotient in [2^39, 2^41): 40+ exact bits
  const uint64_t q = n / uint64_t(mb);
  return round_pack(sign, ea - eb - 40, q, q * uint64_t(mb) != n);
}

// sqrt(x), correctly rounded.
float exact_sqrt(float x) {
  const uint u = floatBitsToUint(x);
  if ((u & 0x7fffffffu) > F32_INF) return quiet(u);
  if ((u & 0x7fffffffu) == 0u) return x;  // ±0
  if ((u & 0x80000000u) != 0u) return uintBitsToFloat(F32_DEFAULT_NAN);
  if (u == F32_INF) return x;
  uint m;
  int e;
  unpack_finite(u, m, e);
  if ((e & 1) != 0) {  // make the exponent even
    m <<= 1;
    e -= 1;
  }
  const uint64_t n = uint64_t(m) << 38;  // in [2^61, 2^63): a root of 30+ bits
  // Integer root: a float estimate, two Newton steps, then the last unit fixed exactly.
  uint64_t s = uint64_t(sqrt(float(n)));
  s = (s + n / s) >> 1;
  s = (s + n / s) >> 1;
  [[unroll]] for (int i = 0; i < 2; ++i)
    if (s * s > n) s -= 1ul;
  [[unroll]] for (int i = 0; i < 2; ++i)
    if ((s + 1ul) * (s + 1ul) <= n) s += 1ul;
  return round_pack(0u, (e - 38) / 2, s, s * s != n);
}

// exp(x) within about 1 ulp, the same bits as pm_exp(float) (ops/pmath.h).
precise float pm_exp(float x) {
  if (is_nan(x)) return x;
  if (x > SP_EXP_OVERFLOW) return uintBitsToFloat(F32_INF);
  if (x < SP_EXP_UNDERFLOW) return 0.0;
  precise float scaled = x * SP_EXP_LOG2E;
  precise float n = floor(scaled + 0.5);
  precise float r = (x - n * SP_EXP_LN2_HI) - n * SP_EXP_LN2_LO;
  precise float p = SP_EXP_C7;
  p = p * r + SP_EXP_C6;
  p = p * r + SP_EXP_C5;
  p = p * r + SP_EXP_C4;
  p = p * r + SP_EXP_C3;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  int e = int(n);
  if (e > 127) {  // 2^128 is not a float: scale by 2 first (exact)
    p = p * 2.0;
    e = 127;
  }
  // A result that may be subnormal (p < 2): the host's two exact scalings and one rounding
  // are round(p * 2^e), done on the bits, since a driver may flush subnormal products to zero
  // (NVIDIA's does, and offers no DenormPreserve).
  if (e <= -126) {
    uint m;
    int ep;
    unpack_finite(floatBitsToUint(p), m, ep);
    return round_pack(0u, ep + e, uint64_t(m), false);
  }
  return p * uintBitsToFloat(uint(e + 127) << 23);
}

precise float pm_rsqrt(float x) { return exact_div(1.0, exact_sqrt(x)); }

precise float pm_silu(float x) {
  precise float denominator = 1.0 + pm_exp(-x);
  return exact_div(x, denominator);
}

precise float pm_sigmoid(float x) {
  precise float denominator = 1.0 + pm_exp(-x);
  return exact_div(1.0, denominator);
}

// log(x) within 3 ulp, the same bits as pm_log(float) (ops/pmath.h): x = m·2^e with m in
// [sqrt(1/2), sqrt(2)), log m = 2·atanh(s), s = (m − 1)/(m + 1), by its odd series, plus e·ln2
// in two parts. The special cases, m and e are read from the bits (unpack_finite normalises a
// subnormal exactly, as the host's scaling by 2^23 does), since a driver may flush subnormal
// operands.
precise float pm_log(float x) {
  const uint u = floatBitsToUint(x);
  if ((u & 0x7fffffffu) > F32_INF || u > 0x80000000u) return uintBitsToFloat(0x7fc00000u);  // NaN, x < 0
  if ((u & 0x7fffffffu) == 0u) return uintBitsToFloat(0xff800000u);
  if (u == F32_INF) return x;
  uint bits;
  int e;
  unpack_finite(u, bits, e);  // x = bits · 2^e, bits in [2^23, 2^24)
  e += 23;
  precise float m = uintBitsToFloat((bits & 0x7fffffu) | 0x3f800000u);
  if (m > SP_LOG_SQRT2) {
    m = m * 0.5;
    e += 1;
  }
  precise float s = exact_div(m - 1.0, m + 1.0);
  precise float s2 = s * s;
  precise float p = SP_LOG_C13;
  p = p * s2 + SP_LOG_C11;
  p = p * s2 + SP_LOG_C9;
  p = p * s2 + SP_LOG_C7;
  p = p * s2 + SP_LOG_C5;
  p = p * s2 + SP_LOG_C3;
  p = p * s2 + 1.0;
  precise float n = float(e);
  return (n * SP_EXP_LN2_LO + 2.0 * s * p) + n * SP_EXP_LN2_HI;
}

// log(1 + y) for y >= 0 (ops/pmath.h pm_log1p): log(u) · y / (u − 1), u = 1 + y rounded; y
// itself where 1 + y rounds to 1.
precise float pm_log1p(float y) {
  precise float u = 1.0 + y;
  if (u == 1.0) return y;
  precise float ratio = exact_div(y, u - 1.0);
  return pm_log(u) * ratio;
}

// Argmax partials (ops/argmax.h): among numbers the larger value wins and ties keep the
// earlier candidate; NaN, the mark of a logit that is not finite, wins over every number and
// stays. -Inf is the identity. {v, i} comes after best.
const uint ARGMAX_NONE = 0xff800000u;
void argmax_offer(inout float best_value, inout uint best_index, float v, uint i) {
  if (!is_nan(best_value) && (is_nan(v) || v > best_value)) {
    best_value = v;
    best_index = i;
  }
}

// Offers logit v of row i: as NaN when it is not finite.
void argmax_offer_logit(inout float best_value, inout uint best_index, float v, uint i) {
  const bool finite = (floatBitsToUint(v) & F32_INF) != F32_INF;
  argmax_offer(best_value, best_index, finite ? v : uintBitsToFloat(0x7fc00000u), i);
}

#endif
