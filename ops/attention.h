// ATTENTION (docs/numerics.md): split-position attention. A (kv head, q-head split, non-empty
// chunk) tile normalises and rotates its q heads (a kv head's group, or with q-head splits an
// equal part of it), takes the step's own k̂ and v from the q/k/v rows when its chunk holds the
// step's position (the first split's tile also appends them to the caches), and writes
// online-softmax partials {m, l, acc[D]} (f32) for each of its q heads; the split's last tile
// to finish (or its only one) merges a q head's chunks in chunk order. Every q head's math is
// its own, so the splits do not change the bits.
#pragma once
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <algorithm>
#include <vector>

#include "ops/acc.h"
#include "ops/arrivals.h"
#include "ops/dot.h"
#include "ops/pmath.h"
#include "ops/qk_norm_rope.h"
#include "tasks/graph_params.h"

namespace spindle {

// The q heads one attention tile holds: a kv head's group, split attn_q_splits ways.
SP_HDI uint32_t attn_tile_heads(const SpGraphParams& p) { return p.n_heads / p.n_kv_heads / p.attn_q_splits; }

// Whether unit u's tile whose chunk holds the position appends k̂ and v to the caches: the first
// split of each device's share of its kv head's splits (one device: split 0), so that every
// device holding the head has its rows.
SP_HDI bool attn_unit_appends(uint32_t unit, uint32_t q_splits, uint32_t kv_share) {
  return unit % (q_splits / (kv_share > 1 ? kv_share : 1u)) == 0;
}

struct PositionRange {
  uint32_t begin, end;  // empty when begin == end
};

// The positions of each chunk of [0, n) split into `chunks` (the last non-empty one may hold
// fewer): ceil(n / chunks).
SP_HDI uint32_t chunk_size(uint32_t n, uint32_t chunks) { return (n + chunks - 1) / chunks; }

// Chunk c of the positions [0, n), chunk_size(n, chunks) each.
SP_HDI PositionRange chunk_positions(uint32_t n, uint32_t chunks, uint32_t c) {
  const uint32_t size = chunk_size(n, chunks);
  const uint32_t begin = c * size < n ? c * size : n;
  const uint32_t end = begin + size < n ? begin + size : n;
  return {begin, end};
}

// How many of those chunks are non-empty: the first ones, ceil(n / chunk_size(n, chunks)).
SP_HDI uint32_t nonempty_chunks(uint32_t n, uint32_t chunks) {
  const uint32_t size = chunk_size(n, chunks);
  return (n + size - 1) / size;
}

// One kv head's K and V rows over a chunk: row t at t * stride, except the step's own position
// `own` (past the chunk when it is not there), whose rows are k_own and v_own.
struct KvRows {
  const bf16 *K, *V;
  size_t stride;
  uint32_t own;
  const bf16 *k_own, *v_own;
  const bf16* k(uint32_t t) const { return t == own ? k_own : K + t * stride; }
  const bf16* v(uint32_t t) const { return t == own ? v_own : V + t * stride; }
};

// The partial {m, l, acc[D]} of the q head q̂ (D values at q) over the non-empty positions r
// of one kv head's K and V rows, written to `row`.
template <class Acc>
void attn_chunk_head(const bf16* q, const KvRows& kv, uint32_t D, PositionRange r, float* row) {
  const Acc scale = pm_rsqrt(Acc(D));
  std::vector<Acc> s(r.end - r.begin);
  Acc m = -INFINITY;
  for (uint32_t t = r.begin; t < r.end; ++t) {
    const bf16* k = kv.k(t);
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
    const bf16* v = kv.v(t);
    l = l + p;
    for (uint32_t d = 0; d < D; ++d) acc[d] = acc[d] + p * widen<Acc>(v[d]);
  }
  row[0] = m_stored;
  row[1] = float(l);
  for (uint32_t d = 0; d < D; ++d) row[2 + d] = float(acc[d]);
}

// One chunk's step of attn_merge_max (below): M (the earlier chunks', which win ties) or the
// chunk's m.
template <class Acc>
SP_HDI Acc attn_merge_max_step(Acc M, float m) {
  return Acc(m) > M ? Acc(m) : M;
}

// The merge of a q head's partial rows {m, l, acc[D]} from the `used` non-empty chunks
// (docs/numerics.md, ATTENTION), element by element, so every executor runs the same formula:
// M = attn_merge_max, the weight of chunk c is w(c) = attn_merge_weight(row c, M), and
// out_d = attn_merge_element.
template <class Acc>
SP_HDI Acc attn_merge_max(const float* rows, size_t row_stride, uint32_t used) {
  Acc M = -INFINITY;
  for (uint32_t c = 0; c < used; ++c) M = attn_merge_max_step(M, rows[c * row_stride]);
  return M;
}

template <class Acc>
SP_HDI Acc attn_merge_weight(const float* row, Acc M) {
  return pm_exp(Acc(row[0]) - M);
}

// Chunk c's terms of L and o_d (attn_merge_element), with its weight w_c.
template <class Acc>
SP_HDI void attn_merge_add(Acc& L, Acc& o, float l_c, float acc_cd, Acc w_c) {
  L = L + Acc(l_c) * w_c;
  o = o + Acc(acc_cd) * w_c;
}

// r(o_d / L), L = Σ_c l_c·w(c), o_d = Σ_c acc_{c,d}·w(c) over the chunks in chunk order; w(c)
// returns chunk c's weight (computed by attn_merge_weight, or read back from where it was
// stored).
template <class Acc, class W>
SP_HDI bf16 attn_merge_element(const float* rows, size_t row_stride, uint32_t used, W w, uint32_t d) {
  Acc L = 0, o = 0;
  for (uint32_t c = 0; c < used; ++c) {
    const float* row = rows + c * row_stride;
    attn_merge_add<Acc>(L, o, row[1], row[2 + d], w(c));
  }
  return to_bf16(o / L);
}

// attn_merge_element of a single chunk, whose l and acc_d are at hand, with its weight w.
template <class Acc>
SP_HDI bf16 attn_merge_lone_element(float l, float acc_d, Acc w) {
  Acc L = 0, o = 0;
  attn_merge_add<Acc>(L, o, l, acc_d, w);
  return to_bf16(o / L);
}

// out[D] = r(o / L) from a q head's `used` partial rows, merged in chunk order.
template <class Acc>
void attn_merge_head(const float* rows, size_t row_stride, uint32_t used, uint32_t D, bf16* out) {
  const Acc M = attn_merge_max<Acc>(rows, row_stride, used);
  std::vector<Acc> w(used);
  for (uint32_t c = 0; c < used; ++c) w[c] = attn_merge_weight<Acc>(rows + c * row_stride, M);
  for (uint32_t d = 0; d < D; ++d)
    out[d] = attn_merge_element<Acc>(rows, row_stride, used, [&](uint32_t c) { return w[c]; }, d);
}

// The gated attention's output element (GATED_ATTENTION): r(o · r(sigmoid(gate))), as
// transformers multiplies the bf16 output by the bf16 sigmoid.
template <class Acc>
SP_HDI bf16 attn_gated_output(bf16 o, bf16 gate) {
  return to_bf16(widen<Acc>(o) * widen<Acc>(to_bf16(pm_sigmoid(widen<Acc>(gate)))));
}

// q heads [h0, h1): partial rows h * chunks + c (c < used), outputs at h * D; with gates, each
// output multiplied by its gate (head h's D gates at gates + h * gate_stride).
template <class Acc>
void attn_merge_heads(const float* partials, size_t row_stride, uint32_t chunks, uint32_t used, uint32_t D,
                      bf16* out, uint32_t h0, uint32_t h1, const bf16* gates, size_t gate_stride) {
  for (uint32_t h = h0; h < h1; ++h) {
    bf16* o = out + size_t(h) * D;
    attn_merge_head<Acc>(partials + size_t(h) * chunks * row_stride, row_stride, used, D, o);
    if (!gates) continue;
    for (uint32_t d = 0; d < D; ++d) o[d] = attn_gated_output<Acc>(o[d], gates[h * gate_stride + d]);
  }
}

struct AttentionArgs {
  const bf16* qkv;          // q heads (each followed by its gate when gated), then k heads, then v heads
  const bf16* q_norm;       // [D]
  const bf16* k_norm;       // [D]
  bf16* kv_cache;           // K row g * context + t, V row (Hkv + g) * context + t
  size_t cache_row_stride;
  const bf16* rope_row;     // the RoPE table's row for `position`
  float* partials;          // row q_head * chunks + chunk: {m, l, acc[D]}
  size_t partial_row_stride;
  bf16* out;                // [Hq * D]
  uint32_t* arrivals;       // [Hkv * q_splits], zero between steps
  uint32_t n_heads, n_kv_heads, head_dim, rotary_dim, context, chunks, q_splits, kv_share, position, norm_kind;
  float eps;
  bool gated;               // GATED_ATTENTION: q head h at h * 2D, its gate at h * 2D + D

  // Elements from one q head to the next in qkv, and where the k heads begin.
  size_t q_stride() const { return size_t(gated ? 2 : 1) * head_dim; }
  size_t k_begin() const { return n_heads * q_stride(); }
};

// Tile (kv_head * q_splits + split) * chunks + chunk over the positions 0..position (opcodes.h,
// SP_OP_ATTENTION and SP_OP_GATED_ATTENTION). An empty chunk does nothing; the non-empty ones count in, and the last
// merges, unless there is only one, which merges its own partials at once.
template <class Acc>
void attention_tile(const AttentionArgs& a, uint32_t tile) {
  const uint32_t D = a.head_dim, Hq = a.n_heads, Hkv = a.n_kv_heads, n = a.position + 1;
  const uint32_t heads = Hq / Hkv / a.q_splits, unit = tile / a.chunks, c = tile % a.chunks;
  const uint32_t g = unit / a.q_splits;
  const PositionRange r = chunk_positions(n, a.chunks, c);
  if (r.begin == r.end) return;
  const size_t stride = a.cache_row_stride;
  bf16* K = a.kv_cache + size_t(g) * a.context * stride;
  bf16* V = a.kv_cache + size_t(Hkv + g) * a.context * stride;
  std::vector<bf16> k_own(D);
  const bf16* v_own = a.qkv + a.k_begin() + size_t(Hkv + g) * D;
  if (r.end == n) {  // the chunk holds the position: its rows are k̂ and v, appended by the first split
    norm_rope_head<Acc>(a.qkv + a.k_begin() + size_t(g) * D, D, a.rotary_dim, {a.k_norm, a.norm_kind, a.eps}, a.rope_row,
                        k_own.data());
    if (attn_unit_appends(unit, a.q_splits, a.kv_share)) {
      std::copy(k_own.begin(), k_own.end(), K + a.position * stride);
      std::copy(v_own, v_own + D, V + a.position * stride);
    }
  }
  const KvRows kv{K, V, stride, a.position, k_own.data(), v_own};
  std::vector<bf16> q(D);
  for (uint32_t h = unit * heads; h < (unit + 1) * heads; ++h) {
    norm_rope_head<Acc>(a.qkv + h * a.q_stride(), D, a.rotary_dim, {a.q_norm, a.norm_kind, a.eps}, a.rope_row, q.data());
    attn_chunk_head<Acc>(q.data(), kv, D, r, a.partials + (size_t(h) * a.chunks + c) * a.partial_row_stride);
  }
  const uint32_t used = nonempty_chunks(n, a.chunks);
  if (used == 1 || arrive_last(a.arrivals[unit], used))
    attn_merge_heads<Acc>(a.partials, a.partial_row_stride, a.chunks, used, D, a.out, unit * heads, (unit + 1) * heads,
                          a.gated ? a.qkv + D : nullptr, a.q_stride());
}

}  // namespace spindle
