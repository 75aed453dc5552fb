// Gated DeltaNet decode (docs/numerics.md, GDN; ../shared/spec/qwen-decode-math.md §4 and
// transformers' torch fallbacks, which round where noted): the causal conv's update of a
// channel, a value head's gates, the L2 norm of a q or k head, the delta-rule step of a value
// head's state, the gated RMSNorm of its output, and the GDN op's tile (gdn_head) that chains
// them. Every sum runs in the canonical order (ops/dot.h) or in one stated order, so that every
// executor gets the same bits.
//
// The recurrent state of a value head is f32 [dv][dk], value-major ("K-last"): the column of
// value dim j is the dk floats row j, so that both of a step's sums over the key dim (S's
// column against k, then against q) read one contiguous row, a warp's canonical dot.
#pragma once
#include <stdint.h>

#include <vector>

#include "ops/acc.h"
#include "ops/dot.h"
#include "ops/norm.h"
#include "ops/pmath.h"
#include "tasks/host_device.h"

namespace spindle {

// The causal conv's step of one channel at `position` (kernel Kc taps, weights w[0..Kc-1],
// w[Kc-1] on the newest input). The channel's state is a ring of its last Kc inputs, the input
// of position p in slot p % Kc, zero for positions before the sequence: tap j takes the input of
// position − (Kc − 1) + j, slot (position + 1 + j) % Kc, and the last tap x, which `write` stores
// in slot position % Kc (the one slot no tap of this step reads, so that tiles sharing a channel
// read it while one writes). y = r(silu(r(Σ_j w_j · in_j))), j increasing: transformers runs
// the conv in bf16 (the sum rounded) and SiLU on that bf16 value (rounded again).
// conv_ring_step's output, the older inputs from older(slot) (a device tile loads them its
// own way).
template <class Acc, class Older>
SP_HDI bf16 conv_ring_output(uint32_t Kc, const bf16* w, bf16 x, uint32_t position, Older older) {
  Acc sum = Acc(0);
  for (uint32_t j = 0; j < Kc; ++j) {
    const bf16 in = j + 1 < Kc ? older((position + 1 + j) % Kc) : x;
    sum = sum + widen<Acc>(w[j]) * widen<Acc>(in);
  }
  return to_bf16(pm_silu(rounded(sum)));
}

template <class Acc>
SP_HDI bf16 conv_ring_step(bf16* ring, uint32_t Kc, const bf16* w, bf16 x, uint32_t position, bool write) {
  const bf16 y = conv_ring_output<Acc>(Kc, w, x, position, [ring](uint32_t slot) { return ring[slot]; });
  if (write) ring[position % Kc] = x;
  return y;
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

struct GdnArgs {
  const bf16* proj;        // [C + Hv*dv + 2Hv]: the q, k and v channels, z, b, a
  const bf16* conv_w;      // [C, Kc], rows conv_w_stride apart
  size_t conv_w_stride;
  const bf16 *A_log, *dt_bias, *norm_w;  // [Hv], [Hv], [dv]
  bf16* conv_state;        // [C, Kc] rings, rows conv_state_stride apart
  size_t conv_state_stride;
  float* state;            // [Hv*dv, dk], rows back to back
  bf16* out;               // [Hv*dv]
  uint32_t Hk, Hv, dk, dv, Kc, position;
  float eps;

  uint32_t channels() const { return 2 * Hk * dk + Hv * dv; }
};

// Value head h's step (SP_OP_GDN): the conv of its key head's q and k channels (stored by the
// group's first value head) and of its v channels; β and the decay from b and a; the L2 norms;
// the delta rule on its state rows h*dv .. h*dv + dv - 1; out = the gated RMSNorm of its output
// with its z.
template <class Acc>
void gdn_head(const GdnArgs& a, uint32_t h) {
  const uint32_t group = a.Hv / a.Hk, g = h / group, dk = a.dk, dv = a.dv, C = a.channels();
  const bool writes_qk = h % group == 0;
  auto conv = [&](uint32_t c, bool write) {
    return conv_ring_step<Acc>(a.conv_state + c * a.conv_state_stride, a.Kc, a.conv_w + c * a.conv_w_stride,
                               a.proj[c], a.position, write);
  };
  std::vector<bf16> q(dk), k(dk), v(dv), o(dv);
  for (uint32_t i = 0; i < dk; ++i) {
    q[i] = conv(g * dk + i, writes_qk);
    k[i] = conv((a.Hk + g) * dk + i, writes_qk);
  }
  for (uint32_t j = 0; j < dv; ++j) v[j] = conv(2 * a.Hk * dk + h * dv + j, true);
  const bf16* z = a.proj + C + size_t(h) * dv;
  const bf16* ba = a.proj + C + size_t(a.Hv) * dv;
  const GdnGates<Acc> gates = gdn_gates<Acc>(ba[h], ba[a.Hv + h], a.A_log[h], a.dt_bias[h]);
  auto wide = [](const std::vector<bf16>& x) { return [&x](int i) { return widen<Acc>(x[i]); }; };
  const Acc inv_q = l2_inverse<Acc>(wide(q), dk), inv_k = l2_inverse<Acc>(wide(k), dk);
  gdn_head_step<Acc>(
      a.state + size_t(h) * dv * dk, dk, dv, [&](int i) { return widen<Acc>(k[i]) * inv_k; },
      [&](int i) { return gdn_query_element<Acc>(widen<Acc>(q[i]), inv_q, dk); },
      [&](int j) { return widen<Acc>(v[j]); }, gates, o.data());
  gated_rms_norm<Acc>(o.data(), z, a.norm_w, dv, a.eps, a.out + size_t(h) * dv);
}

}  // namespace spindle
