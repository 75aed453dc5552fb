// Argmax partials: the LM-head GEMV tiles each write the best {value, index} of their rows,
// and the sampler reduces the slots in order. The larger value wins, ties keep the earlier
// candidate, and NaN never wins (a NaN best is replaced by any number).
#pragma once
#include <stdint.h>

#include "ops/bf16.h"
#include "ops/hd.h"

namespace spindle {

struct ArgmaxPartial {
  float value;
  uint32_t index;
};
static_assert(sizeof(ArgmaxPartial) == 8, "an argmax partial is two 32-bit words");

// No candidate yet: a NaN value, which any number replaces.
SP_HDI ArgmaxPartial argmax_none(uint32_t index) { return {f32_from_bits(0x7fc00000u), index}; }

// Offers candidate {v, i}, which comes after every candidate already in best.
SP_HDI void argmax_offer(ArgmaxPartial& best, float v, uint32_t i) {
  if (v > best.value || (best.value != best.value && v == v)) best = {v, i};
}

// The index of the best of `count` partials (count >= 1), in slot order.
SP_HDI uint32_t argmax_of_partials(const ArgmaxPartial* p, uint32_t count) {
  ArgmaxPartial best = p[0];
  for (uint32_t s = 1; s < count; ++s) argmax_offer(best, p[s].value, p[s].index);
  return best.index;
}

}  // namespace spindle
