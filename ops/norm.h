// RMSNorm of a bf16 vector (docs/numerics.md, "RMSNorm"), standard or zero-centred
// (SP_NORM_*), and the input of a projection: x normalised, or x as it is, widened once.
#pragma once
#include <stdint.h>

#include <vector>

#include "ops/acc.h"
#include "ops/dot.h"
#include "ops/pmath.h"
#include "tasks/graph_params.h"

namespace spindle {

// How a projection's input is normalised; weight == nullptr means not at all.
struct NormSpec {
  const bf16* weight;
  uint32_t kind;  // SP_NORM_*
  float eps;
};

// 1/rms from ss, the canonical dot of x̂ with itself over K elements. Where K is a power of two,
// ss / K is ss times 1/K: both round the exact ss / K once, so the bits are the same, and 1/K
// (integer steps, independent of ss) keeps the division off the norm's path.
template <class Acc>
SP_HDI Acc rms_inverse(Acc ss, uint32_t K, float eps) {
  const Acc mean = K && (K & (K - 1)) == 0 ? ss * Acc(inverse_power_of_two(K)) : ss / Acc(K);
  return pm_rsqrt(mean + Acc(eps));
}

// One output element from x̂_k, 1/rms and ŵ_k.
template <class Acc>
SP_HDI bf16 rms_norm_element(Acc x, Acc inv, Acc w, uint32_t kind) {
  if (kind == SP_NORM_ZERO_CENTRED) return to_bf16((x * inv) * (Acc(1) + w));
  return to_bf16(rounded(x * inv) * w);
}

// f(k) where k.value is `kind` (SP_NORM_*) as a constant, so that the elements f normalises hold
// no branch on it: on the GPU each element's branch made it a block of code of its own, and a
// thread's elements ran one after another where they could overlap.
template <uint32_t Kind>
struct NormKindConstant {
  static constexpr uint32_t value = Kind;
};
template <class F>
SP_HDI void with_norm_kind(uint32_t kind, F&& f) {
  if (kind == SP_NORM_ZERO_CENTRED) f(NormKindConstant<SP_NORM_ZERO_CENTRED>{});
  else f(NormKindConstant<SP_NORM_STANDARD>{});
}

// out[k] = RMSNorm(x)[k] for k < K; Out is bf16, float or double (holding bf16 values).
template <class Acc, class Out>
void rms_norm(const bf16* x, uint32_t K, const NormSpec& norm, Out* out) {
  auto xk = [&](int k) { return widen<Acc>(x[k]); };
  const Acc inv = rms_inverse(canonical_dot<Acc>(int(K), xk, xk), K, norm.eps);
  for (uint32_t k = 0; k < K; ++k)
    store_bf16(out[k], rms_norm_element(xk(k), inv, widen<Acc>(norm.weight[k]), norm.kind));
}

// The vector a projection multiplies: RMSNorm(x) when norm.weight is set, else x, as Acc.
template <class Acc>
std::vector<Acc> projection_input(const bf16* x, uint32_t K, const NormSpec& norm) {
  std::vector<Acc> n(K);
  if (norm.weight) {
    rms_norm<Acc>(x, K, norm, n.data());
  } else {
    for (uint32_t k = 0; k < K; ++k) n[k] = widen<Acc>(x[k]);
  }
  return n;
}

}  // namespace spindle
