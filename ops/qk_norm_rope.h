// QK_NORM_ROPE (docs/numerics.md): per head, RMSNorm over head_dim and the rotate-half RoPE
// of the first R dims at the step's position; k heads land in the K cache, v heads are copied
// to the V cache unchanged. Also the host-side fill of the RoPE table.
#pragma once
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/acc.h"
#include "ops/norm.h"

namespace spindle {

struct QkNormRopeArgs {
  const bf16* qkv;        // [(Hq + 2 Hkv) * D]: q heads, then k heads, then v heads
  const bf16* q_norm;     // [D]
  const bf16* k_norm;     // [D]
  bf16* q_out;            // [Hq * D]
  bf16* k_cache;          // row kv_head * context + position, cache_row_stride apart
  bf16* v_cache;
  size_t cache_row_stride;
  const bf16* rope_row;   // the RoPE table's row for `position`: [cos 0..R/2-1 | sin 0..R/2-1]
  uint32_t n_heads, n_kv_heads, head_dim, rotary_dim, context, position;
  uint32_t norm_kind;
  float eps;
};

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

// Heads [h0, h1) of the Hq + 2 Hkv heads.
template <class Acc>
void qk_norm_rope_heads(const QkNormRopeArgs& a, uint32_t h0, uint32_t h1) {
  const uint32_t D = a.head_dim, Hq = a.n_heads, Hkv = a.n_kv_heads;
  auto cache_row = [&](bf16* cache, uint32_t kv_head) {
    return cache + (size_t(kv_head) * a.context + a.position) * a.cache_row_stride;
  };
  for (uint32_t h = h0; h < h1; ++h) {
    const bf16* x = a.qkv + size_t(h) * D;
    if (h < Hq) {
      norm_rope_head<Acc>(x, D, a.rotary_dim, {a.q_norm, a.norm_kind, a.eps}, a.rope_row,
                          a.q_out + size_t(h) * D);
    } else if (h < Hq + Hkv) {
      norm_rope_head<Acc>(x, D, a.rotary_dim, {a.k_norm, a.norm_kind, a.eps}, a.rope_row,
                          cache_row(a.k_cache, h - Hq));
    } else {
      bf16* v = cache_row(a.v_cache, h - Hq - Hkv);
      for (uint32_t d = 0; d < D; ++d) v[d] = x[d];
    }
  }
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
