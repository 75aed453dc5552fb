// The Hugging Face fixtures (tests/fixtures/*, made by scripts/make_hf_fixtures.py): a tiny
// random-weight checkpoint saved by transformers, with HF's teacher-forced logits and greedy
// tokens. Loaded here for every executor's gate test.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "host/decode.h"
#include "host/gates.h"
#include "host/graph_builder.h"
#include "tests/executors_fixture.h"

inline const std::vector<std::string> kHfFixtures = {"qwen3-tiny", "qwen3-tiny-tied", "qwen3-moe-tiny",
                                                     "qwen3-moe-tiny-fused"};
// The hybrid families' fixtures (Gated DeltaNet, gated attention, the shared expert).
inline const std::vector<std::string> kHfHybridFixtures = {"qwen3.5-tiny", "qwen3.5-tiny-vl", "qwen3.5-moe-tiny", "qwen3-next-tiny"};

inline nlohmann::json read_fixture_json(const std::string& path) {
  std::ifstream f(path);
  REQUIRE(f.good());
  return nlohmann::json::parse(f);
}

struct HfFixture {
  std::string name, dir;
  std::vector<uint32_t> ids;          // the teacher-forced sequence
  std::vector<uint32_t> prompt;       // greedy decoding's prompt
  std::vector<uint32_t> hf_tokens;    // HF's greedy tokens after it
  std::vector<double> top1_margins;   // HF's top-1 margin at each of them
  spindle::ModelWeights weights;
  spindle::Graph graph;               // at a context that holds both runs
};

// `edit` changes the loaded config before the graph is built (a deliberately wrong model).
inline HfFixture load_hf_fixture(const std::string& name, void (*edit)(spindle::ModelConfig&) = nullptr) {
  HfFixture f;
  f.name = name;
  f.dir = std::string(SPINDLE_FIXTURES_DIR) + "/" + name;
  f.ids = read_fixture_json(f.dir + "/meta.json").at("ids").get<std::vector<uint32_t>>();
  const auto greedy = read_fixture_json(f.dir + "/greedy.json");
  f.prompt = greedy.at("prompt_ids").get<std::vector<uint32_t>>();
  f.hf_tokens = greedy.at("tokens").get<std::vector<uint32_t>>();
  f.top1_margins = greedy.at("top1_margins").get<std::vector<double>>();
  f.weights = spindle::load_model(f.dir);
  if (edit) edit(f.weights.config);
  spindle::BuildOptions o;
  o.context = uint32_t(std::max(f.ids.size(), f.prompt.size() + f.hf_tokens.size()));
  f.graph = spindle::build_decode_graph(f.weights, o);
  return f;
}

// HF's teacher-forced logits over `ids`.
inline spindle::LogitRows hf_logits(const HfFixture& f) {
  return spindle::read_reference_logits(f.dir + "/logits.safetensors", f.ids.size(), f.graph.params.vocab);
}

inline void report_kl(const HfFixture& f, const spindle::Executor& ex, const spindle::KlReport& kl) {
  MESSAGE(f.name << " (" << ex.describe() << "): mean KL " << kl.mean_kl << ", max KL " << kl.max_kl
                 << ", top-1 agreement " << kl.top1_agreement);
}

// An executor whose math is the sequential reference's: its teacher-forced logits are the
// reference's bit for bit, and so pass the KL gate against HF's.
inline void check_hf_fixture_as_reference(const HfFixture& f, const spindle::ExecutorOptions& options) {
  auto ex = spindle::make_executor(f.graph, f.weights, options);
  auto ref = spindle::make_executor(f.graph, f.weights, {spindle::ExecutorKind::Sequential});
  const spindle::LogitRows ours = spindle::teacher_forced_logits(*ex, f.graph, f.ids);
  check_same_rows(ours, spindle::teacher_forced_logits(*ref, f.graph, f.ids));
  const spindle::KlReport kl = spindle::compare_logits(hf_logits(f), ours);
  report_kl(f, *ex, kl);
  CHECK(spindle::kl_passes(kl, spindle::KlThresholds{}));
}
