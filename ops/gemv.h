// Row tiles of the projections (docs/numerics.md, "GEMV" and "GATE_UP"): the input is
// normalised once per call, then each row is one canonical dot over W's bf16 row.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <vector>

#include "ops/acc.h"
#include "ops/arrivals.h"
#include "ops/argmax.h"
#include "ops/dot.h"
#include "ops/norm.h"
#include "ops/pmath.h"
#include "tasks/gemv_piece.h"
#include "tasks/gemv_split.h"

namespace spindle {

// Ŵ_r · n̂ in the canonical order.
template <class Acc>
inline Acc row_dot(const bf16* w_row, const Acc* n, uint32_t K) {
  return canonical_dot<Acc>(int(K), [w_row](int k) { return bf16_to_f32(w_row[k]); },
                            [n](int k) { return n[k]; });
}

// Ŵ_r · n̂ split: with P = K / pieces, piece j's dot d_j is the canonical dot over columns
// [jP, jP + P) (its lanes counted from the piece's first column); split_sum adds them: group k
// sums d_kG, d_kG+1, … from its first term in increasing j, and the groups' sums add the same
// way in increasing k. So a gang of `group` blocks, each holding one piece's columns, sums its
// pieces, and the next stage sums the gangs (docs/two-hop-layer.md).
template <class Acc, class Piece>
SP_HDI Acc split_sum(GemvSplit s, Piece d) {
  Acc y{};
  for (uint32_t k = 0; k < s.pieces / s.group; ++k) {
    Acc sum{};
    for (uint32_t m = 0; m < s.group; ++m) {
      const Acc v = d(k * s.group + m);
      sum = m == 0 ? v : sum + v;
    }
    y = k == 0 ? sum : y + sum;
  }
  return y;
}

template <class Acc>
inline Acc split_row_dot(const bf16* w_row, const Acc* n, uint32_t K, GemvSplit s) {
  if (s.pieces < 2) return row_dot(w_row, n, K);
  const uint32_t P = K / s.pieces;
  return split_sum<Acc>(s, [&](uint32_t j) { return row_dot(w_row + j * P, n + j * P, P); });
}

// A piece's dots over rows [r0, r1) (opcodes.h SP_OP_PIECE_DOTS): W and x are the piece's
// columns and slice (P of them); each row's dot goes to partial_row[r], f32: exact where Acc is
// float, rounded where it is double.
template <class Acc>
void piece_dot_rows(const bf16* W, size_t row_stride, const bf16* x, uint32_t P, uint32_t r0, uint32_t r1,
                    float* partial_row) {
  const std::vector<Acc> n = projection_input<Acc>(x, P, NormSpec{});
  for (uint32_t r = r0; r < r1; ++r) partial_row[r] = float(row_dot(W + r * row_stride, n.data(), P));
}

// The pieces' partial rows over rows [r0, r1) summed as split_row_dot sums them (opcodes.h
// SP_OP_PIECE_SUM): out[r] = r(res + r(y)) with a residual (it may alias out), else r(y).
template <class Acc>
void piece_sum_rows(const float* partials, size_t partial_stride, GemvSplit split, uint32_t r0, uint32_t r1,
                    bf16* out, const bf16* residual) {
  for (uint32_t r = r0; r < r1; ++r) {
    bf16 y = to_bf16(split_sum<Acc>(split, [&](uint32_t j) { return Acc(partials[j * partial_stride + r]); }));
    if (residual) y = to_bf16(widen<Acc>(residual[r]) + widen<Acc>(y));
    out[r] = y;
  }
}

// Piece `p.index` of a split GEMV (opcodes.h SP_OP_GEMV_PIECE) over rows [r0, r1): its dots
// into partial row p.index (piece_dot_rows), and the last piece of these rows to arrive sums
// the pieces' rows into out (piece_sum_rows).
template <class Acc>
void gemv_piece_rows(const bf16* W, size_t row_stride, const bf16* x, uint32_t P, uint32_t r0, uint32_t r1,
                     float* partials, size_t partial_stride, const GemvPiece& p, uint32_t& arrivals, bf16* out,
                     const bf16* residual) {
  piece_dot_rows<Acc>(W, row_stride, x, P, r0, r1, partials + p.index * partial_stride);
  if (!arrive_last(arrivals, p.split.pieces)) return;
  piece_sum_rows<Acc>(partials, partial_stride, p.split, r0, r1, out, residual);
}

// r( r(silu(g)) · u ), g and u already rounded.
template <class Acc>
SP_HDI bf16 swiglu(Acc g, Acc u) {
  return to_bf16(rounded(pm_silu(g)) * u);
}

// out[r] = r(Ŵ_r · n̂) for r in [r0, r1), or r(res[r] + r(Ŵ_r · n̂)) when residual is set
// (it may alias out), each dot split as `split` says. Out is bf16, or float for logits. W has
// `row_stride` elements between rows. With `argmax` set, the tile's best {out[r], r} is
// written there (ops/argmax.h: NaN when a row is not finite).
template <class Acc, class Out>
void gemv_rows(const bf16* W, size_t row_stride, const bf16* x, uint32_t K, const NormSpec& norm,
               uint32_t r0, uint32_t r1, Out* out, const bf16* residual, ArgmaxPartial* argmax,
               GemvSplit split = {}) {
  const std::vector<Acc> n = projection_input<Acc>(x, K, norm);
  ArgmaxPartial best = argmax_none(r0);
  for (uint32_t r = r0; r < r1; ++r) {
    bf16 y = to_bf16(split_row_dot(W + r * row_stride, n.data(), K, split));
    if (residual) y = to_bf16(widen<Acc>(residual[r]) + widen<Acc>(y));
    store_bf16(out[r], y);
    argmax_offer_logit(best, bf16_to_f32(y), r);
  }
  if (argmax) *argmax = best;
}

// act[r] = swiglu(r(Ŵg_r · n̂), r(Ŵu_r · n̂)) for r in [r0, r1).
template <class Acc>
void gate_up_rows(const bf16* Wg, const bf16* Wu, size_t row_stride, const bf16* x, uint32_t K,
                  const NormSpec& norm, uint32_t r0, uint32_t r1, bf16* act) {
  const std::vector<Acc> n = projection_input<Acc>(x, K, norm);
  for (uint32_t r = r0; r < r1; ++r) {
    const Acc g = rounded(row_dot(Wg + r * row_stride, n.data(), K));
    const Acc u = rounded(row_dot(Wu + r * row_stride, n.data(), K));
    act[r] = swiglu(g, u);
  }
}

}  // namespace spindle
