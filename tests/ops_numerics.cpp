// The numeric building blocks: pm_exp, the canonical dot order, bf16 rounding and 1/rms.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <cstring>

#include "ops/acc.h"
#include "ops/dot.h"
#include "ops/norm.h"
#include "ops/pmath.h"
#include "tests/ops_reference.h"

using namespace spindle;
using namespace spindle::test;

namespace {

// |got - exp(x)| in units of the f32 spacing at exp(x) (2^-149 below the normal range).
double exp_ulp_error(float x, float got) {
  const double exact = std::exp(double(x));
  const double ulp = exact < 0x1p-126 ? 0x1p-149 : std::ldexp(1.0, std::ilogb(exact) - 23);
  return std::fabs(double(got) - exact) / ulp;
}

// The float whose exact exponential first rounds to infinity in f32.
bool exp_overflows(float x) { return std::exp(double(x)) >= double(FLT_MAX) + std::ldexp(1.0, 103); }

double max_exp_error(float lo, float hi, int64_t stride) {
  double worst = 0;
  auto visit = [&](float x) {
    const float got = pm_exp(x);
    if (exp_overflows(x)) {
      CHECK(std::isinf(got));
      return;
    }
    const double e = exp_ulp_error(x, got);
    if (e > worst) {
      worst = e;
      if (e > 2) FAIL_CHECK("pm_exp(" << x << ") = " << got << ", exp = " << std::exp(double(x)));
    }
  };
  // Every `stride`-th float of [lo, hi], through the monotone integer order of the bits.
  auto order = [](float f) { const uint32_t u = bits_from_f32(f); return u >> 31 ? -int64_t(u & 0x7fffffffu) : int64_t(u); };
  auto from_order = [](int64_t o) { return f32_from_bits(o < 0 ? uint32_t(-o) | 0x80000000u : uint32_t(o)); };
  for (int64_t o = order(lo); o <= order(hi); o += stride) visit(from_order(o));
  visit(lo);
  visit(hi);
  return worst;
}

}  // namespace

TEST_CASE("pm_exp: within 2 ulp over a dense sweep incl subnormal results") {
  const double worst = max_exp_error(-103.9f, 88.3f, 97);
  MESSAGE("max ulp error " << worst);
  CHECK(worst <= 2.0);
}

TEST_CASE("pm_exp: exhaustive near the underflow edge") {
  CHECK(max_exp_error(-104.5f, -86.0f, 1) <= 2.0);
  CHECK(pm_exp(-200.0f) == 0.0f);
  CHECK(pm_exp(-INFINITY) == 0.0f);
  CHECK(std::isnan(pm_exp(NAN)));
}

// For x in [127.5 ln2, ln FLT_MAX] (about 88.38..88.72) n = 128 and 2^128 is not a float:
// pm_exp must split that scale rather than return inf where exp is finite.
TEST_CASE("pm_exp: exhaustive near the overflow edge") {
  for (uint32_t u = bits_from_f32(88.0f); u <= bits_from_f32(89.0f); ++u) {
    const float x = f32_from_bits(u);
    const float got = pm_exp(x);
    if (exp_overflows(x)) {
      REQUIRE(std::isinf(got));
    } else {
      INFO("x = " << x << " got " << got);
      REQUIRE(exp_ulp_error(x, got) <= 2.0);
    }
  }
  CHECK(std::isinf(pm_exp(INFINITY)));
}

namespace {

// The canonical order, restated: element k goes to lane (k / 8) % 32 in increasing k; then
// pairs are folded level by level, halving the width each time.
template <class T>
T lane_order_sum(const std::vector<T>& a, const std::vector<T>& b) {
  std::vector<T> lanes(32, T(0));
  for (size_t k = 0; k < a.size(); ++k) lanes[(k / 8) % 32] += a[k] * b[k];
  while (lanes.size() > 1) {
    std::vector<T> next(lanes.size() / 2);
    for (size_t l = 0; l < next.size(); ++l) next[l] = lanes[l] + lanes[l + next.size()];
    lanes = next;
  }
  return lanes[0];
}

template <class T>
void check_canonical_dot(uint32_t seed) {
  std::mt19937 rng(seed);
  const int n = int(random_in(rng, 0, 3000));
  std::uniform_real_distribution<double> dist(-4, 4);
  std::vector<T> a(n), b(n);
  for (int k = 0; k < n; ++k) a[k] = T(dist(rng)), b[k] = T(dist(rng));
  const T got = canonical_dot<T>(n, [&](int k) { return a[k]; }, [&](int k) { return b[k]; });
  const T want = lane_order_sum(a, b);
  INFO("n = " << n);
  CHECK(std::memcmp(&got, &want, sizeof(T)) == 0);
}

}  // namespace

TEST_CASE("canonical_dot: bit-equal to a restatement of the 32-lane order") {
  for (uint32_t seed = 0; seed < 200; ++seed) {
    check_canonical_dot<float>(seed);
    check_canonical_dot<double>(seed);
  }
}

TEST_CASE("f32_to_bf16: ties to even and NaN and overflow") {
  CHECK(f32_to_bf16(f32_from_bits(0x3f808000u)) == 0x3f80);  // tie, even below
  CHECK(f32_to_bf16(f32_from_bits(0x3f818000u)) == 0x3f82);  // tie, even above
  CHECK(f32_to_bf16(f32_from_bits(0x3f808001u)) == 0x3f81);  // just past the tie
  CHECK(f32_to_bf16(f32_from_bits(0x3f807fffu)) == 0x3f80);
  CHECK(f32_to_bf16(f32_from_bits(0xbf818000u)) == 0xbf82);  // negative tie
  CHECK(f32_to_bf16(INFINITY) == 0x7f80);
  CHECK(f32_to_bf16(-INFINITY) == 0xff80);
  CHECK(f32_to_bf16(FLT_MAX) == 0x7f80);                     // rounds up to infinity
  CHECK(f32_to_bf16(f32_from_bits(0x7f7f7fffu)) == 0x7f7f);  // largest finite bf16
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xffffffffu, 0x7f80ffffu}) {
    const bf16 h = f32_to_bf16(f32_from_bits(nan));
    CHECK((h & 0x7fff) > 0x7f80);       // still NaN
    CHECK((h & 0x0040) != 0);           // and quiet
    CHECK((h & 0x8000) == (nan >> 16 & 0x8000));
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = rng();
    const float f = f32_from_bits(u);
    if (std::isnan(f)) continue;
    REQUIRE(bf16_to_f32(f32_to_bf16(f)) == float(ref_bf16(double(f))));
  }
}

TEST_CASE("to_bf16 of double: one rounding not two") {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> mant(1, 2);
  std::uniform_int_distribution<int> expo(-140, 130);
  for (int i = 0; i < 200000; ++i) {
    const double v = std::ldexp(mant(rng), expo(rng)) * (rng() & 1 ? 1 : -1);
    REQUIRE(bf16_to_f32(to_bf16(v)) == float(ref_bf16(v)));
  }
  // A value just above a bf16 tie that f32 rounds onto the tie: two roundings would go to even.
  const double tie = 1.0 + 0x1p-8;  // halfway between 1 and 1 + 2^-7
  CHECK(to_bf16(tie + 0x1p-40) == 0x3f81);
  CHECK(to_bf16(tie - 0x1p-40) == 0x3f80);
  CHECK(to_bf16(-(tie + 0x1p-40)) == 0xbf81);
  CHECK(to_bf16(tie) == 0x3f80);
  CHECK(to_bf16(1e300) == 0x7f80);
  CHECK(to_bf16(1e-300) == 0x0000);
  CHECK(to_bf16(-1e-300) == 0x8000);
  CHECK((to_bf16(double(NAN)) & 0x7fff) > 0x7f80);
}

TEST_CASE("inverse_power_of_two: 1/K for every power of two") {
  for (uint32_t n = 0; n < 32; ++n) CHECK(inverse_power_of_two(1u << n) == 1.0f / float(1u << n));
}

TEST_CASE_TEMPLATE("rms_inverse: the division's bits for every K", Acc, float, double) {
  // Sums of squares over the whole range (subnormal to infinite), K powers of two (the product
  // path) and others (the division), against the formula itself.
  std::mt19937 rng(13);
  const Acc specials[] = {Acc(0), Acc(f32_from_bits(1)), Acc(f32_from_bits(0x007fffffu)), Acc(FLT_MAX),
                          Acc(INFINITY)};
  for (uint32_t i = 0; i < 20000; ++i) {
    const Acc ss = i < 5 ? specials[i] : Acc(f32_from_bits(rng() & 0x7fffffffu));
    const uint32_t K = i % 3 ? 1u << rng() % 32 : random_in(rng, 1, 5000);
    const float eps = i % 2 ? 1e-6f : 0.0f;
    const Acc got = rms_inverse(ss, K, eps), want = pm_rsqrt(ss / Acc(K) + Acc(eps));
    CAPTURE(double(ss));
    CAPTURE(K);
    if (std::isnan(want)) {
      CHECK(std::isnan(got));
    } else {
      CHECK(std::memcmp(&got, &want, sizeof got) == 0);
    }
  }
}
