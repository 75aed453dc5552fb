// bf16 stored as its 16 raw bits. Widening is exact; narrowing rounds to nearest even, as
// PyTorch does, with NaN kept quiet.
#pragma once
#include <stdint.h>
#include <string.h>

#include "tasks/host_device.h"

namespace spindle {

using bf16 = uint16_t;

SP_HDI float f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
SP_HDI uint32_t bits_from_f32(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

SP_HDI float bf16_to_f32(bf16 h) { return f32_from_bits(uint32_t(h) << 16); }

SP_HDI bf16 f32_to_bf16(float f) {
  uint32_t u = bits_from_f32(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16((u >> 16) | 0x40u);  // NaN stays NaN
#if defined(__CUDA_ARCH__)
  // The device's conversion rounds every other value to nearest even, as the integer steps
  // below do, in one instruction where they take four dependent ones.
  bf16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16(u >> 16);
#endif
}

// The value a float takes after a round trip through bf16.
SP_HDI float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

}  // namespace spindle
