// Gated DeltaNet decode (docs/numerics.md, GDN; ../shared/spec/qwen-decode-math.md §4 and
// transformers' torch fallbacks, which round where noted): the causal conv's update of a
// channel, a value head's gates, the L2 norm of a q or k head, the delta-rule step of a value
// head's state, and the gated RMSNorm of its output. Every sum runs in the canonical order
// (ops/dot.h) or in one stated order, so that every executor gets the same bits.
//
// The recurrent state of a value head is f32 [dv][dk], value-major ("K-last"): the column of
// value dim j is the dk floats row j, so that both of a step's sums over the key dim (S's
// column against k, then against q) read one contiguous row, a warp's canonical dot.
#pragma once
#include <stdint.h>

#include <vector>

#include "ops/acc.h"
#include "ops/dot.h"
#include "ops/hd.h"
#include "ops/norm.h"
#include "ops/pmath.h"

namespace spindle {

// The causal conv's step of one channel (kernel Kc taps, weights w[0..Kc-1], w[Kc-1] on the
// newest input): the window is the state's last Kc - 1 inputs and x, oldest first, and becomes
// the state. y = r(silu(r(Σ_j w_j · window_j))), j increasing: transformers runs the conv in
// bf16 (the sum rounded) and SiLU on that bf16 value (rounded again).
template <class Acc>
SP_HDI bf16 conv_step(bf16* state, uint32_t Kc, const bf16* w, bf16 x) {
  Acc sum = Acc(0);
  for (uint32_t j = 0; j < Kc; ++j) {
    const bf16 in = j + 1 < Kc ? state[j + 1] : x;
    sum = sum + widen<Acc>(w[j]) * widen<Acc>(in);
  }
  for (uint32_t j = 0; j + 1 < Kc; ++j) state[j] = state[j + 1];
  state[Kc - 1] = x;
  return to_bf16(pm_silu(rounded(sum)));
}

// softplus(x) with transformers' threshold: x itself above 20, else log1p(exp(x)).
template <class Acc>
SP_HDI Acc softplus(Acc x) {
  return x > Acc(20) ? x : pm_log1p(pm_exp(x));
}

// A value head's gates from its b and α (bf16 projections) and the layer's A_log and dt_bias
// (bf16 parameters): β = r(sigmoid(b)) (transformers takes the sigmoid of the bf16 b), and the
// decay exp(g), g = −exp(A_log) · softplus(α + dt_bias) in Acc.
template <class Acc>
struct GdnGates {
  Acc beta, decay;
};
template <class Acc>
SP_HDI GdnGates<Acc> gdn_gates(bf16 b, bf16 alpha, bf16 A_log, bf16 dt_bias) {
  const Acc g = -pm_exp(widen<Acc>(A_log)) * softplus(widen<Acc>(alpha) + widen<Acc>(dt_bias));
  return {rounded(pm_sigmoid(widen<Acc>(b))), pm_exp(g)};
}

// 1/‖x‖ of a q or k head of d elements as the L2 norm takes it: rsqrt(Σ x_i² + 1e-6), the sum
// the canonical dot of x with itself, the eps (an f32 1e-6) added to the sum. The key's element
// i is then x_i · inv; the query's, divided by sqrt(dk) after the norm, gdn_query_element.
template <class Acc, class X>
Acc l2_inverse(X x, uint32_t d) {
  return pm_rsqrt(canonical_dot<Acc>(int(d), x, x) + Acc(1e-6f));
}
template <class Acc>
SP_HDI Acc gdn_query_element(Acc x, Acc inv, uint32_t dk) {
  return x * inv / pm_sqrt(Acc(dk));
}

// The delta-rule step of one value head (spec §4.5), in Acc, the state rows stored as f32:
// for each value dim j, the row S_j (dk floats) decays, S'_j = S_j · decay; m = S'_j · k;
// δ = (v_j − m) · β; S''_j = S'_j + k · δ (each product rounded, then the add); o_j = S''_j · q,
// both dots canonical over the key dim. k is the L2-normed key head, q the L2-normed query
// head divided by sqrt(dk) (gdn_query), v the value head's conv outputs; out[j] = r(o_j).
template <class Acc, class K, class Q, class V>
void gdn_head_step(float* S, uint32_t dk, uint32_t dv, K k, Q q, V v, GdnGates<Acc> gates, bf16* out) {
  std::vector<Acc> decayed(dk);
  for (uint32_t j = 0; j < dv; ++j) {
    float* row = S + size_t(j) * dk;
    for (uint32_t i = 0; i < dk; ++i) decayed[i] = Acc(row[i]) * gates.decay;
    const Acc m = canonical_dot<Acc>(int(dk), [&](int i) { return decayed[i]; }, k);
    const Acc delta = (Acc(v(j)) - m) * gates.beta;
    for (uint32_t i = 0; i < dk; ++i) decayed[i] = decayed[i] + Acc(k(i)) * delta;
    out[j] = to_bf16(canonical_dot<Acc>(int(dk), [&](int i) { return decayed[i]; }, q));
    for (uint32_t i = 0; i < dk; ++i) row[i] = float(decayed[i]);
  }
}

// The gated RMSNorm of a value head's output o (dv bf16) with its gate z (spec §1.3, as
// transformers computes it): t = RMSNorm(o) with w, standard (r(w · r(o · inv))); then
// y = r(t · silu(z)), silu in Acc. out may be o.
template <class Acc>
void gated_rms_norm(const bf16* o, const bf16* z, const bf16* w, uint32_t dv, float eps, bf16* out) {
  rms_norm<Acc>(o, dv, {w, SP_NORM_STANDARD, eps}, out);
  for (uint32_t j = 0; j < dv; ++j) out[j] = to_bf16(widen<Acc>(out[j]) * pm_silu(widen<Acc>(z[j])));
}

}  // namespace spindle
