// spindle graph, info and synth on the tiny synthetic models.
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cli_run.h"
#include "tasks/graph_file.h"

using nlohmann::json;
using spindle::test::CliResult;
using spindle::test::run_cli;
using spindle::test::ScratchDir;

namespace {

// `graph dump` of tiny at context 32 with `args`.
CliResult dump_tiny(const std::string& args) { return run_cli("graph dump --model synthetic:tiny --context 32 " + args); }

// Each (args, message): dump_tiny(args) fails, and its stderr says the message.
void check_dump_refuses(const std::vector<std::pair<std::string, std::string>>& cases) {
  for (const auto& c : cases) {  // not a structured binding: clang 14 cannot capture one
    const std::string &args = c.first, &message = c.second;
    CAPTURE(args);
    const CliResult bad = dump_tiny(args);
    CHECK(bad.status != 0);
    CHECK(bad.err_has(message));
  }
}

}  // namespace

TEST_CASE("graph save, then graph dump --graph, gives the dump of the model") {
  ScratchDir dir;
  const std::string file = (dir.path / "tiny.sptg").string();
  REQUIRE(run_cli("graph save --model synthetic:tiny --context 32 --out " + file).status == 0);
  const spindle::Graph g = spindle::load_graph(file);
  CHECK(g.params.context == 32);

  const CliResult saved = run_cli("graph dump --graph " + file);
  const CliResult built = run_cli("graph dump --model synthetic:tiny --context 32");
  REQUIRE(saved.status == 0);
  REQUIRE(built.status == 0);
  CHECK(saved.out == built.out);
  const json j = json::parse(saved.out);
  CHECK(j.at("model") == "synthetic:tiny");
  CHECK(j.at("tasks").size() == g.tasks.size());
  CHECK(j.at("tasks")[0].at("op") == "embed");
  CHECK(j.at("tasks").back().at("op") == "sample");
}

TEST_CASE("graph save --json reports the file written: its path, model, tasks, counters, context and bytes") {
  ScratchDir dir;
  const std::string file = (dir.path / "tiny.sptg").string();
  const json j = spindle::test::run_json("graph save --model synthetic:tiny --context 32 --out " + file);
  const spindle::Graph g = spindle::load_graph(file);
  CHECK(j.at("path") == file);
  CHECK(j.at("model") == "synthetic:tiny");
  CHECK(j.at("tasks") == g.tasks.size());
  CHECK(j.at("counters") == g.num_counters());
  CHECK(j.at("context") == 32);
  CHECK(j.at("bytes") == std::filesystem::file_size(file));
}

TEST_CASE("graph dump --out writes the JSON to a file") {
  ScratchDir dir;
  const auto file = dir.path / "g.json";
  REQUIRE(run_cli("graph dump --model synthetic:tiny --context 16 --out " + file.string())
              .status == 0);
  CHECK(json::parse(spindle::test::slurp(file)).at("params").at("context") == 16);
}

TEST_CASE("graph dump takes a model or a saved graph, not both, nor a saved graph with build options") {
  CHECK(run_cli("graph dump --model synthetic:tiny --graph x.sptg").status != 0);
  for (const char* option : {"--context 8", "--tune stage-tasks=2", "--tune rows-per-tile=8", "--tune attn-chunks=2",
                             "--tune attn-q-splits=1", "--tune gdn-gang=1", "--tune o-proj-split=2",
                             "--tune down-split=16/4", "--tune fused-mlp=16/4", "--tune kv-head-waits=on"}) {
    CAPTURE(option);
    const CliResult r = run_cli(std::string("graph dump --graph x.sptg ") + option);
    CHECK(r.status != 0);
    CHECK(r.err_has("excludes"));
  }
}

TEST_CASE("--tune attn-chunks=sets the attention tasks of a dumped graph, more chunks than positions are refused") {
  // Attention tasks of the dumped graph, and its attn_chunks parameter.
  const auto attention = [&](const std::string& args) {
    const CliResult r = dump_tiny(args);
    REQUIRE(r.status == 0);
    const json j = json::parse(r.out);
    size_t n = 0;
    for (const json& t : j.at("tasks")) n += t.at("op") == "attention";
    return std::pair{n, j.at("params").at("attn_chunks").get<uint32_t>()};
  };
  const auto [one, one_param] = attention("--tune attn-chunks=1 --tune attn-q-splits=1");
  const auto [five, five_param] = attention("--tune attn-chunks=5");
  CHECK(one_param == 1);
  CHECK(five_param == 5);
  CHECK(five == 5 * one);  // one task per (layer, kv head, chunk)
  const CliResult r = dump_tiny("--tune attn-chunks=33");
  CHECK(r.status == 2);
  CHECK(r.err_has("attention chunks 33 exceed the context's 32 positions"));
}

TEST_CASE("--tune attn-q-splits=sets the attention tasks' q-head splits, one that does not divide a kv head's q heads is refused") {
  const CliResult r = dump_tiny("--tune attn-chunks=2 --tune attn-q-splits=2");
  REQUIRE(r.status == 0);
  const json j = json::parse(r.out);
  CHECK(j.at("params").at("attn_q_splits") == 2);
  size_t n = 0;
  for (const json& t : j.at("tasks")) n += t.at("op") == "attention";
  CHECK(n == size_t(j.at("params").at("n_layers").get<uint32_t>()) * 2 * 2 * 2);  // kv heads × splits × chunks
  const CliResult bad = dump_tiny("--tune attn-q-splits=3");
  CHECK(bad.status == 2);
  CHECK(bad.err_has("attention q-head splits 3 do not divide a kv head's 2 q heads"));
}

TEST_CASE("--tune o-proj-split=and --tune down-split=set the split word of o_proj's and down's tasks only, bad ones are refused") {
  const CliResult r = dump_tiny("--tune o-proj-split=2 --tune down-split=16/4");
  REQUIRE(r.status == 0);
  std::map<std::string, std::set<std::string>> splits;  // by the matrix each GEMV task reads: "P/G" or "none"
  const json dumped = json::parse(r.out);  // held: a range-for does not keep the parse's temporary alive
  for (const json& t : dumped.at("tasks"))
    if (t.at("op") == "gemv") {
      const std::string W = t.at("operands").at("W");
      const json& split = t.at("operands").at("split");
      splits[W.substr(W.rfind('.', W.size() - 8) + 1)].insert(
          split.is_null() ? "none" : std::to_string(split.at("pieces").get<uint32_t>()) + "/" +
                                         std::to_string(split.at("group").get<uint32_t>()));
    }
  CHECK(splits.at("o_proj.weight") == std::set<std::string>{"2/2"});
  CHECK(splits.at("down_proj.weight") == std::set<std::string>{"16/4"});
  CHECK(splits.at("q_proj.weight") == std::set<std::string>{"none"});
  CHECK(splits.at("lm_head.weight") == std::set<std::string>{"none"});

  check_dump_refuses({{"--tune down-split=x", "is not PIECES or PIECES/GROUP"},
                      {"--tune down-split=16/", "is not PIECES or PIECES/GROUP"},
                      {"--tune o-proj-split=70000", "more than 65535"},
                      {"--tune o-proj-split=3", "o_proj split 3/0: the split's pieces do not divide the row length (64 columns)"},
                      {"--tune down-split=32", "down split 32/0: the split's pieces are not whole octets"},
                      {"--tune down-split=16/3", "down split 16/3: the split's groups do not divide its pieces"},
                      {"--tune down-split=1/4", "down split: groups of 4 but fewer than 2 pieces"}});
}

TEST_CASE("--tune fused-mlp=makes each layer's MLP one stage of gang tasks, with --tune down-split=or bad pieces it is refused") {
  const CliResult r = dump_tiny("--tune fused-mlp=16/4");
  REQUIRE(r.status == 0);
  std::set<std::string> ops, gemv_weights;
  std::vector<json> mlp;
  const json dumped = json::parse(r.out);
  for (const json& t : dumped.at("tasks")) {
    ops.insert(t.at("op").get<std::string>());
    if (t.at("op") == "mlp") mlp.push_back(t);
    if (t.at("op") == "gemv") gemv_weights.insert(t.at("operands").at("W").get<std::string>());
  }
  CHECK(ops.count("gate_up") == 0);
  for (const std::string& W : gemv_weights) CHECK(W.find("down_proj") == std::string::npos);
  REQUIRE(mlp.size() == 2 * 16);  // tiny's 2 layers
  for (uint32_t j = 0; j < mlp.size(); ++j) {
    CAPTURE(j);
    CHECK(mlp[j].at("tiles") == json{8 * (j % 16), 8 * (j % 16) + 8});
    CHECK(mlp[j].at("gang") == json{{"width", 4}, {"rank", j % 4}});
    CHECK(mlp[j].at("operands").at("Wd") == (j < 16 ? "model.layers.0.mlp.down_proj.weight" : "model.layers.1.mlp.down_proj.weight"));
  }

  check_dump_refuses({{"--tune fused-mlp=16/4 --tune down-split=16/4", "the fused MLP sums down's dots itself"},
                      {"--tune fused-mlp=32", "fused MLP split 32/0: the split's pieces are not whole octets"},
                      {"--tune fused-mlp=16/3", "fused MLP split 16/3: the split's groups do not divide its pieces"}});
}

TEST_CASE("--tune kv-head-waits=on makes each layer's qkv stage one a kv head, which its attention tasks wait on, o_proj's pieces too with a split a kv head") {
  const auto counters = [](const std::string& args) {
    const CliResult r = dump_tiny(args);
    REQUIRE(r.status == 0);
    const json j = json::parse(r.out);
    std::map<std::string, std::set<std::string>> waited_by;  // counter → ops waiting on it
    for (const json& t : j.at("tasks"))
      if (!t.at("wait").is_null()) waited_by[t.at("wait").at("counter").get<std::string>()].insert(t.at("op"));
    return waited_by;
  };
  const auto plain = counters(""), heads = counters("--tune kv-head-waits=on");
  CHECK(plain.at("L0.qkv") == std::set<std::string>{"attention"});
  CHECK(heads.count("L0.qkv") == 0);
  CHECK(heads.at("L0.qkv.kv0") == std::set<std::string>{"attention"});
  CHECK(heads.at("L1.qkv.kv1") == std::set<std::string>{"attention"});
  CHECK(heads.size() == plain.size() + 2);  // tiny's two layers: one qkv counter becomes two each
  // With o_proj split a kv head (tiny: 2), o_proj's pieces wait for their head's attention.
  const auto pieces = counters("--tune kv-head-waits=on --tune o-proj-split=2");
  CHECK(pieces.at("L0.attention.kv1") == std::set<std::string>{"gemv_piece"});
  CHECK(pieces.at("L1.o_proj") == std::set<std::string>{"gate_up"});
}

TEST_CASE("graph save, graph dump and info build with the tiling options") {
  // GEMV and GATE_UP tasks of one dumped graph.
  const auto projection_tasks = [](const std::string& args) {
    const CliResult r = dump_tiny(args);
    REQUIRE(r.status == 0);
    const json j = json::parse(r.out);
    size_t n = 0;
    for (const json& t : j.at("tasks")) n += t.at("op") == "gemv" || t.at("op") == "gate_up";
    return n;
  };
  const size_t one_per_stage = projection_tasks("--tune stage-tasks=1");
  CHECK(projection_tasks("--tune stage-tasks=4") > one_per_stage);
  CHECK(projection_tasks("--tune rows-per-tile=8") > projection_tasks("--tune stage-tasks=4"));

  ScratchDir dir;
  const std::string file = (dir.path / "tiled.sptg").string();
  REQUIRE(run_cli("graph save --model synthetic:tiny --context 32 --tune stage-tasks=1 --out " + file).status == 0);
  const spindle::Graph g = spindle::load_graph(file);
  size_t saved = 0;
  for (const SpTask& t : g.tasks) saved += t.op == SP_OP_GEMV || t.op == SP_OP_GATE_UP;
  CHECK(saved == one_per_stage);

  const CliResult info = run_cli("info --model synthetic:tiny --context 32 --tune stage-tasks=1 --json");
  REQUIRE(info.status == 0);
  CHECK(json::parse(info.out).at("tasks") == g.tasks.size());
}

namespace {

// Parameters of one decoder layer: q, k, v, o, gate, up, down, and the four norms.
uint64_t layer_parameters(const json& info) {
  const uint64_t H = info["hidden"], Hq = info["heads"], Hkv = info["kv_heads"],
                 D = info["head_dim"], I = info["intermediate"];
  return Hq * D * H + 2 * Hkv * D * H + H * Hq * D + 3 * I * H + 2 * H + 2 * D;
}

// Weight bytes one step reads, from the config alone: every projection and norm, the final
// norm, the LM head, and one embedding row (bf16).
uint64_t expected_bytes_per_token(const json& info) {
  const uint64_t H = info["hidden"], L = info["layers"], V = info["vocab"];
  return 2 * (L * layer_parameters(info) + H + V * H + H);
}

}  // namespace

TEST_CASE("info reports the model and what a step reads") {
  for (const char* model : {"synthetic:tiny", "synthetic:tiny-tied"}) {
    CAPTURE(model);
    const CliResult r = run_cli(std::string("info --json --model ") + model);
    REQUIRE(r.status == 0);
    const json j = json::parse(r.out);
    CHECK(j.at("family") == "qwen3");
    CHECK(j.at("bytes_read_per_token") == expected_bytes_per_token(j));
    const uint64_t L = j["layers"], Hkv = j["kv_heads"], D = j["head_dim"];
    CHECK(j.at("kv_bytes_per_position") == L * 2 * Hkv * D * 2);
    CHECK(j.at("weight_bytes") >= j.at("parameters").get<uint64_t>() * 2);
    CHECK(j.at("tasks") > 0);
    CHECK(j.at("counters") > 0);
  }
  const CliResult text = run_cli("info --model synthetic:tiny");
  REQUIRE(text.status == 0);
  CHECK(text.out_has("bytes read per token"));
}

TEST_CASE("a tied model counts the shared embedding once") {
  const json tied = json::parse(run_cli("info --json --model synthetic:tiny-tied").out);
  const uint64_t V = tied["vocab"], H = tied["hidden"], L = tied["layers"];
  CHECK(tied.at("parameters") == L * layer_parameters(tied) + H + V * H);
}

TEST_CASE("synth writes a checkpoint that decodes like the preset") {
  ScratchDir dir;
  const std::string ckpt = (dir.path / "tiny").string();
  const CliResult w = run_cli("synth tiny --out " + ckpt);
  CAPTURE(w.err);
  REQUIRE(w.status == 0);
  const auto md5 = [](const std::string& model) {
    const CliResult r = run_cli("gate md5 --json --max-new-tokens 6 --model " + model);
    REQUIRE(r.status == 0);
    return json::parse(r.out).at("md5").get<std::string>();
  };
  CHECK(md5(ckpt) == md5("synthetic:tiny"));
}

TEST_CASE("synth --json names the directory, the preset and seed, the weights' bytes and each file written") {
  ScratchDir dir;
  const std::filesystem::path ckpt = dir.path / "tiny";
  const json j = spindle::test::run_json("synth tiny --seed 7 --out " + ckpt.string());
  CHECK(j.at("directory") == ckpt.string());
  CHECK(j.at("preset") == "tiny");
  CHECK(j.at("seed") == 7);
  std::set<std::string> listed;
  for (const auto& entry : std::filesystem::directory_iterator(ckpt)) listed.insert(entry.path().string());
  std::set<std::string> reported;
  for (const json& file : j.at("files")) {
    const std::string path = file.at("path");
    reported.insert(path);
    CHECK(file.at("bytes") == std::filesystem::file_size(path));
  }
  CHECK(reported == listed);
  CHECK(reported == std::set<std::string>{(ckpt / "config.json").string(), (ckpt / "model.safetensors").string()});
  // The checkpoint read back holds the bytes reported.
  CHECK(j.at("weight_bytes") == json::parse(run_cli("info --json --model " + ckpt.string()).out).at("weight_bytes"));
}
