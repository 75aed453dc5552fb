// Hugging Face is the external arbiter of the math: tiny random-weight checkpoints saved by
// transformers (scripts/make_hf_fixtures.py), with HF's teacher-forced logits and greedy
// tokens, must be reproduced by our loader, graph and executors.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>

#include "tests/hf_fixtures.h"

using namespace spindle;

namespace {

// Greedy tokens are compared up to the first step whose HF top-1 margin is within twice HF's
// own noise (its cached decode and one forward pass differ by up to ~0.01 at the fixtures'
// logit scale, see scripts/make_hf_fixtures.py).
constexpr double kMinMargin = 0.02;

size_t top1(const std::vector<float>& row) { return std::max_element(row.begin(), row.end()) - row.begin(); }

void check_fixture(const HfFixture& f, ExecutorOptions eo) {
  auto ex = make_executor(f.graph, f.weights, eo);
  const LogitRows ours = teacher_forced_logits(*ex, f.graph, f.ids);
  const LogitRows ref = hf_logits(f);
  const KlReport kl = compare_logits(ref, ours);
  report_kl(f, *ex, kl);
  CHECK(kl_passes(kl, KlThresholds{}));  // mean KL <= 1e-5
  for (size_t t = 0; t < ref.size(); ++t) {  // top-1 agrees wherever HF's choice is clear
    std::vector<float> row = ref[t];
    std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<>());
    if (row[0] - row[1] > kMinMargin) CHECK(top1(ref[t]) == top1(ours[t]));
  }

  const DecodeResult r = decode(*ex, f.graph, f.prompt, uint32_t(f.hf_tokens.size()), {});
  for (size_t i = 0; i < f.hf_tokens.size() && f.top1_margins[i] > kMinMargin; ++i) {
    CAPTURE(i);
    REQUIRE(r.tokens[i] == f.hf_tokens[i]);
  }
}

}  // namespace

TEST_CASE("the KL gate fails a model whose math is wrong") {
  // A checkpoint with plausible bugs: RoPE at twice its theta, or on half the head (the hybrid
  // families' partial rotary applied to qwen3); the hybrid's attention rotating half its head,
  // not a quarter, or its RMSNorms (the gated one of its GDN layers included) with eps 1e-2.
  struct Bug {
    const char* fixture;
    const char* what;
    void (*edit)(ModelConfig&);
  };
  const Bug bugs[] = {
      {"qwen3-tiny", "RoPE theta x2", [](ModelConfig& c) { c.rope_theta *= 2; }},
      {"qwen3-tiny", "partial rotary 0.5", [](ModelConfig& c) { c.partial_rotary_factor = 0.5f; }},
      {"qwen3.5-tiny", "partial rotary 0.5", [](ModelConfig& c) { c.partial_rotary_factor = 0.5f; }},
      {"qwen3.5-tiny", "rms eps 1e-2", [](ModelConfig& c) { c.rms_eps = 1e-2f; }},
  };
  for (const Bug& bug : bugs) {
    const HfFixture f = load_hf_fixture(bug.fixture, bug.edit);
    auto ex = make_executor(f.graph, f.weights, {ExecutorKind::Sequential});
    const KlReport kl = compare_logits(hf_logits(f), teacher_forced_logits(*ex, f.graph, f.ids));
    MESSAGE(std::string(bug.fixture) << ", " << std::string(bug.what) << ": mean KL " << kl.mean_kl);
    CHECK_FALSE(kl_passes(kl, KlThresholds{}));
  }
}

TEST_CASE("the HF fixtures pass the KL gate and reproduce HF's greedy tokens") {
  std::vector<std::string> names = kHfFixtures;
  names.insert(names.end(), kHfHybridFixtures.begin(), kHfHybridFixtures.end());
  for (const std::string& name : names) {
    CAPTURE(name);
    const HfFixture f = load_hf_fixture(name);
    check_fixture(f, {ExecutorKind::Sequential});
    check_fixture(f, {ExecutorKind::Threaded, 3, ScheduleKind::Ticket});
  }
}
