// The MoE layer's tiles (docs/numerics.md, "MoE"): the router's logits and its choice of k
// experts, the chosen experts' gate and up rows, and their down rows summed into the residual.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <algorithm>
#include <vector>

#include "ops/acc.h"
#include "ops/gemv.h"
#include "ops/pmath.h"

namespace spindle {

// One of the k experts a token is routed to, as the routing view holds it: two u32 words, the
// weight's f32 bits holding a bf16 value.
struct RoutingSlot {
  uint32_t expert;
  float weight;
};
static_assert(sizeof(RoutingSlot) == 8, "a routing slot is two 32-bit words");

// The experts a device holds (expert parallel, tasks/op_params.h SpMoeParams::held_first): the
// expert tiles skip the slots of the others; count 0: every expert.
struct HeldExperts {
  uint32_t first = 0, count = 0;
  SP_HDI bool holds(uint32_t e) const { return count == 0 || (e >= first && e - first < count); }
};

// Whether expert i's logit a comes before expert j's b in the choice: the larger first, the
// lower expert on a tie, a NaN after every number.
SP_HDI bool routes_before(float a, uint32_t i, float b, uint32_t j) {
  if (a != a || b != b) return b != b && (a == a || i < j);
  return a > b || (a == b && i < j);
}

// A logit as an unsigned number that orders as routes_before orders logits: above every NaN
// (all of which map to 0), −0 as +0, a negative's bits flipped whole and a positive's sign bit
// set. With it, a before b exactly when key(a) > key(b), or key(a) == key(b) and a's expert is
// the lower: a tile counts an expert's place in integer compares (tests/ops_moe.cpp).
SP_HDI uint32_t route_key(float a) {
  if (a != a) return 0;
  const uint32_t b = a == 0.0f ? 0u : bits_from_f32(a);
  return b & 0x80000000u ? ~b : b | 0x80000000u;
}

// Expert e's place in the choice: how many experts route before it. The k experts of places
// 0..k-1 are the top k of the logits (their order is the softmax's, so the probabilities' top
// k), in the choice order (HF's torch.topk order). Each expert's place alone, so a device tile
// finds them all at once; a count, so it may be summed from parts: the experts j = first,
// first + step, … (a warp's lanes each count their share).
SP_HDI uint32_t route_place(const float* logits, uint32_t E, uint32_t e, uint32_t first = 0, uint32_t step = 1) {
  uint32_t place = 0;
  for (uint32_t j = first; j < E; j += step) place += routes_before(logits[j], j, logits[e], e);
  return place;
}

// The softmax's denominator Z given each expert's ex[e] = exp(logits[e] − top) (top: the first
// chosen's logit): the ex summed in expert order.
template <class Acc>
SP_HDI Acc route_sum(const Acc* ex, uint32_t E) {
  Acc sum = 0;
  for (uint32_t e = 0; e < E; ++e) sum = sum + ex[e];
  return sum;
}

// Slot s's weight given Z (route_sum): softmax(logits)[e] = ex[e] / Z, divided by the k chosen
// weights' sum (in choice order) when `normalise`, rounded to bf16. Each slot's alone, so a device
// tile weighs them all at once.
template <class Acc>
SP_HDI float route_slot_weight(const Acc* ex, Acc sum, uint32_t k, bool normalise, const RoutingSlot* slots,
                               uint32_t s) {
  const Acc p = ex[slots[s].expert] / sum;
  if (!normalise) return bf16_to_f32(to_bf16(p));
  Acc chosen_sum = 0;
  for (uint32_t c = 0; c < k; ++c) chosen_sum = chosen_sum + ex[slots[c].expert] / sum;
  return bf16_to_f32(to_bf16(p / chosen_sum));
}

// The token's k slots in choice order, each {expert, weight} (route_place, route_slot_weight).
template <class Acc>
void route(const float* logits, uint32_t E, uint32_t k, bool normalise, RoutingSlot* out) {
  for (uint32_t e = 0; e < E; ++e)
    if (const uint32_t place = route_place(logits, E, e); place < k) out[place].expert = e;
  const Acc top = Acc(logits[out[0].expert]);
  std::vector<Acc> ex(E);
  for (uint32_t e = 0; e < E; ++e) ex[e] = pm_exp(Acc(logits[e]) - top);
  const Acc sum = route_sum(ex.data(), E);
  for (uint32_t s = 0; s < k; ++s) out[s].weight = route_slot_weight(ex.data(), sum, k, normalise, out, s);
}

// Router rows [r0, r1): logits[e] = r(Ŵ_e · n̂) (f32 holding bf16 values), as a GEMV's. The
// routing is EXPERT_GATE_UP's (expert_gate_up_task).
template <class Acc>
void router_rows(const bf16* W, size_t row_stride, const bf16* x, uint32_t H, const NormSpec& norm, uint32_t r0,
                 uint32_t r1, float* logits) {
  gemv_rows<Acc>(W, row_stride, x, H, norm, r0, r1, logits, nullptr, nullptr);
}

// The fused gate-and-up weights of the experts (opcodes.h SP_OP_EXPERT_GATE_UP): expert e's
// gate row r is row e·2Im + r, its up row e·2Im + Im + r.
struct ExpertGateUp {
  const bf16* W;
  size_t row_stride;
  uint32_t expert_rows;  // Im
};

// Tiles [t0, t1) of the routed experts' gate and up rows, slot-major: tile t is row r = t % Im
// of slot s = t / Im; act[s][r] = swiglu(r(Ŵg_e,r · n̂), r(Ŵu_e,r · n̂)) as GATE_UP's, e the
// slot's expert (checked below E by the caller), for the slots whose expert is `held`.
template <class Acc>
void expert_gate_up_rows(const ExpertGateUp& w, const bf16* x, uint32_t H, const NormSpec& norm,
                         const RoutingSlot* slots, uint32_t t0, uint32_t t1, bf16* act, size_t act_stride,
                         HeldExperts held = {}) {
  const std::vector<Acc> n = projection_input<Acc>(x, H, norm);
  const uint32_t Im = w.expert_rows;
  for (uint32_t t = t0; t < t1; ++t) {
    const uint32_t s = t / Im, r = t % Im;
    if (!held.holds(slots[s].expert)) continue;
    const bf16* gate = w.W + (size_t(slots[s].expert) * 2 * Im + r) * w.row_stride;
    const Acc g = rounded(row_dot(gate, n.data(), H));
    const Acc u = rounded(row_dot(gate + size_t(Im) * w.row_stride, n.data(), H));
    act[s * act_stride + r] = swiglu(g, u);
  }
}

// An EXPERT_GATE_UP task: the token routed from the router's E logits (route), tiles [t0, t1)
// of its slots' gate and up rows (expert_gate_up_rows), and, by the task of tile 0, the routing
// stored for EXPERT_DOWN. Every task routes alike, so none waits for another's routing.
template <class Acc>
void expert_gate_up_task(const ExpertGateUp& w, const bf16* x, uint32_t H, const NormSpec& norm, const float* logits,
                         uint32_t E, uint32_t k, bool normalise, uint32_t t0, uint32_t t1, bf16* act, size_t act_stride,
                         RoutingSlot* routing, HeldExperts held = {}) {
  std::vector<RoutingSlot> slots(k);
  route<Acc>(logits, E, k, normalise, slots.data());
  expert_gate_up_rows<Acc>(w, x, H, norm, slots.data(), t0, t1, act, act_stride, held);
  if (t0 == 0) std::copy(slots.begin(), slots.end(), routing);
}

// The shared expert of qwen3_next and qwen3_5_moe (spec §6.3): its down rows, its activations
// (GATE_UP's, over Is columns) and its gate's logit r(w_sg · n̂); or, where its down dots are
// split (EXPERT_DOWN_SUM over devices), their pieces' f32 dots instead of the rows and the
// activations: piece j of row r at pieces[j · piece_stride + r], summed as `split` sums a split
// GEMV's.
struct SharedExpert {
  const bf16* Wd;
  size_t row_stride;
  uint32_t Is;
  const bf16* act;
  bf16 gate_logit;
  const float* pieces = nullptr;
  size_t piece_stride = 0;
  GemvSplit split = {};
};

// The routed sum of a row plus the shared expert's term: r(routed + r(r(sigmoid(logit)) · s)),
// s = r(Ŵd_shared,r · act_shared), as transformers adds the gated shared output to the
// finished bf16 routed sum (sigmoid of the bf16 logit in bf16, the product rounded).
template <class Acc>
SP_HDI Acc add_shared_expert(Acc routed, Acc s, bf16 gate_logit) {
  return rounded(routed + rounded(rounded(pm_sigmoid(widen<Acc>(gate_logit))) * s));
}

// Rows [r0, r1) of the routed experts' sum added into the residual, from each slot's down row
// y(s, r) (rounded): m = the Acc sum from 0 over the slots in order of r(w_s · y(s, r)), and
// hidden[r] = r(hidden[r] + f), f = r(m) (HF's experts, grouped_mm, whose bf16 sum over the top
// k accumulates in fp32 in slot order and rounds once), or with a shared expert
// add_shared_expert(r(m), its row's output, its gate's logit): r(Ŵd_shared,r · act_shared), or
// its pieces summed as its split sums them.
template <class Acc, class SlotRow>
void add_expert_rows(const RoutingSlot* slots, uint32_t k, uint32_t r0, uint32_t r1, SlotRow y, bf16* hidden,
                     const SharedExpert* shared) {
  const bool dots = shared && !shared->pieces;
  const std::vector<Acc> a_shared = dots ? projection_input<Acc>(shared->act, shared->Is, NormSpec{}) : std::vector<Acc>{};
  const auto shared_row = [&](uint32_t r) {
    if (dots) return rounded(row_dot(shared->Wd + r * shared->row_stride, a_shared.data(), shared->Is));
    return rounded(
        split_sum<Acc>(shared->split, [&](uint32_t j) { return Acc(shared->pieces[j * shared->piece_stride + r]); }));
  };
  for (uint32_t r = r0; r < r1; ++r) {
    Acc m = 0;
    for (uint32_t s = 0; s < k; ++s) m = m + rounded(Acc(slots[s].weight) * y(s, r));
    Acc f = rounded(m);
    if (shared) f = add_shared_expert(f, shared_row(r), shared->gate_logit);
    hidden[r] = to_bf16(widen<Acc>(hidden[r]) + f);
  }
}

// Rows [r0, r1) of the routed experts' down projections, summed into the residual
// (add_expert_rows): y_s = r(Ŵd_e,r · act_s) for each slot s (expert e's row r is row e·H + r
// of Wd).
template <class Acc>
void expert_down_rows(const bf16* Wd, size_t row_stride, uint32_t H, uint32_t Im, const bf16* act,
                      size_t act_stride, const RoutingSlot* slots, uint32_t k, uint32_t r0, uint32_t r1,
                      bf16* hidden, const SharedExpert* shared = nullptr) {
  std::vector<std::vector<Acc>> a;
  for (uint32_t s = 0; s < k; ++s) a.push_back(projection_input<Acc>(act + s * act_stride, Im, NormSpec{}));
  const auto y = [&](uint32_t s, uint32_t r) {
    return rounded(row_dot(Wd + (size_t(slots[s].expert) * H + r) * row_stride, a[s].data(), Im));
  };
  add_expert_rows<Acc>(slots, k, r0, r1, y, hidden, shared);
}

// A piece of the routed experts' down dots over rows [r0, r1) (opcodes.h
// SP_OP_EXPERT_DOWN_PIECE): Wd and act are the piece's P columns of every expert's down rows and
// of every slot's activations; slot s's dot of row r goes to partial_row[s·H + r], f32, for the
// slots whose expert is `held` (expert parallel: the piece is then every column, the slot's
// whole dot).
template <class Acc>
void expert_down_piece_rows(const bf16* Wd, size_t row_stride, uint32_t H, uint32_t P, const bf16* act,
                            size_t act_stride, const RoutingSlot* slots, uint32_t k, uint32_t r0, uint32_t r1,
                            float* partial_row, HeldExperts held = {}) {
  for (uint32_t s = 0; s < k; ++s) {
    if (!held.holds(slots[s].expert)) continue;
    const std::vector<Acc> a = projection_input<Acc>(act + s * act_stride, P, NormSpec{});
    for (uint32_t r = r0; r < r1; ++r)
      partial_row[size_t(s) * H + r] = float(row_dot(Wd + (size_t(slots[s].expert) * H + r) * row_stride, a.data(), P));
  }
}

// The pieces' partial rows summed into the residual (opcodes.h SP_OP_EXPERT_DOWN_SUM): y_s =
// r(split_sum of slot s's pieces of row r), as a split GEMV sums a row's pieces, then
// add_expert_rows (a shared expert's pieces summed as its own split says).
template <class Acc>
void expert_down_sum_rows(const float* partials, size_t partial_stride, GemvSplit split, uint32_t H,
                          const RoutingSlot* slots, uint32_t k, uint32_t r0, uint32_t r1, bf16* hidden,
                          const SharedExpert* shared = nullptr) {
  const auto y = [&](uint32_t s, uint32_t r) {
    return rounded(split_sum<Acc>(split, [&](uint32_t j) { return Acc(partials[j * partial_stride + size_t(s) * H + r]); }));
  };
  add_expert_rows<Acc>(slots, k, r0, r1, y, hidden, shared);
}

}  // namespace spindle
