// SAMPLE (ops/sample.h): the rng, greedy and seeded sampling, and the step-state advance.
#include <doctest/doctest.h>

#include <map>

#include "ops/sample.h"
#include "tests/ops_reference.h"

using namespace spindle;
using namespace spindle::test;

namespace {

std::vector<float> random_logits(std::mt19937& rng, uint32_t V, double sd = 2.0) {
  std::normal_distribution<float> normal(0.0f, float(sd));
  std::vector<float> l(V);
  for (float& x : l) x = round_bf16(normal(rng));  // bf16 values, so ties occur
  return l;
}

uint32_t first_max(const std::vector<float>& l) {
  return uint32_t(std::max_element(l.begin(), l.end()) - l.begin());
}

// The distribution the sampler should follow, from the definition in double: softmax of
// l / T over the top_k candidates in (logit desc, index asc) order, cut to the top_p prefix.
std::map<uint32_t, double> reference_distribution(const std::vector<float>& l, float T, uint32_t top_k, float top_p) {
  std::vector<uint32_t> order(l.size());
  for (uint32_t i = 0; i < l.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return l[a] > l[b]; });
  if (top_k) order.resize(std::min<size_t>(top_k, order.size()));
  Eigen::ArrayXd w(order.size());
  for (size_t i = 0; i < order.size(); ++i) w(i) = std::exp((double(l[order[i]]) - l[order[0]]) / T);
  size_t kept = 0;
  double sum = 0;
  while (kept < order.size() && (kept == 0 || sum < top_p * w.sum())) sum += w(kept++);
  std::map<uint32_t, double> p;
  for (size_t i = 0; i < kept; ++i) p[order[i]] = w(i) / sum;
  return p;
}

// Draws `n` steps with one seed and returns the chi-square statistic against `want`.
double chi_square(const std::vector<float>& l, float T, uint32_t top_k, float top_p, uint32_t n) {
  const std::map<uint32_t, double> want = reference_distribution(l, T, top_k, top_p);
  std::map<uint32_t, uint32_t> seen;
  for (uint32_t step = 0; step < n; ++step) {
    const uint32_t t = sample_from_logits<float>(l.data(), uint32_t(l.size()), T, top_k, top_p,
                                                 sample_uniform(0x5eed, step));
    REQUIRE(want.count(t));  // never outside the kept set
    seen[t]++;
  }
  double chi2 = 0;
  for (const auto& [token, p] : want) chi2 += std::pow(seen[token] - n * p, 2) / (n * p);
  return chi2;
}

}  // namespace

TEST_CASE("splitmix64 and sample_uniform") {
  // The first two outputs of the reference generator seeded with 0.
  CHECK(splitmix64(0) == 0xE220A8397B1DCDAFull);
  CHECK(splitmix64(0x9E3779B97F4A7C15ull) == 0x6E789E6AA1B965F4ull);
  for (uint32_t step = 0; step < 1000; ++step) {
    const uint64_t seed = 0x0123456789abcdefull + step * 977;
    const float u = sample_uniform(seed, step);
    REQUIRE(u >= 0.0f);
    REQUIRE(u < 1.0f);
    const uint64_t z = splitmix64(seed ^ (uint64_t(step) * 0x9E3779B97F4A7C15ull));
    REQUIRE(double(u) == std::ldexp(double(z >> 40), -24));
  }
}

TEST_CASE_TEMPLATE("sample_from_logits: top_k 1 and tiny top_p pick the greedy token", Acc, float, double) {
  for (uint32_t seed = 0; seed < 200; ++seed) {
    std::mt19937 rng(seed);
    const std::vector<float> l = random_logits(rng, random_in(rng, 1, 500));
    const uint32_t V = uint32_t(l.size());
    const Acc u = Acc(sample_uniform(seed, seed));
    CHECK(sample_from_logits<Acc>(l.data(), V, 1e-3f, 1, 1.0f, u) == first_max(l));
    CHECK(sample_from_logits<Acc>(l.data(), V, 1.0f, 1, 1.0f, u) == first_max(l));
    CHECK(sample_from_logits<Acc>(l.data(), V, 1.0f, 0, 1e-9f, u) == first_max(l));
    CHECK(sample_from_logits<Acc>(l.data(), V, 5.0f, 7, 0.0f, u) == first_max(l));
  }
}

TEST_CASE("sample_from_logits: equal logits are ordered by index") {
  const std::vector<float> l(8, 0.5f);
  for (uint32_t i = 0; i < 8; ++i) CHECK(sample_from_logits<float>(l.data(), 8, 1.0f, 0, 1.0f, (i + 0.5f) / 8) == i);
  CHECK(sample_from_logits<float>(l.data(), 8, 1.0f, 3, 1.0f, 0.99f) == 2);  // top 3 = indices 0..2
}

TEST_CASE("sample_from_logits: NaN is never drawn and an infinite top logit always is") {
  std::mt19937 rng(3);
  std::vector<float> l = random_logits(rng, 64, 0.1);
  for (uint32_t i = 0; i < 64; i += 3) l[i] = NAN;
  for (uint32_t step = 0; step < 500; ++step)
    CHECK(!std::isnan(l[sample_from_logits<float>(l.data(), 64, 2.0f, 0, 1.0f, sample_uniform(1, step))]));
  l[40] = INFINITY;
  l[50] = INFINITY;
  CHECK(sample_from_logits<float>(l.data(), 64, 2.0f, 0, 1.0f, 0.9f) == 40);
  const std::vector<float> all_nan(5, NAN);
  CHECK(sample_from_logits<float>(all_nan.data(), 5, 1.0f, 0, 1.0f, 0.5f) == 0);
}

TEST_CASE("sample_from_logits: draws follow the softmax after top-k and top-p") {
  const std::vector<float> l = {1.0f, 2.5f, -0.5f, 2.0f, 0.0f, 1.5f, -3.0f, 2.5f};
  const uint32_t n = 40000;
  // 99.9% quantiles of chi-square: 24.3 (7 dof), 13.8 (2 dof); the bounds are looser still.
  CHECK(chi_square(l, 1.0f, 0, 1.0f, n) < 35);
  CHECK(chi_square(l, 0.6f, 0, 1.0f, n) < 35);
  CHECK(chi_square(l, 1.3f, 3, 1.0f, n) < 25);
  CHECK(chi_square(l, 1.0f, 0, 0.7f, n) < 30);
  CHECK(chi_square(l, 2.0f, 5, 0.9f, n) < 30);
  CHECK(reference_distribution(l, 1.0f, 3, 1.0f).size() == 3);
  CHECK(reference_distribution(l, 1.0f, 0, 0.7f).size() == 3);
}

namespace {

struct SampleRun {
  std::vector<float> logits;
  std::vector<ArgmaxPartial> partials;
  std::vector<uint32_t> forced{100, 101, 102, 103, 104, 105}, out = std::vector<uint32_t>(16, 0xdead);
  SpStepState state{};

  explicit SampleRun(uint32_t V) {
    std::mt19937 rng(V);
    logits = random_logits(rng, V);
    for (uint32_t r0 = 0; r0 < V; r0 += 16) {  // the LM head's argmax partials, 16 rows a slot
      ArgmaxPartial best = argmax_none(r0);
      for (uint32_t r = r0; r < std::min(V, r0 + 16); ++r) argmax_offer(best, logits[r], r);
      partials.push_back(best);
    }
  }
  uint32_t step() {
    sample_step<float>(logits.data(), uint32_t(logits.size()), partials.data(), uint32_t(partials.size()),
                       forced.data(), out.data(), state);
    return state.token;
  }
};

}  // namespace

TEST_CASE("sample_step: forced prompt tokens then greedy and the state advance") {
  SampleRun run(200);
  run.state = {100, 7, 0, 3, 0, 0, 0.0f, 0, 1.0f, 0, {}};  // prompt of 3 tokens, fed from position 7
  CHECK(run.step() == 101);
  CHECK(run.step() == 102);
  CHECK(run.step() == first_max(run.logits));  // step 2: 3 < forced_count fails, so generated
  CHECK(run.state.position == 10);
  CHECK(run.state.step == 3);
  CHECK(run.out[0] == 101);
  CHECK(run.out[1] == 102);
  CHECK(run.out[2] == first_max(run.logits));
  CHECK(run.out[3] == 0xdead);
}

TEST_CASE("sample_step: reproducible for a seed and different across seeds") {
  auto tokens = [](uint32_t seed_lo, uint32_t seed_hi) {
    SampleRun run(300);
    run.state = {100, 0, 0, 1, seed_lo, seed_hi, 1.5f, 0, 0.95f, 0, {}};
    std::vector<uint32_t> t;
    for (int i = 0; i < 12; ++i) t.push_back(run.step());
    return t;
  };
  CHECK(tokens(42, 0) == tokens(42, 0));
  size_t differ = 0;
  const std::vector<uint32_t> a = tokens(42, 0), b = tokens(43, 0), c = tokens(42, 1);
  for (size_t i = 0; i < a.size(); ++i) differ += (a[i] != b[i]) + (a[i] != c[i]);
  CHECK(differ >= 12);

  SampleRun run(300);
  run.state = {100, 0, 5, 1, 42, 0, 1.5f, 0, 0.95f, 0, {}};
  const uint32_t got = run.step();
  CHECK(got == sample_from_logits<float>(run.logits.data(), 300, 1.5f, 0, 0.95f, sample_uniform(42, 5)));
}

TEST_CASE("sample_step: the first step whose logits are not all finite is noted, forced or not") {
  SampleRun run(200);
  run.state = {100, 0, 0, 3, 0, 0, 0.0f, 0, 1.0f, 0, {}};  // a prompt of 3 tokens
  run.step();
  CHECK(run.state.nonfinite_step == 0);
  run.partials[7].value = NAN;  // a forced step's logits: what the KL gate reads
  run.step();
  CHECK(run.state.nonfinite_step == 2);
  run.step();
  CHECK(run.state.nonfinite_step == 2);  // the first stays

  SampleRun greedy(200);
  greedy.state = {100, 0, 0, 1, 0, 0, 0.0f, 0, 1.0f, 0, {}};
  greedy.step();
  greedy.partials[3] = {NAN, 50};
  CHECK(greedy.step() == 50);  // the mark's row: any token would do, the run is an error
  CHECK(greedy.state.nonfinite_step == 2);

  SampleRun sampled(200);
  sampled.state = {100, 0, 0, 1, 42, 0, 1.5f, 0, 0.95f, 0, {}};
  sampled.partials[0] = {NAN, 3};
  sampled.step();
  CHECK(sampled.state.nonfinite_step == 1);
}
