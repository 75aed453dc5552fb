// run, gate md5, gate kl, bench and trace export with --graph: a saved graph replayed with --model's weights.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "cli_run.h"

using nlohmann::json;
using spindle::test::check_error;
using spindle::test::check_usage_error;
using spindle::test::CliResult;
using spindle::test::run_cli;
using spindle::test::run_json;
using spindle::test::ScratchDir;
using spindle::test::slurp;

namespace {

// Saves the graph `graph save` builds with `args` as `file`.
void save(const std::string& args, const std::string& file) {
  const CliResult r = run_cli("graph save " + args + " --out " + file);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
}

}  // namespace

TEST_CASE("gate md5 and run of a saved graph give the tokens of the graph built afresh") {
  ScratchDir dir;
  const std::string file = (dir.path / "g.sptg").string();
  // A graph tiled otherwise than the defaults (attention chunks, MLP gangs): its tasks come from the file.
  for (const char* model : {"synthetic:tiny", "synthetic:tiny-moe", "synthetic:tiny-qwen3.5"}) {
    CAPTURE(model);
    const std::string build = std::string("--model ") + model + " --context 24 --tune attn-chunks=3 --tune fused-mlp=16/4";
    save(build, file);
    const std::string run = " -p 3,141,59 -n 12 -e threaded -w 3 --schedule static";
    const json fresh = run_json("gate md5 " + build + run);
    const json replayed = run_json("gate md5 --model " + std::string(model) + " --graph " + file + run);
    CHECK(replayed.at("md5") == fresh.at("md5"));
    CHECK(replayed.at("tokens") == fresh.at("tokens"));
    CHECK(run_json("run --model " + std::string(model) + " --graph " + file + run).at("tokens") == fresh.at("tokens"));
  }
}

TEST_CASE("bench --graph says it ran the saved graph, with the tokens of the graph built afresh") {
  ScratchDir dir;
  const std::string file = (dir.path / "g.sptg").string();
  save("--model synthetic:tiny --context 8 --tune stage-tasks=4", file);
  const std::string bench = "bench --model synthetic:tiny -e threaded -n 4 --reps 1 --positions 2 --copy-gib 0.001";
  const json replayed = run_json(bench + " --graph " + file);
  const json fresh = run_json(bench + " --tune stage-tasks=4");
  CHECK(replayed.at("graph") == json({{"from", "file"},
                                      {"file", file},
                                      {"built_from", "synthetic:tiny"},
                                      {"tasks", fresh.at("graph").at("tasks")},
                                      {"context", 8}}));
  CHECK(fresh.at("graph").at("from") == "builder");
  CHECK(fresh.at("graph").at("file") == nullptr);
  CHECK(replayed.at("rows")[0].at("tokens_md5") == fresh.at("rows")[0].at("tokens_md5"));

  const CliResult text = run_cli(bench + " --graph " + file);
  CAPTURE(text.err);
  REQUIRE(text.status == 0);
  CHECK(text.out_has("graph: read from " + file + ", not built (built from synthetic:tiny; "));
  CHECK(run_cli(bench + " --tune stage-tasks=4").out_has("graph: built for the model ("));
}

TEST_CASE("trace export --graph traces the saved graph's tasks, and its metadata names the file") {
  ScratchDir dir;
  const std::string file = (dir.path / "g.sptg").string();
  const std::string build = "--model synthetic:tiny-moe --context 8 --tune stage-tasks=4 --tune attn-chunks=2";
  save(build, file);
  const std::string run = " -e threaded -w 2 -p 1,2 -n 3 --copy-gib 0.001";
  const auto trace = [&](const std::string& source, const std::string& name) {
    const std::string out = (dir.path / (name + ".json")).string(), csv = (dir.path / (name + ".csv")).string();
    const CliResult r = run_cli("trace export " + source + run + " -o " + out + " --csv " + csv);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    return std::pair{json::parse(slurp(out)).at("traceEvents"), json::parse(slurp(dir.path / (name + ".meta.json")))};
  };
  const std::pair<json, json> replayed = trace("--model synthetic:tiny-moe --graph " + file, "replayed");
  const std::pair<json, json> fresh = trace(build, "fresh");
  CHECK(replayed.second.at("graph") == file);
  CHECK(fresh.second.at("graph") == nullptr);
  CHECK(replayed.second.at("context") == 8);
  // The same tasks, each run once a step: the set of (step, task, op) of each run.
  const auto runs = [](const json& events) {
    std::multiset<std::tuple<uint32_t, uint32_t, std::string>> s;
    for (const json& e : events)
      s.insert({e.at("args").at("step").get<uint32_t>(), e.at("args").at("task").get<uint32_t>(),
                e.at("cat").get<std::string>()});
    return s;
  };
  CHECK(runs(replayed.first) == runs(fresh.first));
}

TEST_CASE("gate kl --graph gives the KL of the graph built afresh, and refuses more ids than its context") {
  ScratchDir dir;
  const std::string file = (dir.path / "g.sptg").string();
  const std::string fixture = std::string(SPINDLE_FIXTURES_DIR) + "/qwen3.5-tiny";
  const json meta = json::parse(slurp(fixture + "/meta.json"));  // held: a range-for would not keep it alive
  std::string ids;
  for (const json& id : meta.at("ids"))
    ids += (ids.empty() ? "" : ",") + std::to_string(id.get<uint32_t>());
  const std::string build = "--model " + fixture + " --tune attn-chunks=2";
  save(build + " --context 24", file);
  // Against the library's logits, so the KL is not 0.
  const std::string kl = " --ids " + ids + " --ref " + fixture + "/logits.safetensors -e threaded -w 3 --json";
  const json fresh = run_json("gate kl " + build + kl);
  CHECK(fresh.at("mean_kl").get<double>() > 0);
  CHECK(run_json("gate kl --model " + fixture + " --graph " + file + kl) == fresh);
  check_error("gate kl --model " + fixture + " --graph " + file + " --ids " + ids + ",1 --ref-executor fp64",
              {("--ids' 25 tokens need 25 positions, more than the context of --graph " + file + ", 24").c_str()});
}

TEST_CASE("--graph refuses a graph of another model or shape, a run longer than its context, and build options") {
  ScratchDir dir;
  const std::string file = (dir.path / "tiny.sptg").string();
  save("--model synthetic:tiny --context 8", file);
  check_error("run --model synthetic:tiny-moe -n 4 --graph " + file,
              {("--graph " + file + ", built from synthetic:tiny, does not fit --model synthetic:tiny-moe: the "
                "graph's weight arena 0 is 'weights:synthetic' of ").c_str()});
  check_error("gate md5 --model synthetic:qwen3-0.6b -n 4 --graph " + file,
              {"does not fit --model synthetic:qwen3-0.6b: the graph's hidden is 64, the model's 1024"});
  check_error("run --model synthetic:tiny --graph " + file + " -p 1,2,3,4 -n 5",
              {("a prompt of 4 tokens and --max-new-tokens 5 need 9 positions, more than the context of --graph " +
                file + ", 8 (save the graph again with --context 9 or more)")
                   .c_str()});
  check_error("bench --model synthetic:tiny --graph " + file + " --positions 4 -n 4",
              {"--positions up to 4 and --tokens 4 need 9 positions, more than the context of --graph "});
  check_error("run --graph " + (dir.path / "missing.sptg").string(), {"missing.sptg"});
  for (const char* command : {"run", "gate md5", "gate kl --ids 1,2 --ref-executor fp64", "trace export"})
    check_usage_error(std::string(command) + " --graph " + file + " --context 8", "--context excludes --graph");
  for (const char* setting : {"stage-tasks=2", "rows-per-tile=8", "attn-chunks=2", "attn-q-splits=1", "gdn-gang=1",
                              "o-proj-split=2", "down-split=16/4", "fused-mlp=16/4", "kv-head-waits=on"})
    for (const char* command : {"run", "gate md5", "bench", "gate kl --ids 1,2 --ref-executor fp64", "trace export"}) {
      CAPTURE(setting);
      CAPTURE(command);
      check_error(std::string(command) + " --graph " + file + " --tune " + setting,
                  {(std::string("--tune ") + setting + ": a tiling knob, and the graph is read from --graph " + file)
                       .c_str()});
    }
}
