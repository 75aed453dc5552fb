// The RoPE table and the per-head norm and RoPE (ops/qk_norm_rope.h) against Eigen references.
#include <doctest/doctest.h>

#include "ops/qk_norm_rope.h"
#include "tests/ops_reference.h"

using namespace spindle;
using namespace spindle::test;

TEST_CASE("fill_rope_table: the HF fp32 recipe as cos then sin rows") {
  Agreement agree;
  for (uint32_t seed = 0; seed < 12; ++seed) {
    std::mt19937 rng(4000 + seed);
    const float theta = seed % 3 == 0 ? 10000.0f : seed % 3 == 1 ? 1000000.0f : 5000000.0f;
    const uint32_t R = 2 * random_in(rng, 1, 128), context = random_in(rng, 1, 3000);
    CAPTURE(seed);
    std::vector<bf16> table(size_t(context) * R);
    fill_rope_table(theta, R, context, table.data());

    // Eigen's own float pow and vectorised cos/sin over the same fp32 angles.
    const Eigen::ArrayXf exps = Eigen::ArrayXf::LinSpaced(R / 2, 0.0f, float(R - 2)) / float(R);
    const Eigen::ArrayXf inv_freq = 1.0f / Eigen::pow(theta, exps);
    for (uint32_t p = 0; p < context; ++p) {
      const Eigen::ArrayXf angle = inv_freq * float(p);
      const std::vector<bf16> row(table.begin() + size_t(p) * R, table.begin() + size_t(p + 1) * R);
      Eigen::ArrayXd want(R);
      want << ref_bf16(angle.cos().cast<double>()), ref_bf16(angle.sin().cast<double>());
      agree.add(row, to_std(want));
      if (p == 0) {
        for (uint32_t i = 0; i < R / 2; ++i) CHECK((row[i] == 0x3f80 && row[R / 2 + i] == 0));
      }
    }
  }
  INFO("n=" << agree.n << " equal=" << agree.equal << " max_steps=" << agree.max_steps);
  CHECK(agree.max_steps <= 1);  // the two cos/sin implementations may straddle a rounding point
  CHECK(agree.equal >= 0.999 * agree.n);
}

TEST_CASE_TEMPLATE("norm_rope_head: RMSNorm then rotate-half of the first R dims", Acc, float, double) {
  Agreement agree;
  for (uint32_t seed = 0; seed < 200; ++seed) {
    std::mt19937 rng(5000 + seed);
    const uint32_t D = 2 * random_in(rng, 1, 128);
    const uint32_t choice = random_in(rng, 0, 2);  // full, a quarter (as qwen3.5), any even
    const uint32_t R = choice == 0 ? D : choice == 1 ? std::max(2u, D / 4 / 2 * 2) : 2 * random_in(rng, 1, D / 2);
    const uint32_t kind = random_in(rng, 0, 1), position = random_in(rng, 0, 39);
    const float eps = 1e-6f;
    CAPTURE(seed);
    const std::vector<bf16> x = random_bf16(rng, D, std::ldexp(1.0, int(random_in(rng, 0, 6)) - 3));
    const std::vector<bf16> w = random_bf16(rng, D, 0.2, kind == SP_NORM_STANDARD ? 1.0 : 0.0);
    std::vector<bf16> table(size_t(position + 1) * R);
    fill_rope_table(1000000.0f, R, position + 1, table.data());
    const bf16* row = table.data() + size_t(position) * R;
    std::vector<bf16> out(D);
    norm_rope_head<Acc>(x.data(), D, R, {w.data(), kind, eps}, row, out.data());
    agree.add(out, to_std(reference_norm_rope(to_vector(x.data(), D).array(), to_vector(w.data(), D).array(), kind,
                                              eps, to_vector(row, R).array())));
  }
  check_tile<Acc>(agree);
}

TEST_CASE("rope_pair: the rotate-half formula with its bf16 rounding points") {
  bf16 lo, hi;
  rope_pair<float>(1.0f, 0.0f, 0.0f, 1.0f, lo, hi);  // 90 degrees: (1, 0) -> (0, 1)
  CHECK(bf16_to_f32(lo) == 0.0f);
  CHECK(bf16_to_f32(hi) == 1.0f);
  // Each product is rounded before the sum: a·c = 0.63381958 rounds to 0.6328125, minus
  // r(0.5·0.5) gives 0.3828125, where one rounding of a·c − b·s would give 0.384765625.
  rope_pair<float>(1.0078125f, 0.5f, 0.62890625f, 0.5f, lo, hi);
  CHECK(bf16_to_f32(lo) == 0.3828125f);
}
