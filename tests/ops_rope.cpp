// The RoPE table and QK_NORM_ROPE (ops/qk_norm_rope.h) against Eigen references.
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

namespace {

struct RopeCase {
  uint32_t Hq, Hkv, D, R, context, position, stride, kind;
  float eps = 1e-6f;
  std::vector<bf16> qkv, q_norm, k_norm, rope_table;

  explicit RopeCase(std::mt19937& rng) {
    Hkv = random_in(rng, 1, 4);
    Hq = Hkv * random_in(rng, 1, 4);
    D = 2 * random_in(rng, 1, 128);
    const uint32_t choice = random_in(rng, 0, 2);  // full, a quarter (as qwen3.5), any even
    R = choice == 0 ? D : choice == 1 ? std::max(2u, D / 4 / 2 * 2) : 2 * random_in(rng, 1, D / 2);
    context = random_in(rng, 1, 40);
    position = random_in(rng, 0, context - 1);
    stride = D + random_in(rng, 0, 8);
    kind = random_in(rng, 0, 1);
    qkv = random_bf16(rng, size_t(Hq + 2 * Hkv) * D, std::ldexp(1.0, int(random_in(rng, 0, 6)) - 3));
    q_norm = random_bf16(rng, D, 0.2, kind == SP_NORM_STANDARD ? 1.0 : 0.0);
    k_norm = random_bf16(rng, D, 0.2, kind == SP_NORM_STANDARD ? 1.0 : 0.0);
    rope_table.resize(size_t(context) * R);
    fill_rope_table(1000000.0f, R, context, rope_table.data());
  }

  // Head h of qkv normalised with w and rotated, in double (spec 1.6 with bf16 arithmetic).
  Eigen::ArrayXd reference_head(uint32_t h, const std::vector<bf16>& w) const {
    const Eigen::ArrayXd y = reference_rms_norm(to_vector(qkv.data() + size_t(h) * D, D).array(),
                                                to_vector(w.data(), D).array(), kind, eps);
    const Eigen::ArrayXd cs = to_vector(rope_table.data() + size_t(position) * R, R).array();
    const uint32_t half = R / 2;
    const Eigen::ArrayXd a = y.head(half), b = y.segment(half, half);
    const Eigen::ArrayXd c = cs.head(half), s = cs.tail(half);
    Eigen::ArrayXd out = y;
    out.head(half) = ref_bf16(ref_bf16(a * c) - ref_bf16(b * s));
    out.segment(half, half) = ref_bf16(ref_bf16(b * c) + ref_bf16(a * s));
    return out;
  }
};

}  // namespace

TEST_CASE_TEMPLATE("qk_norm_rope_heads: q out and cache rows with partial rotary and GQA", Acc, float, double) {
  Agreement agree;
  for (uint32_t seed = 0; seed < 60; ++seed) {
    std::mt19937 rng(5000 + seed);
    const RopeCase c(rng);
    CAPTURE(seed);
    const bf16 untouched = 0x7fc1;
    std::vector<bf16> q_out(size_t(c.Hq) * c.D, untouched);
    std::vector<bf16> k_cache(size_t(c.Hkv) * c.context * c.stride, untouched), v_cache = k_cache;
    const QkNormRopeArgs args{c.qkv.data(), c.q_norm.data(), c.k_norm.data(), q_out.data(), k_cache.data(),
                              v_cache.data(), c.stride, c.rope_table.data() + size_t(c.position) * c.R,
                              c.Hq, c.Hkv, c.D, c.R, c.context, c.position, c.kind, c.eps};
    // The heads in a few tasks, as a graph splits them.
    const uint32_t heads = c.Hq + 2 * c.Hkv, split = random_in(rng, 0, heads);
    qk_norm_rope_heads<Acc>(args, split, heads);
    qk_norm_rope_heads<Acc>(args, 0, split);

    for (uint32_t h = 0; h < c.Hq; ++h)
      agree.add({q_out.begin() + size_t(h) * c.D, q_out.begin() + size_t(h + 1) * c.D},
                to_std(c.reference_head(h, c.q_norm)));
    for (uint32_t j = 0; j < c.Hkv; ++j) {
      const size_t row = (size_t(j) * c.context + c.position) * c.stride;
      agree.add({k_cache.begin() + row, k_cache.begin() + row + c.D}, to_std(c.reference_head(c.Hq + j, c.k_norm)));
      const bf16* v = c.qkv.data() + size_t(c.Hq + c.Hkv + j) * c.D;
      CHECK(std::equal(v, v + c.D, v_cache.begin() + row));
    }
    // Nothing else in the caches is written.
    size_t written = 0;
    for (size_t i = 0; i < k_cache.size(); ++i) written += (k_cache[i] != untouched) + (v_cache[i] != untouched);
    CHECK(written <= size_t(2) * c.Hkv * c.D);
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
