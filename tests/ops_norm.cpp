// RMSNorm (ops/norm.h) against an Eigen reference in double with HF's rounding points.
#include <doctest/doctest.h>

#include "ops/norm.h"
#include "tests/ops_reference.h"

using namespace spindle;
using namespace spindle::test;

namespace {

struct NormCase {
  std::vector<bf16> x, w;
  uint32_t kind;
  float eps;
};

NormCase random_norm_case(std::mt19937& rng) {
  const uint32_t K = random_in(rng, 1, 2100);
  const uint32_t kind = random_in(rng, 0, 1) ? SP_NORM_ZERO_CENTRED : SP_NORM_STANDARD;
  const double scale = std::ldexp(1.0, int(random_in(rng, 0, 12)) - 6);
  return {random_bf16(rng, K, scale), random_bf16(rng, K, 0.2, kind == SP_NORM_STANDARD ? 1.0 : 0.0),
          kind, random_in(rng, 0, 1) ? 1e-6f : 1e-5f};
}

}  // namespace

TEST_CASE_TEMPLATE("rms_norm: both kinds into bf16 and Acc outputs", Acc, float, double) {
  Agreement agree;
  for (uint32_t seed = 0; seed < 60; ++seed) {
    std::mt19937 rng(seed);
    const NormCase c = random_norm_case(rng);
    const uint32_t K = uint32_t(c.x.size());
    CAPTURE(seed);
    CAPTURE(K);
    CAPTURE(c.kind);
    const std::vector<double> ref = to_std(reference_rms_norm(to_vector(c.x.data(), K).array(),
                                                              to_vector(c.w.data(), K).array(), c.kind, c.eps));

    std::vector<bf16> out(K);
    rms_norm<Acc>(c.x.data(), K, {c.w.data(), c.kind, c.eps}, out.data());
    agree.add(out, ref);

    std::vector<Acc> wide(K);  // the same values, stored widened
    rms_norm<Acc>(c.x.data(), K, {c.w.data(), c.kind, c.eps}, wide.data());
    for (uint32_t k = 0; k < K; ++k) REQUIRE(wide[k] == Acc(bf16_to_f32(out[k])));
  }
  check_tile<Acc>(agree);
}

TEST_CASE_TEMPLATE("projection_input: widened x or its norm", Acc, float, double) {
  std::mt19937 rng(99);
  const NormCase c = random_norm_case(rng);
  const uint32_t K = uint32_t(c.x.size());
  const std::vector<Acc> plain = projection_input<Acc>(c.x.data(), K, {nullptr, c.kind, c.eps});
  for (uint32_t k = 0; k < K; ++k) REQUIRE(plain[k] == Acc(bf16_to_f32(c.x[k])));
  const std::vector<Acc> normed = projection_input<Acc>(c.x.data(), K, {c.w.data(), c.kind, c.eps});
  std::vector<bf16> out(K);
  rms_norm<Acc>(c.x.data(), K, {c.w.data(), c.kind, c.eps}, out.data());
  for (uint32_t k = 0; k < K; ++k) REQUIRE(normed[k] == Acc(bf16_to_f32(out[k])));
}
