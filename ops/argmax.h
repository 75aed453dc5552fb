// Argmax partials: the LM-head GEMV tiles each write the best {value, index} of their rows,
// and the sampler reduces the slots in order. Among numbers the larger value wins and ties
// keep the earlier candidate. A logit that is not finite (NaN, ±Inf) is offered as NaN, which
// wins over every number and stays, the earliest such logit's index with it: a NaN best tells
// the sampler that the step's logits are not all finite, which the decode loop reports as an
// error (ops/sample.h note_logits).
#pragma once
#include <stdint.h>

#include "ops/bf16.h"
#include "tasks/host_device.h"

namespace spindle {

struct ArgmaxPartial {
  float value;
  uint32_t index;
};
static_assert(sizeof(ArgmaxPartial) == 8, "an argmax partial is two 32-bit words");

// No candidate yet: -Inf, which every offered value replaces (a logit of -Inf is offered as NaN).
SP_HDI ArgmaxPartial argmax_none(uint32_t index) { return {f32_from_bits(0xff800000u), index}; }

// True when a best holds the mark of a logit that is not finite.
SP_HDI bool argmax_marks_nonfinite(const ArgmaxPartial& best) { return best.value != best.value; }

// Offers candidate {v, i} (a logit already offered, or a partial), which comes after every
// candidate already in best.
SP_HDI void argmax_offer(ArgmaxPartial& best, float v, uint32_t i) {
  if (!argmax_marks_nonfinite(best) && (v != v || v > best.value)) best = {v, i};
}

// Offers logit v of row i: as NaN when it is not finite (all exponent bits set).
SP_HDI void argmax_offer_logit(ArgmaxPartial& best, float v, uint32_t i) {
  const bool finite = (bits_from_f32(v) & 0x7f800000u) != 0x7f800000u;
  argmax_offer(best, finite ? v : f32_from_bits(0x7fc00000u), i);
}

// The best of `count` partials (count >= 1), in slot order.
SP_HDI ArgmaxPartial argmax_of_partials(const ArgmaxPartial* p, uint32_t count) {
  ArgmaxPartial best = p[0];
  for (uint32_t s = 1; s < count; ++s) argmax_offer(best, p[s].value, p[s].index);
  return best;
}

}  // namespace spindle
