// GEMV and GATE_UP row tiles (ops/gemv.h) against Eigen references in double.
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>

#include "ops/gemv.h"
#include "tests/ops_reference.h"

using namespace spindle;
using namespace spindle::test;

namespace {

// A random projection: W [rows, K] with padded rows, its input, an optional norm, a tile.
struct Projection {
  uint32_t rows, K, stride, r0, r1;
  std::vector<bf16> W, x, norm_w;
  uint32_t kind = SP_NORM_STANDARD;
  float eps = 1e-6f;

  explicit Projection(std::mt19937& rng, bool with_norm) {
    rows = random_in(rng, 1, 300);
    K = random_in(rng, 1, 1500);
    stride = K + random_in(rng, 0, 40);
    r0 = random_in(rng, 0, rows - 1);
    r1 = random_in(rng, r0 + 1, rows);
    W = random_bf16(rng, size_t(rows) * stride, 1.0 / std::sqrt(double(K)));
    x = random_bf16(rng, K, std::ldexp(1.0, int(random_in(rng, 0, 8)) - 4));
    if (with_norm) {
      kind = random_in(rng, 0, 1);
      norm_w = random_bf16(rng, K, 0.2, kind == SP_NORM_STANDARD ? 1.0 : 0.0);
    }
  }
  NormSpec norm() const { return {norm_w.empty() ? nullptr : norm_w.data(), kind, eps}; }

  // The vector W multiplies, in double: RMSNorm(x) or x.
  Eigen::ArrayXd input() const {
    const Eigen::ArrayXd xd = to_vector(x.data(), K).array();
    return norm_w.empty() ? xd : reference_rms_norm(xd, to_vector(norm_w.data(), K).array(), kind, eps);
  }
  // r(W[r0:r1] · n) in double.
  Eigen::ArrayXd projected(const std::vector<bf16>& w) const {
    const Eigen::MatrixXd Wd = to_matrix(w.data() + size_t(r0) * stride, r1 - r0, K, stride);
    return ref_bf16((Wd * input().matrix()).array());
  }
};

}  // namespace

TEST_CASE_TEMPLATE("gemv_rows: bf16 out with and without norm and residual", Acc, float, double) {
  Agreement agree;
  for (uint32_t seed = 0; seed < 80; ++seed) {
    std::mt19937 rng(1000 + seed);
    const Projection p(rng, seed % 2 == 0);
    const bool with_residual = seed % 4 >= 2;
    CAPTURE(seed);
    const std::vector<bf16> res = random_bf16(rng, p.rows, 2.0);
    Eigen::ArrayXd ref = p.projected(p.W);
    if (with_residual) ref = ref_bf16(to_vector(res.data() + p.r0, p.r1 - p.r0).array() + ref);

    // The residual aliases the output, as the o_proj and down projections use it.
    std::vector<bf16> out = res;
    gemv_rows<Acc>(p.W.data(), p.stride, p.x.data(), p.K, p.norm(), p.r0, p.r1, out.data(),
                   with_residual ? out.data() : nullptr, nullptr);
    agree.add({out.begin() + p.r0, out.begin() + p.r1}, to_std(ref));
    for (uint32_t r = 0; r < p.rows; ++r)
      if (r < p.r0 || r >= p.r1) REQUIRE(out[r] == res[r]);  // rows outside the tile untouched
  }
  check_tile<Acc>(agree);
}

TEST_CASE_TEMPLATE("gemv_rows: f32 logits hold bf16 values and the argmax partial", Acc, float, double) {
  Agreement agree;
  for (uint32_t seed = 0; seed < 40; ++seed) {
    std::mt19937 rng(2000 + seed);
    const Projection p(rng, true);
    CAPTURE(seed);
    std::vector<float> logits(p.rows, -7.0f);
    ArgmaxPartial best{};
    gemv_rows<Acc>(p.W.data(), p.stride, p.x.data(), p.K, p.norm(), p.r0, p.r1, logits.data(), nullptr, &best);
    std::vector<bf16> tile;
    for (uint32_t r = p.r0; r < p.r1; ++r) {
      REQUIRE(logits[r] == round_bf16(logits[r]));
      tile.push_back(f32_to_bf16(logits[r]));
    }
    agree.add(tile, to_std(p.projected(p.W)));
    const auto top = std::max_element(logits.begin() + p.r0, logits.begin() + p.r1);
    CHECK(best.index == uint32_t(top - logits.begin()));
    CHECK(best.value == *top);
  }
  check_tile<Acc>(agree);
}

TEST_CASE_TEMPLATE("gemv_rows: a split dot agrees with the reference as the plain one does", Acc, float, double) {
  Agreement agree;
  for (uint32_t seed = 0; seed < 60; ++seed) {
    std::mt19937 rng(2500 + seed);
    Projection p(rng, seed % 2 == 0);
    // Rows of whole octets, cut into 2..16 pieces of whole octets, in groups that divide them.
    const uint32_t pieces = random_in(rng, 2, 16), octets = random_in(rng, 1, 12);
    p.K = pieces * octets * 8;
    p.stride = p.K + 8 * random_in(rng, 0, 3);
    p.W = random_bf16(rng, size_t(p.rows) * p.stride, 1.0 / std::sqrt(double(p.K)));
    p.x = random_bf16(rng, p.K, 1.0);
    if (!p.norm_w.empty()) p.norm_w = random_bf16(rng, p.K, 0.2, p.kind == SP_NORM_STANDARD ? 1.0 : 0.0);
    std::vector<uint32_t> groups;
    for (uint32_t g = 1; g <= pieces; ++g)
      if (pieces % g == 0) groups.push_back(g);
    const GemvSplit split{pieces, groups[random_in(rng, 0, uint32_t(groups.size() - 1))]};
    CAPTURE(seed);
    CAPTURE(split.pieces);
    CAPTURE(split.group);
    std::vector<bf16> out(p.rows);
    gemv_rows<Acc>(p.W.data(), p.stride, p.x.data(), p.K, p.norm(), p.r0, p.r1, out.data(), nullptr, nullptr, split);
    agree.add({out.begin() + p.r0, out.begin() + p.r1}, to_std(p.projected(p.W)));
  }
  check_tile<Acc>(agree);
}

// GEMV pieces (opcodes.h SP_OP_GEMV_PIECE) must give the split GEMV's rows, in whatever order
// the pieces finish: each piece's view is its columns of W (row stride K) and its slice of x, and
// the last to count in sums them. With float the bits are the split GEMV's; with double (the
// fp64 executor) each piece's dot is rounded to its f32 partial, so a row may differ from the
// double split GEMV's by one bf16 step, and any two orders give the same bits.
TEST_CASE_TEMPLATE("gemv_piece_rows: the pieces, finishing in any order, give the split GEMV's rows", Acc, float,
                   double) {
  for (uint32_t seed = 0; seed < 60; ++seed) {
    std::mt19937 rng(3100 + seed);
    const uint32_t pieces = random_in(rng, 2, 12), P = 8 * random_in(rng, 1, 40), K = pieces * P;
    const uint32_t rows = random_in(rng, 1, 200), stride = K + 8 * random_in(rng, 0, 3);
    const uint32_t r0 = random_in(rng, 0, rows - 1), r1 = random_in(rng, r0 + 1, rows);
    std::vector<uint32_t> groups;
    for (uint32_t g = 1; g <= pieces; ++g)
      if (pieces % g == 0) groups.push_back(g);
    const GemvSplit split{pieces, groups[random_in(rng, 0, uint32_t(groups.size() - 1))]};
    const std::vector<bf16> W = random_bf16(rng, size_t(rows) * stride, 1.0 / std::sqrt(double(K)));
    const std::vector<bf16> x = random_bf16(rng, K, 1.0), res = random_bf16(rng, rows, 2.0);
    const bool with_residual = seed % 2 == 0;
    CAPTURE(seed);
    CAPTURE(split.pieces);
    CAPTURE(split.group);
    std::vector<bf16> expect = res;  // the residual aliases the output, as o_proj's does
    gemv_rows<Acc>(W.data(), stride, x.data(), K, NormSpec{}, r0, r1, expect.data(),
                   with_residual ? expect.data() : nullptr, nullptr, split);
    const auto run_pieces = [&] {  // the pieces in a random order
      std::vector<uint32_t> order(pieces);
      std::iota(order.begin(), order.end(), 0u);
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<float> partials(size_t(pieces) * rows);
      std::vector<bf16> got = res;
      uint32_t arrivals = 0;
      for (uint32_t j : order)
        gemv_piece_rows<Acc>(W.data() + j * P, stride, x.data() + j * P, P, r0, r1, partials.data(), rows,
                             GemvPiece{j, 0, split}, arrivals, got.data(), with_residual ? got.data() : nullptr);
      CHECK(arrivals == 0);  // the last piece reset it for the next step
      return got;
    };
    const std::vector<bf16> got = run_pieces();
    if constexpr (std::is_same_v<Acc, float>) {
      CHECK(std::memcmp(got.data(), expect.data(), rows * sizeof(bf16)) == 0);
    } else {
      const std::vector<bf16> again = run_pieces();
      CHECK(std::memcmp(got.data(), again.data(), rows * sizeof(bf16)) == 0);
      for (uint32_t r = 0; r < rows; ++r) {
        CAPTURE(r);
        CHECK(bf16_steps(got[r], expect[r]) <= 1);
      }
    }
  }
}

// PIECE_DOTS and PIECE_SUM (a row-parallel projection over devices): the pieces' dots computed
// apart, in any order, into their partial rows, then summed by another call, give the split
// GEMV's rows (float: the CPU executors that run several devices; gemv_piece_rows' test covers
// double's rounding of the partials, which these functions make for it).
TEST_CASE("piece_dot_rows then piece_sum_rows: pieces computed apart and summed once give the split GEMV's rows") {
  for (uint32_t seed = 0; seed < 40; ++seed) {
    std::mt19937 rng(3700 + seed);
    const uint32_t pieces = random_in(rng, 2, 8), P = 8 * random_in(rng, 1, 30), K = pieces * P;
    const uint32_t rows = random_in(rng, 1, 150), stride = K + 8 * random_in(rng, 0, 3);
    const uint32_t r0 = random_in(rng, 0, rows - 1), r1 = random_in(rng, r0 + 1, rows);
    const GemvSplit split{pieces, seed % 2 ? pieces : 1};
    const std::vector<bf16> W = random_bf16(rng, size_t(rows) * stride, 1.0 / std::sqrt(double(K)));
    const std::vector<bf16> x = random_bf16(rng, K, 1.0), res = random_bf16(rng, rows, 2.0);
    const bool with_residual = seed % 3 != 0;
    CAPTURE(seed);
    std::vector<bf16> expect = res;
    gemv_rows<float>(W.data(), stride, x.data(), K, NormSpec{}, r0, r1, expect.data(),
                     with_residual ? expect.data() : nullptr, nullptr, split);
    std::vector<uint32_t> order(pieces);
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<float> partials(size_t(pieces) * rows, std::nanf(""));
    for (uint32_t j : order)
      piece_dot_rows<float>(W.data() + j * P, stride, x.data() + j * P, P, r0, r1, partials.data() + size_t(j) * rows);
    std::vector<bf16> got = res;
    piece_sum_rows<float>(partials.data(), rows, split, r0, r1, got.data(), with_residual ? got.data() : nullptr);
    CHECK(std::memcmp(got.data(), expect.data(), rows * sizeof(bf16)) == 0);
  }
}

TEST_CASE("split_row_dot: pieces from their own first column, summed in groups, then the groups") {
  std::mt19937 rng(77);
  const uint32_t K = 4 * 264;  // 4 pieces of 264: each longer than one 256-element block
  const std::vector<bf16> w = random_bf16(rng, K), x = random_bf16(rng, K);
  std::vector<float> n(K);
  for (uint32_t k = 0; k < K; ++k) n[k] = bf16_to_f32(x[k]);
  float d[4];
  for (uint32_t j = 0; j < 4; ++j)
    d[j] = canonical_dot<float>(264, [&](int k) { return bf16_to_f32(w[264 * j + k]); },
                                [&](int k) { return n[264 * j + k]; });
  CHECK(split_row_dot(w.data(), n.data(), K, {4, 2}) == (d[0] + d[1]) + (d[2] + d[3]));
  CHECK(split_row_dot(w.data(), n.data(), K, {4, 4}) == ((d[0] + d[1]) + d[2]) + d[3]);
  CHECK(split_row_dot(w.data(), n.data(), K, {4, 1}) == ((d[0] + d[1]) + d[2]) + d[3]);
  CHECK(split_row_dot(w.data(), n.data(), K, {}) == row_dot(w.data(), n.data(), K));
  CHECK(split_row_dot(w.data(), n.data(), K, {1, 1}) == row_dot(w.data(), n.data(), K));
}

TEST_CASE("gemv_split: the operand word, and the splits rows cannot take") {
  CHECK(gemv_split(0).pieces == 1);
  CHECK(gemv_split(1).pieces == 1);
  CHECK(gemv_split(8).pieces == 8);
  CHECK(gemv_split(8).group == 8);  // no group: all the pieces
  CHECK(gemv_split(128u | 16u << 16).group == 16);
  CHECK(gemv_split_word(128, 16) == (128u | 16u << 16));
  CHECK(gemv_split_word(1, 0) == 0);
  CHECK(gemv_split_problem(0, 1000) == nullptr);
  CHECK(gemv_split_problem(gemv_split_word(8, 0), 2048) == nullptr);
  CHECK(gemv_split_problem(gemv_split_word(128, 16), 3072) == nullptr);  // qwen3-0.6b's down: 24 columns a piece
  CHECK(std::string(gemv_split_problem(gemv_split_word(7, 0), 2048)).find("divide the row length") != std::string::npos);
  CHECK(std::string(gemv_split_problem(gemv_split_word(256, 0), 3072)).find("whole octets") != std::string::npos);
  CHECK(std::string(gemv_split_problem(gemv_split_word(128, 24), 3072)).find("groups do not divide") !=
        std::string::npos);
  CHECK(std::string(gemv_split_problem(1u | 4u << 16, 3072)).find("fewer than 2 pieces") != std::string::npos);
}

TEST_CASE("gemv_rows: argmax ties go to the first row, and the first row that is not finite wins as NaN") {
  const uint32_t K = 300, rows = 6;
  std::mt19937 rng(5);
  const std::vector<bf16> row = random_bf16(rng, K), x = random_bf16(rng, K);
  std::vector<bf16> W;
  for (uint32_t r = 0; r < rows; ++r) W.insert(W.end(), row.begin(), row.end());
  W[0] = 0x7fc0;  // row 0 gives NaN
  for (uint32_t k = 0; k < K; ++k) W[size_t(4) * K + k] = row[k] ^ 0x8000;  // row 4 the negation
  std::vector<float> out(rows);
  ArgmaxPartial best{};
  gemv_rows<float>(W.data(), K, x.data(), K, {nullptr, 0, 0}, 1, rows, out.data(), nullptr, &best);
  const uint32_t want = out[1] >= out[4] ? 1 : 4;  // rows 1, 2, 3, 5 tie
  CHECK(best.index == want);
  CHECK(best.value == out[want]);

  gemv_rows<float>(W.data(), K, x.data(), K, {nullptr, 0, 0}, 0, rows, out.data(), nullptr, &best);
  CHECK(std::isnan(out[0]));
  CHECK(best.index == 0);
  CHECK(argmax_marks_nonfinite(best));

  const uint32_t k = uint32_t(std::find_if(x.begin(), x.end(), [](bf16 v) { return (v & 0x7fff) != 0; }) - x.begin());
  W[size_t(3) * K + k] = 0x7f80;  // row 3: an infinite weight times a nonzero input is infinite
  W[size_t(5) * K + k] = 0x7f80;
  gemv_rows<float>(W.data(), K, x.data(), K, {nullptr, 0, 0}, 1, rows, out.data(), nullptr, &best);
  CHECK(std::isinf(out[3]));
  CHECK(best.index == 3);
  CHECK(argmax_marks_nonfinite(best));

  best = {};
  gemv_rows<float>(W.data(), K, x.data(), K, {nullptr, 0, 0}, 2, 2, out.data(), nullptr, &best);
  CHECK(best.index == 2);  // no rows: the identity, which every offer replaces
  CHECK(best.value == -INFINITY);
}

TEST_CASE("argmax_of_partials: ties keep the earlier slot, and the first NaN mark wins") {
  const float nan = NAN;
  const ArgmaxPartial p[] = {{2.0f, 10}, {3.0f, 20}, {3.0f, 30}, {-INFINITY, 50}, {nan, 60}, {4.0f, 70}, {nan, 80}};
  CHECK(argmax_of_partials(p, 4).index == 20);
  CHECK(argmax_of_partials(p, 4).value == 3.0f);
  CHECK(argmax_of_partials(p, 1).index == 10);
  CHECK(argmax_of_partials(p, 7).index == 60);
  CHECK(argmax_marks_nonfinite(argmax_of_partials(p, 7)));
  CHECK(argmax_of_partials(p + 5, 2).index == 80);  // a number, then the mark
  const ArgmaxPartial none[] = {argmax_none(5), argmax_none(9)};
  CHECK(argmax_of_partials(none, 2).index == 5);
  CHECK(!argmax_marks_nonfinite(argmax_of_partials(none, 2)));
}

TEST_CASE("argmax_offer_logit: infinities and NaN are offered as the NaN mark") {
  for (const float bad : {INFINITY, -INFINITY, NAN}) {
    ArgmaxPartial best = argmax_none(0);
    argmax_offer_logit(best, 1.0f, 0);
    argmax_offer_logit(best, bad, 1);
    argmax_offer_logit(best, 2.0f, 2);
    argmax_offer_logit(best, bad, 3);
    CHECK(best.index == 1);
    CHECK(argmax_marks_nonfinite(best));
  }
  ArgmaxPartial best = argmax_none(0);
  argmax_offer_logit(best, -FLT_MAX, 0);
  argmax_offer_logit(best, FLT_MAX, 1);
  CHECK(best.index == 1);
  CHECK(best.value == FLT_MAX);
}

TEST_CASE_TEMPLATE("gate_up_rows: SwiGLU of the two projections", Acc, float, double) {
  Agreement agree;
  for (uint32_t seed = 0; seed < 60; ++seed) {
    std::mt19937 rng(3000 + seed);
    const Projection p(rng, true);
    const std::vector<bf16> Wu = random_bf16(rng, p.W.size(), 1.0 / std::sqrt(double(p.K)));
    CAPTURE(seed);
    const Eigen::ArrayXd g = p.projected(p.W), u = p.projected(Wu);
    const Eigen::ArrayXd ref = ref_bf16(ref_bf16(g / (1.0 + (-g).exp())) * u);

    std::vector<bf16> act(p.rows, 0x1234);
    gate_up_rows<Acc>(p.W.data(), Wu.data(), p.stride, p.x.data(), p.K, p.norm(), p.r0, p.r1, act.data());
    agree.add({act.begin() + p.r0, act.begin() + p.r1}, to_std(ref));
    for (uint32_t r = 0; r < p.rows; ++r)
      if (r < p.r0 || r >= p.r1) REQUIRE(act[r] == 0x1234);
  }
  check_tile<Acc>(agree);
}
