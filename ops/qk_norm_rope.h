// The q and k heads' RMSNorm over head_dim and rotate-half RoPE of the first R dims at the
// step's position (docs/numerics.md, ATTENTION), and the host-side fill of the RoPE table.
#pragma once
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/acc.h"
#include "ops/norm.h"

namespace spindle {

// Rotates the pair (a, b) = (y_i, y_{i+R/2}) by the angle with bf16 cosine c and sine s.
template <class Acc>
SP_HDI void rope_pair(Acc a, Acc b, Acc c, Acc s, bf16& lo, bf16& hi) {
  lo = to_bf16(rounded(a * c) + rounded(-b * s));
  hi = to_bf16(rounded(b * c) + rounded(a * s));
}

// out[D] = RoPE(RMSNorm(x)); dims >= R keep their normalised value.
template <class Acc>
void norm_rope_head(const bf16* x, uint32_t D, uint32_t R, const NormSpec& norm,
                    const bf16* rope_row, bf16* out) {
  rms_norm<Acc>(x, D, norm, out);
  const uint32_t half = R / 2;
  for (uint32_t i = 0; i < half; ++i)
    rope_pair(widen<Acc>(out[i]), widen<Acc>(out[i + half]), widen<Acc>(rope_row[i]),
              widen<Acc>(rope_row[half + i]), out[i], out[i + half]);
}

// The table of `context` rows [cos φ_0..cos φ_{R/2-1} | sin φ_0..sin φ_{R/2-1}], computed in
// fp32 as HF does: inv_freq_i = 1 / θ^(2i/R), φ_i = p · inv_freq_i, then rounded to bf16.
inline void fill_rope_table(float theta, uint32_t rotary_dim, uint32_t context, bf16* table) {
  const uint32_t half = rotary_dim / 2;
  for (uint32_t i = 0; i < half; ++i) {
    const float inv_freq = 1.0f / powf(theta, float(2 * i) / float(rotary_dim));
    for (uint32_t p = 0; p < context; ++p) {
      const float angle = float(p) * inv_freq;
      bf16* row = table + size_t(p) * rotary_dim;
      row[i] = to_bf16(cosf(angle));
      row[half + i] = to_bf16(sinf(angle));
    }
  }
}

}  // namespace spindle
