// The MoE tiles (ops/moe.h) against independent references: the routing against a sort of the
// logits and a softmax in double, the experts' rows against an Eigen MLP per chosen expert.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "ops/moe.h"
#include "tests/ops_reference.h"

using namespace spindle;
using namespace spindle::test;

namespace {

// The experts chosen from `logits` by sorting them (larger first, lower index on a tie), their
// weights the softmax over all logits in double, renormalised when asked, in that order.
std::vector<std::pair<uint32_t, double>> reference_route(const std::vector<float>& logits, uint32_t k,
                                                         bool normalise) {
  std::vector<uint32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return logits[a] > logits[b]; });
  const double top = logits[order[0]];
  double sum = 0, chosen = 0;
  for (float l : logits) sum += std::exp(double(l) - top);
  for (uint32_t s = 0; s < k; ++s) chosen += std::exp(double(logits[order[s]]) - top) / sum;
  std::vector<std::pair<uint32_t, double>> out;
  for (uint32_t s = 0; s < k; ++s) {
    const double p = std::exp(double(logits[order[s]]) - top) / sum;
    out.emplace_back(order[s], normalise ? p / chosen : p);
  }
  return out;
}

// bf16-valued logits, ties included: drawn from a few values now and then.
std::vector<float> random_logits(std::mt19937& rng, uint32_t E) {
  std::vector<float> l(E);
  const std::vector<bf16> v = random_bf16(rng, E, 2.0);
  for (uint32_t e = 0; e < E; ++e) l[e] = bf16_to_f32(v[e]);
  if (E > 3 && rng() % 2) l[rng() % E] = l[rng() % E];  // a tie
  return l;
}

}  // namespace

TEST_CASE_TEMPLATE("route: the top k by logit, ties to the lower expert, softmax weights within a bf16 step",
                   Acc, float, double) {
  for (uint32_t seed = 0; seed < 300; ++seed) {
    std::mt19937 rng(7000 + seed);
    const uint32_t E = random_in(rng, 1, 160), k = random_in(rng, 1, std::min(E, 10u));
    const bool normalise = rng() % 2;
    const std::vector<float> logits = random_logits(rng, E);
    CAPTURE(seed);
    std::vector<RoutingSlot> slots(k);
    route<Acc>(logits.data(), E, k, normalise, slots.data());
    const auto ref = reference_route(logits, k, normalise);
    for (uint32_t s = 0; s < k; ++s) {
      CHECK(slots[s].expert == ref[s].first);
      CHECK(bf16_steps(f32_to_bf16(slots[s].weight), bits_of(ref_bf16(ref[s].second))) <= 1);
    }
  }
}

TEST_CASE("route: exact ties keep the lower experts, NaN logits come after every number and poison the weights") {
  std::vector<float> logits = {1.0f, 2.0f, -3.0f, 2.0f, 2.0f, -1.0f};
  std::vector<RoutingSlot> slots(3);
  route<float>(logits.data(), 6, 3, true, slots.data());
  CHECK(slots[0].expert == 1);
  CHECK(slots[1].expert == 3);
  CHECK(slots[2].expert == 4);
  for (const RoutingSlot& s : slots) CHECK(s.weight == bf16_to_f32(f32_to_bf16(1.0f / 3)));
  // A NaN logit is chosen last, and makes the softmax, so every weight, NaN, as HF's does: the
  // NaN reaches the logits, where the decode loop reports it.
  logits[1] = std::numeric_limits<float>::quiet_NaN();
  route<float>(logits.data(), 6, 3, true, slots.data());
  CHECK(slots[0].expert == 3);
  CHECK(slots[1].expert == 4);
  CHECK(slots[2].expert == 0);
  for (const RoutingSlot& s : slots) CHECK(std::isnan(s.weight));
  std::vector<float> nans(4, std::numeric_limits<float>::quiet_NaN());
  route<float>(nans.data(), 4, 3, false, slots.data());  // all NaN: the lowest experts
  CHECK(slots[0].expert == 0);
  CHECK(slots[2].expert == 2);
}

TEST_CASE("route_key orders logits as routes_before does: NaNs last, -0 as +0, ties to the lower expert") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> values = {nan, -nan, -inf, inf, 0.0f, -0.0f, 1.0f, -1.0f, 2.5f, -2.5f,
                               std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
                               std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest(),
                               std::numeric_limits<float>::min(), -std::numeric_limits<float>::min()};
  std::mt19937 rng(7501);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int i = 0; i < 48; ++i) values.push_back(normal(rng));
  for (int i = 0; i < 16; ++i) values.push_back(values[rng() % values.size()]);  // exact ties
  for (uint32_t i = 0; i < values.size(); ++i)
    for (uint32_t j = 0; j < values.size(); ++j) {
      const uint32_t a = route_key(values[i]), b = route_key(values[j]);
      CAPTURE(values[i]);
      CAPTURE(values[j]);
      CHECK(routes_before(values[i], i, values[j], j) == (a > b || (a == b && i < j)));
    }
}

TEST_CASE("router_rows: each expert's logit r(W_e · x), the rows split anywhere") {
  std::mt19937 rng(7500);
  const uint32_t E = 24, H = 40;
  const std::vector<bf16> W = random_bf16(rng, size_t(E) * H, 0.3), x = random_bf16(rng, H);
  std::vector<float> logits(E, -7.0f);
  const NormSpec none{nullptr, 0, 0.0f};
  router_rows<float>(W.data(), H, x.data(), H, none, 16, 24, logits.data());
  router_rows<float>(W.data(), H, x.data(), H, none, 0, 16, logits.data());
  const Eigen::ArrayXd ref = ref_bf16((to_matrix(W.data(), E, H, H) * to_vector(x.data(), H)).array());
  for (uint32_t e = 0; e < E; ++e) CHECK(bf16_steps(f32_to_bf16(logits[e]), bits_of(ref[e])) <= 1);
}

namespace {

// A random MoE layer: E experts fused as the graph holds them (gate_up [E·2Im, H], down
// [E·H, Im], rows padded), k distinct chosen experts in any order with bf16 weights, and the
// hidden state.
struct RandomExperts {
  uint32_t H, E, k, Im, gu_stride, d_stride, kind;
  std::vector<bf16> gate_up, down, hidden, norm_w;
  std::vector<RoutingSlot> slots;

  explicit RandomExperts(std::mt19937& rng) {
    H = random_in(rng, 1, 200);
    E = random_in(rng, 1, 12);
    k = random_in(rng, 1, E);
    Im = random_in(rng, 1, 40);
    gu_stride = H + random_in(rng, 0, 5);
    d_stride = Im + random_in(rng, 0, 5);
    gate_up = random_bf16(rng, size_t(E) * 2 * Im * gu_stride, 1.0 / std::sqrt(double(H)));
    down = random_bf16(rng, size_t(E) * H * d_stride, 1.0 / std::sqrt(double(Im)));
    hidden = random_bf16(rng, H, 2.0);
    kind = random_in(rng, 0, 1);
    norm_w = random_bf16(rng, H, 0.2, kind == SP_NORM_STANDARD ? 1.0 : 0.0);
    std::vector<uint32_t> experts(E);
    std::iota(experts.begin(), experts.end(), 0u);
    std::shuffle(experts.begin(), experts.end(), rng);
    experts.resize(k);
    for (uint32_t e : experts) slots.push_back({e, bf16_to_f32(random_bf16(rng, 1, 0.3, 0.5)[0])});
  }

  // Expert e's activations r(r(silu(r(g))) · r(u)) of the normed hidden, in double.
  Eigen::ArrayXd reference_act(uint32_t e) const {
    const Eigen::ArrayXd h = to_vector(hidden.data(), H).array();
    const Eigen::VectorXd n = reference_rms_norm(h, to_vector(norm_w.data(), H).array(), kind, 1e-6f).matrix();
    const bf16* gate = gate_up.data() + size_t(e) * 2 * Im * gu_stride;
    const Eigen::ArrayXd g = ref_bf16((to_matrix(gate, Im, H, gu_stride) * n).array());
    const Eigen::ArrayXd u = ref_bf16((to_matrix(gate + size_t(Im) * gu_stride, Im, H, gu_stride) * n).array());
    return ref_bf16(ref_bf16(g / (1.0 + (-g).exp())) * u);
  }
};

}  // namespace

TEST_CASE_TEMPLATE("expert_gate_up_rows: each slot's expert's activations, tiles split anywhere", Acc, float, double) {
  Agreement agree;
  for (uint32_t seed = 0; seed < 60; ++seed) {
    std::mt19937 rng(8000 + seed);
    const RandomExperts m(rng);
    CAPTURE(seed);
    const size_t act_stride = m.Im + random_in(rng, 0, 3);
    std::vector<bf16> act(m.k * act_stride, 0x7FC0);
    const uint32_t tiles = m.k * m.Im, cut = random_in(rng, 0, tiles);
    const ExpertGateUp w{m.gate_up.data(), m.gu_stride, m.Im};
    const NormSpec norm{m.norm_w.data(), m.kind, 1e-6f};
    expert_gate_up_rows<Acc>(w, m.hidden.data(), m.H, norm, m.slots.data(), cut, tiles, act.data(), act_stride);
    expert_gate_up_rows<Acc>(w, m.hidden.data(), m.H, norm, m.slots.data(), 0, cut, act.data(), act_stride);
    for (uint32_t s = 0; s < m.k; ++s)
      agree.add(std::vector<bf16>(act.begin() + s * act_stride, act.begin() + s * act_stride + m.Im),
                to_std(m.reference_act(m.slots[s].expert)));
  }
  check_tile<Acc>(agree);
}

TEST_CASE("expert_gate_up_task: every task routes from the logits, the task of tile 0 alone writes the routing") {
  for (uint32_t seed = 0; seed < 40; ++seed) {
    std::mt19937 rng(8500 + seed);
    const RandomExperts m(rng);
    CAPTURE(seed);
    std::vector<float> logits(m.E);
    for (float& l : logits) l = bf16_to_f32(random_bf16(rng, 1, 2.0)[0]);
    if (m.E > 2) logits[1] = logits[2];  // a tie, broken by the lower expert
    const bool normalise = seed % 2 == 0;
    std::vector<RoutingSlot> expected(m.k), unused(m.k, RoutingSlot{77, 0.5f});
    route<float>(logits.data(), m.E, m.k, normalise, expected.data());
    const size_t act_stride = m.Im;
    const uint32_t tiles = m.k * m.Im, cut = random_in(rng, 1, std::max(1u, tiles - 1));
    std::vector<bf16> act(m.k * act_stride, 0x7FC0), want(m.k * act_stride, 0x7FC0);
    const ExpertGateUp w{m.gate_up.data(), m.gu_stride, m.Im};
    const NormSpec norm{m.norm_w.data(), m.kind, 1e-6f};
    std::vector<RoutingSlot> routing(m.k, RoutingSlot{77, 0.5f});
    expert_gate_up_task<float>(w, m.hidden.data(), m.H, norm, logits.data(), m.E, m.k, normalise, cut, tiles,
                               act.data(), act_stride, routing.data());
    CHECK(std::equal(routing.begin(), routing.end(), unused.begin(), [](RoutingSlot a, RoutingSlot b) {
      return a.expert == b.expert && a.weight == b.weight;
    }));  // not the task of tile 0
    expert_gate_up_task<float>(w, m.hidden.data(), m.H, norm, logits.data(), m.E, m.k, normalise, 0, cut,
                               act.data(), act_stride, routing.data());
    for (uint32_t s = 0; s < m.k; ++s) {
      CHECK(routing[s].expert == expected[s].expert);
      CHECK(routing[s].weight == expected[s].weight);
    }
    expert_gate_up_rows<float>(w, m.hidden.data(), m.H, norm, expected.data(), 0, tiles, want.data(), act_stride);
    CHECK(act == want);
  }
}

TEST_CASE_TEMPLATE("expert_down_rows: r(hidden + r(the sum in slot order of r(w · r(down · act))))", Acc, float,
                   double) {
  Agreement agree;
  for (uint32_t seed = 0; seed < 60; ++seed) {
    std::mt19937 rng(9000 + seed);
    RandomExperts m(rng);
    CAPTURE(seed);
    const std::vector<bf16> act = random_bf16(rng, size_t(m.k) * m.Im);
    Eigen::ArrayXd sum = Eigen::ArrayXd::Zero(m.H);
    for (uint32_t s = 0; s < m.k; ++s) {
      const bf16* Wd = m.down.data() + size_t(m.slots[s].expert) * m.H * m.d_stride;
      const Eigen::ArrayXd y = ref_bf16((to_matrix(Wd, m.H, m.Im, m.d_stride) * to_vector(act.data() + s * m.Im, m.Im)).array());
      sum = sum + ref_bf16(double(m.slots[s].weight) * y);
    }
    const Eigen::ArrayXd ref = ref_bf16(to_vector(m.hidden.data(), m.H).array() + ref_bf16(sum));
    const uint32_t cut = random_in(rng, 0, m.H);
    expert_down_rows<Acc>(m.down.data(), m.d_stride, m.H, m.Im, act.data(), m.Im, m.slots.data(), m.k, cut, m.H,
                          m.hidden.data());
    expert_down_rows<Acc>(m.down.data(), m.d_stride, m.H, m.Im, act.data(), m.Im, m.slots.data(), m.k, 0, cut,
                          m.hidden.data());
    agree.add(m.hidden, to_std(ref));
  }
  check_tile<Acc>(agree);
}

TEST_CASE_TEMPLATE("expert_down_rows with a shared expert: r(hidden + r(r(routed) + r(r(sigmoid(logit)) · r(down_s · act_s))))",
                   Acc, float, double) {
  Agreement agree;
  for (uint32_t seed = 0; seed < 60; ++seed) {
    std::mt19937 rng(9500 + seed);
    RandomExperts m(rng);
    CAPTURE(seed);
    const std::vector<bf16> act = random_bf16(rng, size_t(m.k) * m.Im);
    const uint32_t Is = random_in(rng, 1, 50), s_stride = Is + random_in(rng, 0, 3);
    const std::vector<bf16> Wd_s = random_bf16(rng, size_t(m.H) * s_stride, 0.3), act_s = random_bf16(rng, Is);
    const bf16 logit = random_bf16(rng, 1, 3)[0];
    Eigen::ArrayXd sum = Eigen::ArrayXd::Zero(m.H);
    for (uint32_t s = 0; s < m.k; ++s) {
      const bf16* Wd = m.down.data() + size_t(m.slots[s].expert) * m.H * m.d_stride;
      const Eigen::ArrayXd y = ref_bf16((to_matrix(Wd, m.H, m.Im, m.d_stride) * to_vector(act.data() + s * m.Im, m.Im)).array());
      sum = sum + ref_bf16(double(m.slots[s].weight) * y);
    }
    const Eigen::ArrayXd shared = ref_bf16((to_matrix(Wd_s.data(), m.H, Is, s_stride) * to_vector(act_s.data(), Is)).array());
    const double sigma = ref_bf16(1 / (1 + std::exp(-double(bf16_to_f32(logit)))));
    const Eigen::ArrayXd ref =
        ref_bf16(to_vector(m.hidden.data(), m.H).array() + ref_bf16(ref_bf16(sum) + ref_bf16(sigma * shared)));
    const SharedExpert se{Wd_s.data(), s_stride, Is, act_s.data(), logit};
    const uint32_t cut = random_in(rng, 0, m.H);
    expert_down_rows<Acc>(m.down.data(), m.d_stride, m.H, m.Im, act.data(), m.Im, m.slots.data(), m.k, cut, m.H,
                          m.hidden.data(), &se);
    expert_down_rows<Acc>(m.down.data(), m.d_stride, m.H, m.Im, act.data(), m.Im, m.slots.data(), m.k, 0, cut,
                          m.hidden.data(), &se);
    agree.add(m.hidden, to_std(ref));
  }
  check_tile<Acc>(agree);
}

// EXPERT_DOWN_PIECE and EXPERT_DOWN_SUM (the experts' down tensor-parallel over devices): the
// pieces' dots computed apart, in any order, then summed, give each slot's y_s as a split GEMV's
// row dot (split_row_dot, rounded), weighted and summed in slot order into the residual, with
// the shared expert's term where there is one.
TEST_CASE("expert_down_piece_rows then expert_down_sum_rows: each slot's down dot summed from its pieces as a split "
          "GEMV's, and a shared expert's from its rows or its dots' pieces, split as its own split says") {
  for (uint32_t seed = 0; seed < 40; ++seed) {
    std::mt19937 rng(9800 + seed);
    RandomExperts m(rng);
    const uint32_t S = random_in(rng, 1, 4);  // 1: each slot's whole dot (expert parallel)
    m.Im = S * 8 * random_in(rng, 1, 3);
    m.d_stride = m.Im + 8 * random_in(rng, 0, 2);
    m.down = random_bf16(rng, size_t(m.E) * m.H * m.d_stride, 1.0 / std::sqrt(double(m.Im)));
    const GemvSplit split = S > 1 ? GemvSplit{S, seed % 2 ? S : 1} : GemvSplit{};
    const std::vector<bf16> act = random_bf16(rng, size_t(m.k) * m.Im);
    const uint32_t shared_form = seed % 3;  // 0 none, 1 its down rows, 2 its down dots' pieces
    const bool with_shared = shared_form != 0;
    // The shared expert's split, its own: pieces other than the slots', in groups of 2 or all.
    const uint32_t Ss = random_in(rng, 2, 4);
    const GemvSplit shared_split{Ss, Ss == 4 && seed % 2 ? 2u : Ss};
    const uint32_t Is = Ss * 8 * random_in(rng, 1, 2), Ps = Is / Ss;
    std::vector<bf16> Wd_s = random_bf16(rng, size_t(m.H) * Is, 0.3), act_s = random_bf16(rng, Is);
    if (Ss == 4) {  // pieces 0 and 2 cancel, 2^20 times the others: how the pieces group then shows
      for (uint32_t i = 0; i < Ps; ++i) {
        act_s[i] = to_bf16(std::ldexp(bf16_to_f32(act_s[i]), 20));
        act_s[2 * Ps + i] = to_bf16(-bf16_to_f32(act_s[i]));
        for (uint32_t r = 0; r < m.H; ++r) Wd_s[size_t(r) * Is + 2 * Ps + i] = Wd_s[size_t(r) * Is + i];
      }
    }
    std::vector<float> shared_pieces(size_t(Ss) * m.H, std::nanf(""));
    for (uint32_t j = 0; j < Ss; ++j)
      piece_dot_rows<float>(Wd_s.data() + j * Ps, Is, act_s.data() + j * Ps, Ps, 0, m.H,
                            shared_pieces.data() + size_t(j) * m.H);
    const bf16 logit = random_bf16(rng, 1, 3)[0];
    const SharedExpert se =
        shared_form == 1 ? SharedExpert{Wd_s.data(), Is, Is, act_s.data(), logit}
                         : SharedExpert{nullptr, 0, 0, nullptr, logit, shared_pieces.data(), m.H, shared_split};
    CAPTURE(seed);
    std::vector<bf16> expect = m.hidden;
    for (uint32_t r = 0; r < m.H; ++r) {
      float sum = 0;
      for (uint32_t s = 0; s < m.k; ++s) {
        std::vector<float> a(m.Im);
        for (uint32_t i = 0; i < m.Im; ++i) a[i] = bf16_to_f32(act[s * m.Im + i]);
        const bf16* row = m.down.data() + (size_t(m.slots[s].expert) * m.H + r) * m.d_stride;
        sum = sum + rounded(m.slots[s].weight * rounded(split_row_dot(row, a.data(), m.Im, split)));
      }
      float f = rounded(sum);
      if (with_shared) {
        std::vector<float> a(Is);
        for (uint32_t i = 0; i < Is; ++i) a[i] = bf16_to_f32(act_s[i]);
        const bf16* row = Wd_s.data() + size_t(r) * Is;
        const float dot =
            shared_form == 1 ? row_dot(row, a.data(), Is) : split_row_dot(row, a.data(), Is, shared_split);
        f = add_shared_expert(f, rounded(dot), logit);
      }
      expect[r] = to_bf16(bf16_to_f32(expect[r]) + f);
    }
    const uint32_t P = m.Im / S;
    std::vector<uint32_t> order(S);
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<float> partials(size_t(S) * m.k * m.H, std::nanf(""));
    for (uint32_t j : order)
      expert_down_piece_rows<float>(m.down.data() + j * P, m.d_stride, m.H, P, act.data() + j * P, m.Im,
                                    m.slots.data(), m.k, 0, m.H, partials.data() + size_t(j) * m.k * m.H);
    const uint32_t cut = random_in(rng, 0, m.H);
    expert_down_sum_rows<float>(partials.data(), size_t(m.k) * m.H, split, m.H, m.slots.data(), m.k, cut, m.H,
                                m.hidden.data(), with_shared ? &se : nullptr);
    expert_down_sum_rows<float>(partials.data(), size_t(m.k) * m.H, split, m.H, m.slots.data(), m.k, 0, cut,
                                m.hidden.data(), with_shared ? &se : nullptr);
    CHECK(std::memcmp(m.hidden.data(), expect.data(), m.H * sizeof(bf16)) == 0);
  }
}

TEST_CASE("held experts: the expert tiles compute the slots of the experts held alone, and the devices' shares "
          "summed whole give expert_down_rows' bits") {
  for (uint32_t seed = 0; seed < 40; ++seed) {
    std::mt19937 rng(9900 + seed);
    RandomExperts m(rng);
    CAPTURE(seed);
    // The experts cut into N contiguous holdings of any sizes, each held by one device.
    const uint32_t N = random_in(rng, 2, 4);
    std::vector<uint32_t> cuts = {0, m.E};
    for (uint32_t d = 1; d < N; ++d) cuts.push_back(random_in(rng, 0, m.E));
    std::sort(cuts.begin(), cuts.end());
    const uint32_t tiles = m.k * m.Im;
    const ExpertGateUp w{m.gate_up.data(), m.gu_stride, m.Im};
    const NormSpec norm{m.norm_w.data(), m.kind, 1e-6f};
    std::vector<bf16> every(size_t(m.k) * m.Im, 0x7FC0), act = every;
    expert_gate_up_rows<float>(w, m.hidden.data(), m.H, norm, m.slots.data(), 0, tiles, every.data(), m.Im);
    std::vector<float> partials(size_t(m.k) * m.H, std::nanf(""));
    for (uint32_t d = 0; d < N; ++d) {
      const HeldExperts held{cuts[d], cuts[d + 1] - cuts[d]};
      if (held.count == 0) continue;  // a count of 0 holds every expert
      std::vector<bf16> mine(size_t(m.k) * m.Im, 0x7FC0);
      expert_gate_up_rows<float>(w, m.hidden.data(), m.H, norm, m.slots.data(), 0, tiles, mine.data(), m.Im, held);
      expert_down_piece_rows<float>(m.down.data(), m.d_stride, m.H, m.Im, every.data(), m.Im, m.slots.data(), m.k, 0,
                                    m.H, partials.data(), held);
      for (uint32_t s = 0; s < m.k; ++s) {
        const bool ours = m.slots[s].expert >= cuts[d] && m.slots[s].expert < cuts[d + 1];
        CAPTURE(s);
        CHECK(held.holds(m.slots[s].expert) == ours);
        for (uint32_t r = 0; r < m.Im; ++r) {
          const size_t i = size_t(s) * m.Im + r;
          CHECK(mine[i] == (ours ? every[i] : bf16(0x7FC0)));
          if (ours) act[i] = mine[i];
        }
      }
    }
    CHECK(act == every);  // every slot's rows, each from the device holding its expert
    std::vector<bf16> expect = m.hidden, got = m.hidden;
    expert_down_rows<float>(m.down.data(), m.d_stride, m.H, m.Im, every.data(), m.Im, m.slots.data(), m.k, 0, m.H,
                            expect.data());
    expert_down_sum_rows<float>(partials.data(), size_t(m.k) * m.H, GemvSplit{}, m.H, m.slots.data(), m.k, 0, m.H,
                                got.data());
    CHECK(std::memcmp(got.data(), expect.data(), m.H * sizeof(bf16)) == 0);
  }
}
