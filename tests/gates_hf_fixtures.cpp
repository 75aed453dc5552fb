// Hugging Face is the external arbiter of the math: tiny random-weight checkpoints saved by
// transformers (scripts/make_hf_fixtures.py), with HF's teacher-forced logits and greedy
// tokens, must be reproduced by our loader, graph and executors.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "host/decode.h"
#include "host/gates.h"
#include "host/graph_builder.h"

using namespace spindle;

namespace {

// Greedy tokens are compared up to the first step whose HF top-1 margin is within twice HF's
// own noise (its cached decode and one forward pass differ by up to ~0.01 at the fixtures'
// logit scale, see scripts/make_hf_fixtures.py).
constexpr double kMinMargin = 0.02;

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  REQUIRE(f.good());
  return nlohmann::json::parse(f);
}

size_t top1(const std::vector<float>& row) { return std::max_element(row.begin(), row.end()) - row.begin(); }

void check_fixture(const std::string& name, ExecutorOptions eo) {
  const std::string dir = std::string(SPINDLE_FIXTURES_DIR) + "/" + name;
  const auto meta = read_json(dir + "/meta.json");
  const auto greedy = read_json(dir + "/greedy.json");
  const auto ids = meta.at("ids").get<std::vector<uint32_t>>();
  const auto prompt = greedy.at("prompt_ids").get<std::vector<uint32_t>>();
  const auto hf_tokens = greedy.at("tokens").get<std::vector<uint32_t>>();
  const auto margins = greedy.at("top1_margins").get<std::vector<double>>();

  const ModelWeights w = load_model(dir);
  BuildOptions o;
  o.context = uint32_t(std::max(ids.size(), prompt.size() + hf_tokens.size()));
  const Graph g = build_decode_graph(w, o);
  auto ex = make_executor(g, w, eo);

  const LogitRows ref = read_reference_logits(dir + "/logits.safetensors", ids.size(), g.params.vocab);
  const LogitRows ours = teacher_forced_logits(*ex, g, ids);
  const KlReport kl = compare_logits(ref, ours);
  MESSAGE(name << " (" << ex->describe() << "): mean KL " << kl.mean_kl << ", max KL " << kl.max_kl
               << ", top-1 agreement " << kl.top1_agreement);
  CHECK(kl_passes(kl, KlThresholds{}));  // mean KL <= 1e-5
  for (size_t t = 0; t < ref.size(); ++t) {   // top-1 agrees wherever HF's choice is clear
    std::vector<float> row = ref[t];
    std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<>());
    if (row[0] - row[1] > kMinMargin) CHECK(top1(ref[t]) == top1(ours[t]));
  }

  const DecodeResult r = decode(*ex, g, prompt, uint32_t(hf_tokens.size()), {});
  for (size_t i = 0; i < hf_tokens.size() && margins[i] > kMinMargin; ++i) {
    CAPTURE(i);
    REQUIRE(r.tokens[i] == hf_tokens[i]);
  }
}

}  // namespace

TEST_CASE("the KL gate fails a model whose math is wrong") {
  // The same checkpoint with plausible bugs: RoPE at twice its theta, or on half the head
  // (the hybrid families' partial rotary applied to qwen3).
  const std::string dir = std::string(SPINDLE_FIXTURES_DIR) + "/qwen3-tiny";
  const auto ids = read_json(dir + "/meta.json").at("ids").get<std::vector<uint32_t>>();
  const std::vector<std::pair<std::string, void (*)(ModelConfig&)>> bugs = {
      {"RoPE theta x2", [](ModelConfig& c) { c.rope_theta *= 2; }},
      {"partial rotary 0.5", [](ModelConfig& c) { c.partial_rotary_factor = 0.5f; }},
  };
  for (const auto& [name, bug] : bugs) {
    ModelWeights w = load_model(dir);
    bug(w.config);
    BuildOptions o;
    o.context = uint32_t(ids.size());
    const Graph g = build_decode_graph(w, o);
    auto ex = make_executor(g, w, {ExecutorKind::Sequential});
    const KlReport kl = compare_logits(read_reference_logits(dir + "/logits.safetensors", ids.size(), g.params.vocab),
                                       teacher_forced_logits(*ex, g, ids));
    MESSAGE(name << ": mean KL " << kl.mean_kl);
    CHECK_FALSE(kl_passes(kl, KlThresholds{}));
  }
}

TEST_CASE("the HF qwen3 fixtures pass the KL gate and reproduce HF's greedy tokens") {
  for (const char* name : {"qwen3-tiny", "qwen3-tiny-tied"}) {
    CAPTURE(name);
    check_fixture(name, {ExecutorKind::Sequential});
    check_fixture(name, {ExecutorKind::Threaded, 3, ScheduleKind::Ticket});
  }
}
