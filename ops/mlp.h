// The MLP gang task (opcodes.h SP_OP_MLP, docs/numerics.md "MLP"): GATE_UP and down fused over
// one piece of the intermediate columns a member, down's dots summed over the gang's pieces and
// then over the gangs exactly as a GEMV down split pieces/w (ops/gemv.h split_row_dot) sums them.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <vector>

#include "ops/acc.h"
#include "ops/arrivals.h"
#include "ops/gemv.h"
#include "tasks/mlp_shape.h"

namespace spindle {

struct MlpArgs {
  const bf16 *Wg, *Wu, *Wd;  // Wg and Wu [I, H], Wd [H, I]
  size_t gu_stride, d_stride;
  bf16* hidden;  // [H]: the input, and the output in place
  NormSpec norm;
  float* partials;  // [pieces + gangs, H]: the pieces' dots, then the gangs' sums
  size_t partial_stride;
  uint32_t* arrivals;  // [width], zero between steps
  MlpShape shape;      // of rank 0's record
};

// Phase 0 of the member holding piece `index`: its P activations (r(silu(r(g))) · r(u), g and
// u the dots of normed hidden with Wg's and Wu's rows) and, for each of the H rows of Wd, the
// canonical dot of the row's P columns of the piece with them, into partial row `index`.
template <class Acc>
void mlp_piece(const MlpArgs& a, uint32_t index) {
  const MlpShape& s = a.shape;
  const std::vector<Acc> n = projection_input<Acc>(a.hidden, s.H, a.norm);
  const uint32_t c0 = index * s.piece;
  std::vector<Acc> act(s.piece);
  for (uint32_t j = 0; j < s.piece; ++j) {
    const Acc g = rounded(row_dot(a.Wg + (c0 + j) * a.gu_stride, n.data(), s.H));
    const Acc u = rounded(row_dot(a.Wu + (c0 + j) * a.gu_stride, n.data(), s.H));
    act[j] = widen<Acc>(swiglu(g, u));
  }
  float* out = a.partials + index * a.partial_stride;
  for (uint32_t i = 0; i < s.H; ++i) out[i] = float(row_dot(a.Wd + i * a.d_stride + c0, act.data(), s.piece));
}

// Phase 1 of rank r of gang `gang`: over its share of the H rows, the sum of the gang's pieces
// from the first, into row pieces + gang; then, the last gang to get there for share r sums the
// gangs' rows from the first and adds them to hidden: r(hidden + r(y)).
template <class Acc>
void mlp_gang_sum(const MlpArgs& a, uint32_t gang, uint32_t rank) {
  const MlpShape& s = a.shape;
  const uint32_t i0 = sp_gang_share(s.H, s.width, rank), i1 = sp_gang_share(s.H, s.width, rank + 1);
  const float* pieces = a.partials + size_t(gang) * s.width * a.partial_stride;
  float* sums = a.partials + size_t(s.pieces) * a.partial_stride;
  for (uint32_t i = i0; i < i1; ++i) {
    Acc sum = Acc(pieces[i]);
    for (uint32_t m = 1; m < s.width; ++m) sum = sum + Acc(pieces[m * a.partial_stride + i]);
    sums[gang * a.partial_stride + i] = float(sum);
  }
  if (!arrive_last(a.arrivals[rank], s.gangs)) return;
  for (uint32_t i = i0; i < i1; ++i) {
    Acc y = Acc(sums[i]);
    for (uint32_t k = 1; k < s.gangs; ++k) y = y + Acc(sums[k * a.partial_stride + i]);
    a.hidden[i] = to_bf16(widen<Acc>(a.hidden[i]) + widen<Acc>(to_bf16(y)));
  }
}

// The whole gang whose rank-0 record `a.shape` describes, phase by phase, rank by rank.
template <class Acc>
void mlp_gang_whole(const MlpArgs& a) {
  const MlpShape& s = a.shape;
  for (uint32_t r = 0; r < s.width; ++r) mlp_piece<Acc>(a, s.index + r);
  for (uint32_t r = 0; r < s.width; ++r) mlp_gang_sum<Acc>(a, s.gang, r);
}

}  // namespace spindle
