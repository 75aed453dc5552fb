// The HF fixtures (tests/gates_hf_fixtures.cpp) with the Vulkan executor: its teacher-forced
// logits are the sequential reference's bit for bit, so they pass the KL gate against HF's.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "host/decode.h"
#include "host/gates.h"
#include "host/graph_builder.h"
#include "tests/executors_fixture.h"
#include "tests/vulkan_fixture.h"

using namespace spindle;

TEST_CASE("vulkan: the HF qwen3 fixtures pass the KL gate, with the CPU reference's logits bit for bit") {
  for (const char* name : {"qwen3-tiny", "qwen3-tiny-tied"}) {
    CAPTURE(name);
    const std::string dir = std::string(SPINDLE_FIXTURES_DIR) + "/" + name;
    std::ifstream meta(dir + "/meta.json");
    REQUIRE(meta.good());
    const auto ids = nlohmann::json::parse(meta).at("ids").get<std::vector<uint32_t>>();
    const ModelWeights w = load_model(dir);
    BuildOptions o;
    o.context = uint32_t(ids.size());
    const Graph g = build_decode_graph(w, o);

    auto ex = make_executor(g, w, vulkan_options(2));
    auto ref = make_executor(g, w, {ExecutorKind::Sequential});
    const LogitRows ours = teacher_forced_logits(*ex, g, ids);
    const LogitRows cpu = teacher_forced_logits(*ref, g, ids);
    check_same_rows(ours, cpu);
    const KlReport kl = compare_logits(read_reference_logits(dir + "/logits.safetensors", ids.size(), g.params.vocab), ours);
    MESSAGE(name << " (" << ex->describe() << "): mean KL " << kl.mean_kl << ", max KL " << kl.max_kl
                 << ", top-1 agreement " << kl.top1_agreement);
    CHECK(kl_passes(kl, KlThresholds{}));
  }
}
