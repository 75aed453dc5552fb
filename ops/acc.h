// The accumulator side of bf16: r(·) of docs/numerics.md for Acc = float or double, and stores
// of a bf16-rounded value into a bf16, f32 or f64 element.
#pragma once
#include <stdint.h>

#include "ops/bf16.h"
#include "tasks/host_device.h"

namespace spindle {

SP_HDI bf16 to_bf16(float x) { return f32_to_bf16(x); }

// One rounding from double to bf16 (not two): round to odd into f32, whose 16 spare bits then
// keep the nearest-even decision of f32_to_bf16 exact.
SP_HDI bf16 to_bf16(double x) {
  const float f = float(x);
  uint32_t u = bits_from_f32(f);
  if (double(f) != x && f == f) {
    if ((double(f) > x) == (x > 0)) u -= 1;  // f was rounded away from zero: step back
    u |= 1u;
  }
  return f32_to_bf16(f32_from_bits(u));
}

template <class Acc>
SP_HDI Acc widen(bf16 h) { return Acc(bf16_to_f32(h)); }

// r(x): x rounded to bf16, as an Acc.
template <class Acc>
SP_HDI Acc rounded(Acc x) { return widen<Acc>(to_bf16(x)); }

SP_HDI void store_bf16(bf16& dst, bf16 v) { dst = v; }
SP_HDI void store_bf16(float& dst, bf16 v) { dst = bf16_to_f32(v); }
SP_HDI void store_bf16(double& dst, bf16 v) { dst = double(bf16_to_f32(v)); }

}  // namespace spindle
