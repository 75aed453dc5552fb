// ATTN_CHUNK and ATTN_MERGE (docs/numerics.md): split-position attention. A chunk tile writes
// online-softmax partials {m, l, acc[D]} (f32) for every q head of its kv head's group; the
// merge combines a q head's chunks in chunk order.
#pragma once
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <vector>

#include "ops/acc.h"
#include "ops/dot.h"
#include "ops/pmath.h"

namespace spindle {

struct PositionRange {
  uint32_t begin, end;  // empty when begin == end
};

// Chunk c of the positions [0, n) split into `chunks` chunks of ceil(n / chunks).
SP_HDI PositionRange chunk_positions(uint32_t n, uint32_t chunks, uint32_t c) {
  const uint32_t size = (n + chunks - 1) / chunks;
  const uint32_t begin = c * size < n ? c * size : n;
  const uint32_t end = begin + size < n ? begin + size : n;
  return {begin, end};
}

struct AttnChunkArgs {
  const bf16* q;            // [Hq * D]
  const bf16* k_cache;      // row kv_head * context + t, cache_row_stride apart
  const bf16* v_cache;
  size_t cache_row_stride;
  float* partials;          // row q_head * chunks + chunk: {m, l, acc[D]}
  size_t partial_row_stride;
  uint32_t n_heads, n_kv_heads, head_dim, context, chunks, position;
};

// Chunk of q head h over positions r, written to its partial row.
template <class Acc>
void attn_chunk_head(const AttnChunkArgs& a, uint32_t h, uint32_t kv_head, PositionRange r,
                     float* row) {
  const uint32_t D = a.head_dim;
  if (r.begin == r.end) {
    row[0] = -INFINITY;
    for (uint32_t d = 0; d <= D; ++d) row[1 + d] = 0.0f;
    return;
  }
  const bf16* q = a.q + size_t(h) * D;
  const bf16* K = a.k_cache + size_t(kv_head) * a.context * a.cache_row_stride;
  const bf16* V = a.v_cache + size_t(kv_head) * a.context * a.cache_row_stride;
  const Acc scale = pm_rsqrt(Acc(D));
  std::vector<Acc> s(r.end - r.begin);
  Acc m = -INFINITY;
  for (uint32_t t = r.begin; t < r.end; ++t) {
    const bf16* k = K + t * a.cache_row_stride;
    s[t - r.begin] = canonical_dot<Acc>(int(D), [q](int i) { return widen<Acc>(q[i]); },
                                        [k](int i) { return widen<Acc>(k[i]); }) * scale;
    if (s[t - r.begin] > m) m = s[t - r.begin];
  }
  // Weights are taken against m as stored (f32), so the partial is consistent in fp64 too.
  const float m_stored = float(m);
  Acc l = 0;
  std::vector<Acc> acc(D, Acc(0));
  for (uint32_t t = r.begin; t < r.end; ++t) {
    const Acc p = pm_exp(s[t - r.begin] - Acc(m_stored));
    const bf16* v = V + t * a.cache_row_stride;
    l = l + p;
    for (uint32_t d = 0; d < D; ++d) acc[d] = acc[d] + p * widen<Acc>(v[d]);
  }
  row[0] = m_stored;
  row[1] = float(l);
  for (uint32_t d = 0; d < D; ++d) row[2 + d] = float(acc[d]);
}

// Tiles [t0, t1) of kv_head * chunks + chunk, for positions 0..position.
template <class Acc>
void attn_chunk_tiles(const AttnChunkArgs& a, uint32_t t0, uint32_t t1) {
  const uint32_t group = a.n_heads / a.n_kv_heads;
  for (uint32_t t = t0; t < t1; ++t) {
    const uint32_t kv_head = t / a.chunks, c = t % a.chunks;
    const PositionRange r = chunk_positions(a.position + 1, a.chunks, c);
    for (uint32_t j = 0; j < group; ++j) {
      const uint32_t h = kv_head * group + j;
      attn_chunk_head<Acc>(a, h, kv_head, r, a.partials + (size_t(h) * a.chunks + c) * a.partial_row_stride);
    }
  }
}

// The merge of a q head's `chunks` partial rows {m, l, acc[D]} (docs/numerics.md, ATTN_MERGE),
// element by element, so every executor runs the same formula: M = attn_merge_max, the
// weight of chunk c is w(c) = attn_merge_weight(row c, M), and out_d = attn_merge_element.
SP_HDI bool attn_chunk_empty(const float* row) { return row[1] == 0.0f; }

template <class Acc>
SP_HDI Acc attn_merge_max(const float* rows, size_t row_stride, uint32_t chunks) {
  Acc M = -INFINITY;
  for (uint32_t c = 0; c < chunks; ++c)
    if (Acc(rows[c * row_stride]) > M) M = Acc(rows[c * row_stride]);
  return M;
}

template <class Acc>
SP_HDI Acc attn_merge_weight(const float* row, Acc M) {
  return pm_exp(Acc(row[0]) - M);
}

// r(o_d / L), L = Σ_c l_c·w(c), o_d = Σ_c acc_{c,d}·w(c) over the non-empty chunks in chunk
// order; w(c) returns chunk c's weight (computed by attn_merge_weight, or read back from
// where it was stored).
template <class Acc, class W>
SP_HDI bf16 attn_merge_element(const float* rows, size_t row_stride, uint32_t chunks, W w, uint32_t d) {
  Acc L = 0, o = 0;
  for (uint32_t c = 0; c < chunks; ++c) {
    const float* row = rows + c * row_stride;
    if (attn_chunk_empty(row)) continue;
    const Acc wc = w(c);
    L = L + Acc(row[1]) * wc;
    o = o + Acc(row[2 + d]) * wc;
  }
  return to_bf16(o / L);
}

// out[D] = r(o / L) from a q head's `chunks` partial rows, merged in chunk order.
template <class Acc>
void attn_merge_head(const float* rows, size_t row_stride, uint32_t chunks, uint32_t D, bf16* out) {
  const Acc M = attn_merge_max<Acc>(rows, row_stride, chunks);
  std::vector<Acc> w(chunks);
  for (uint32_t c = 0; c < chunks; ++c)
    if (!attn_chunk_empty(rows + c * row_stride)) w[c] = attn_merge_weight<Acc>(rows + c * row_stride, M);
  for (uint32_t d = 0; d < D; ++d)
    out[d] = attn_merge_element<Acc>(rows, row_stride, chunks, [&](uint32_t c) { return w[c]; }, d);
}

// q heads [h0, h1): partial rows h * chunks + c, outputs at h * D.
template <class Acc>
void attn_merge_heads(const float* partials, size_t row_stride, uint32_t chunks, uint32_t D,
                      bf16* out, uint32_t h0, uint32_t h1) {
  for (uint32_t h = h0; h < h1; ++h)
    attn_merge_head<Acc>(partials + size_t(h) * chunks * row_stride, row_stride, chunks, D,
                         out + size_t(h) * D);
}

}  // namespace spindle
