// spindle run and gate md5 on the tiny synthetic model.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "host/gates.h"

using nlohmann::json;
using spindle::test::CliResult;
using spindle::test::run_cli;

namespace {

std::string md5_of(const std::string& args) {
  const CliResult r = run_cli("gate md5 --model synthetic:tiny --max-new-tokens 8 --json " + args);
  REQUIRE(r.status == 0);
  return json::parse(r.out).at("md5").get<std::string>();
}

}  // namespace

TEST_CASE("run --json gives the tokens and timings") {
  const CliResult r = run_cli("run --model synthetic:tiny --max-new-tokens 4 --executor threaded --json");
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  const json j = json::parse(r.out);
  CHECK(j.at("tokens").size() == 4);
  for (const json& t : j.at("tokens")) CHECK(t.get<uint32_t>() < 512);
  CHECK(j.at("model") == "synthetic:tiny");
  CHECK(j.at("executor") == "threaded");
  CHECK(j.at("schedule") == "ticket");
  CHECK(j.at("prompt_ids") == json::array({1, 2, 3, 4}));
  for (const char* k : {"tokens_per_s", "prefill_seconds", "decode_seconds", "workers"})
    CHECK(j.contains(k));
}

TEST_CASE("run prints tokens and speed, progress on stderr") {
  const CliResult r = run_cli("run --model synthetic:tiny --max-new-tokens 3 --prompt-ids 5,6");
  REQUIRE(r.status == 0);
  CHECK(r.out_has("tokens:"));
  CHECK(r.out_has("tokens/s"));
  CHECK(r.err_has("loading synthetic:tiny"));
}

TEST_CASE("--workers 0 means the machine's threads") {
  CHECK(run_cli("run --model synthetic:tiny --max-new-tokens 2 --workers 0").status == 0);
}

TEST_CASE("sampling options run") {
  // The CPU executor: the CUDA one samples greedily only (and says so).
  const CliResult r = run_cli(
      "run --model synthetic:tiny --executor threaded --max-new-tokens 4 --temperature 0.8 --top-k 20 "
      "--top-p 0.9 --seed 7 --json");
  REQUIRE(r.status == 0);
  CHECK(json::parse(r.out).at("tokens").size() == 4);
}

TEST_CASE("the md5 gate is deterministic across runs, executors, workers and schedules") {
  const std::string md5 = md5_of("");
  CHECK(md5.size() == 32);
  CHECK(md5_of("") == md5);
  CHECK(md5_of("--executor sequential") == md5);
  CHECK(md5_of("--executor threaded --workers 3 --schedule static") == md5);
  CHECK(md5_of("--tune stage-tasks=1") == md5);  // how a projection stage is split changes no bit
  CHECK(md5_of("--tune rows-per-tile=8 --executor threaded --workers 2") == md5);
}

TEST_CASE("the md5 gate checks --expect") {
  const std::string md5 = md5_of("");
  const CliResult ok =
      run_cli("gate md5 --model synthetic:tiny --max-new-tokens 8 --json --expect " + md5);
  CHECK(ok.status == 0);
  CHECK(json::parse(ok.out).at("match") == true);

  const std::string wrong(32, '0');
  const CliResult bad =
      run_cli("gate md5 --model synthetic:tiny --max-new-tokens 8 --expect " + wrong);
  CHECK(bad.status == 1);
  CHECK(bad.err_has("expected " + wrong));
  CHECK(bad.err_has("got " + md5));
}

TEST_CASE("the md5 is that of the tokens it reports") {
  const CliResult r = run_cli("gate md5 --model synthetic:tiny --max-new-tokens 5 --json");
  REQUIRE(r.status == 0);
  const json j = json::parse(r.out);
  const auto tokens = j.at("tokens").get<std::vector<uint32_t>>();
  CHECK(tokens.size() == 5);
  CHECK(j.at("md5") == spindle::token_md5(tokens));
  CHECK(!j.contains("match"));
}

namespace {

// `spindle run A` and `run B` (both --json) succeed with the same tokens; B's result.
CliResult run_same_tokens(const std::string& a, const std::string& b) {
  const CliResult first = run_cli("run " + a), second = run_cli("run " + b);
  CAPTURE(second.err);
  REQUIRE(first.status == 0);
  REQUIRE(second.status == 0);
  CHECK(json::parse(second.out).at("tokens") == json::parse(first.out).at("tokens"));
  return second;
}

}  // namespace

TEST_CASE("--devices 2 decodes the tokens of the one-device graph split alike, and bench and the GPU executors refuse it") {
  const std::string model = "--model synthetic:tiny-qwen3.5 --max-new-tokens 6 --json ";
  const CliResult two = run_same_tokens(model + "-e sequential --tune o-proj-split=2/2 --tune down-split=2/2",
                                        model + "-e threaded --workers 2 --devices 2");
  CHECK(two.err_has("executor threaded (2 workers on each of 2 devices, ticket)"));
  const CliResult vulkan = run_cli("run " + model + "-e vulkan --devices 2");
  CHECK(vulkan.status != 0);
  CHECK(vulkan.err_has("the graph is split over 2 devices, which the vulkan executor does not run yet"));
  const CliResult bench = run_cli("bench --model synthetic:tiny -e threaded --devices 2 --tokens 2");
  CHECK(bench.status != 0);
  CHECK(bench.err_has("bench: the graph is split over 2 devices; a floor over several devices needs"));
  const CliResult three = run_cli("run --model synthetic:tiny -e threaded --devices 3");
  CHECK(three.status != 0);
  CHECK(three.err_has("3 devices: a device holds whole kv heads, or a kv head's q heads are shared by devices alike, "
                      "and the model's 2 (num_key_value_heads)"));
}

TEST_CASE("--expert-parallel decodes the tokens of the one-device graph with the routed experts' dots whole, and is refused "
          "on one device or with a saved graph") {
  const std::string model = "--model synthetic:tiny-moe --max-new-tokens 6 --json ";
  run_same_tokens(model + "-e sequential --tune o-proj-split=2/2 --tune down-split=2/2",
                  model + "-e threaded --workers 2 --devices 2 --expert-parallel");
  // With a shared expert, its down dots split a piece a device.
  const std::string hybrid = "--model synthetic:tiny-qwen3.5-moe --max-new-tokens 6 --json ";
  run_same_tokens(hybrid + "-e sequential --tune o-proj-split=2/2 --tune gdn-out-split=2/2 --tune shared-down-split=2/2",
                  hybrid + "-e threaded --workers 2 --devices 2 --expert-parallel");
  const CliResult alone = run_cli("run " + model + "-e threaded --expert-parallel");
  CHECK(alone.status == 2);
  CHECK(alone.err_has("expert parallel splits the routed experts over devices: it needs devices above 1"));
  const CliResult saved = run_cli("run " + model + "--graph missing.sptg --expert-parallel");
  CHECK(saved.status == 2);
  CHECK(saved.err_has("--devices and --expert-parallel split a graph built here; --graph missing.sptg runs the saved "
                      "graph over the devices it was built for"));
  const CliResult info = run_cli("info --model synthetic:tiny-moe --devices 2 --expert-parallel");
  REQUIRE(info.status == 0);
  CHECK(info.out_has("expert parallel        a device's routed experts counted at their share of an even routing"));
}

TEST_CASE("--tune shard-weights=on: each simulated device holds its weight shard alone, with the tokens of the "
          "shared weights, and info prints each device's shard") {
  const std::string model = "--model synthetic:tiny-qwen3.5-moe --max-new-tokens 6 --json -e threaded --devices 2 ";
  run_same_tokens(model, model + "--tune shard-weights=on");
  const CliResult vulkan = run_cli("run --model synthetic:tiny -e vulkan --tune shard-weights=on");
  CHECK(vulkan.status == 2);
  CHECK(vulkan.err_has("the vulkan executor holds every weight; only the CPU executors (sequential, fp64, threaded) "
                       "shard them"));
  const CliResult info = run_cli("info --model synthetic:tiny-qwen3.5-moe --devices 2 --json");
  REQUIRE(info.status == 0);
  const json held = json::parse(info.out).at("device_weight_bytes_held");
  REQUIRE(held.size() == 2);
  CHECK(held[0].get<uint64_t>() > 0);
  CHECK(held[0].get<uint64_t>() < json::parse(info.out).at("weight_bytes").get<uint64_t>());
}
