// The MLP gang task (ops/mlp.h) against an Eigen reference of the MLP in double, against the
// GEMV down split it must equal bit for bit, and with its members run in any order.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

#include "ops/mlp.h"
#include "tests/ops_reference.h"

using namespace spindle;
using namespace spindle::test;

namespace {

// A random MLP of hidden size H and intermediate size I = pieces * P, in gangs of `width`,
// with padded weight rows, and its partials and arrivals.
struct RandomMlp {
  uint32_t H, P, pieces, width, gu_stride, d_stride;
  std::vector<bf16> Wg, Wu, Wd, hidden, norm_w;
  std::vector<float> partials;
  std::vector<uint32_t> arrivals;
  uint32_t kind;

  explicit RandomMlp(std::mt19937& rng) {
    H = random_in(rng, 1, 300);
    P = 8 * random_in(rng, 1, 6);
    width = random_in(rng, 1, 6);
    pieces = width * random_in(rng, 1, 4);
    const uint32_t I = pieces * P;
    gu_stride = H + random_in(rng, 0, 9);
    d_stride = I + 8 * random_in(rng, 0, 2);
    Wg = random_bf16(rng, size_t(I) * gu_stride, 1.0 / std::sqrt(double(H)));
    Wu = random_bf16(rng, size_t(I) * gu_stride, 1.0 / std::sqrt(double(H)));
    Wd = random_bf16(rng, size_t(H) * d_stride, 1.0 / std::sqrt(double(I)));
    hidden = random_bf16(rng, H, 2.0);
    kind = random_in(rng, 0, 1);
    norm_w = random_bf16(rng, H, 0.2, kind == SP_NORM_STANDARD ? 1.0 : 0.0);
    partials.assign(size_t(pieces + pieces / width) * H, -3.0f);
    arrivals.assign(width, 0);
  }
  uint32_t I() const { return pieces * P; }

  // Rank `rank`'s record of the gang holding piece `index`, and the op's arguments for it.
  SpTask record(uint32_t index) const {
    SpTask t{};
    t.op = SP_OP_MLP;
    t.tile_begin = index * P;
    t.tile_end = t.tile_begin + P;
    t.gang_width = uint8_t(width);
    t.gang_rank = uint8_t(width > 1 ? index % width : 0);
    return t;
  }
  MlpArgs args(uint32_t index) {
    const SpView Wd_view{0, SP_BF16, 0, 0, H, I(), d_stride, 0};
    return {Wg.data(), Wu.data(), Wd.data(), gu_stride, d_stride, hidden.data(), {norm_w.data(), kind, 1e-6f},
            partials.data(), H, arrivals.data(), mlp_shape(record(index), Wd_view)};
  }

  // r(hidden + r(Wd · act)) in double, act = r(r(silu(r(g))) · r(u)) of the normed hidden.
  Eigen::ArrayXd reference() const {
    const Eigen::ArrayXd h = to_vector(hidden.data(), H).array();
    const Eigen::VectorXd n = reference_rms_norm(h, to_vector(norm_w.data(), H).array(), kind, 1e-6f).matrix();
    const Eigen::ArrayXd g = ref_bf16((to_matrix(Wg.data(), I(), H, gu_stride) * n).array());
    const Eigen::ArrayXd u = ref_bf16((to_matrix(Wu.data(), I(), H, gu_stride) * n).array());
    const Eigen::ArrayXd act = ref_bf16(ref_bf16(g / (1.0 + (-g).exp())) * u);
    const Eigen::ArrayXd y = ref_bf16((to_matrix(Wd.data(), H, I(), d_stride) * act.matrix()).array());
    return ref_bf16(h + y);
  }
};

template <class Acc>
void run_whole(RandomMlp& m) {
  for (uint32_t first = 0; first < m.pieces; first += m.width) mlp_gang_whole<Acc>(m.args(first));
}

}  // namespace

// The pieces and the gangs' sums are f32 in every executor (as attention's partials), so the
// fp64 build is held to the fp32 bound.
TEST_CASE_TEMPLATE("mlp_gang_whole: the MLP of the reference, in place, the arrivals back at 0", Acc, float, double) {
  Agreement agree;
  for (uint32_t seed = 0; seed < 60; ++seed) {
    std::mt19937 rng(4000 + seed);
    RandomMlp m(rng);
    CAPTURE(seed);
    const Eigen::ArrayXd ref = m.reference();
    run_whole<Acc>(m);
    agree.add(m.hidden, to_std(ref));
    for (uint32_t a : m.arrivals) REQUIRE(a == 0);
  }
  check_fp32(agree);
}

TEST_CASE("mlp: bit for bit gate_up then a GEMV down split pieces/width with the hidden as residual") {
  for (uint32_t seed = 0; seed < 60; ++seed) {
    std::mt19937 rng(5000 + seed);
    RandomMlp m(rng);
    CAPTURE(seed);
    CAPTURE(m.pieces);
    CAPTURE(m.width);
    std::vector<bf16> act(m.I()), split_out = m.hidden;
    const NormSpec norm{m.norm_w.data(), m.kind, 1e-6f};
    gate_up_rows<float>(m.Wg.data(), m.Wu.data(), m.gu_stride, m.hidden.data(), m.H, norm, 0, m.I(), act.data());
    gemv_rows<float>(m.Wd.data(), m.d_stride, act.data(), m.I(), {nullptr, 0, 0.0f}, 0, m.H, split_out.data(),
                     split_out.data(), nullptr, {m.pieces, m.width});
    run_whole<float>(m);
    CHECK(m.hidden == split_out);
  }
}

TEST_CASE("mlp: members run at once, in any order, give the whole gangs' bits") {
  for (uint32_t seed = 0; seed < 30; ++seed) {
    std::mt19937 rng(6000 + seed);
    RandomMlp whole(rng);
    RandomMlp members = whole;
    CAPTURE(seed);
    run_whole<float>(whole);
    // Phase 0 of every member in a random order; then phase 1 of every (gang, rank) in another.
    std::vector<uint32_t> order(members.pieces);
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin(), order.end(), rng);
    for (uint32_t j : order) mlp_piece<float>(members.args(j), j);
    std::shuffle(order.begin(), order.end(), rng);
    for (uint32_t j : order) mlp_gang_sum<float>(members.args(j), j / members.width, j % members.width);
    CHECK(members.hidden == whole.hidden);
    CHECK(members.partials == whole.partials);
  }
}
