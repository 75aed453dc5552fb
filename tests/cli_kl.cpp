// spindle gate kl, against the fp64 executor and against a reference logits file.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "host/decode.h"
#include "host/graph_builder.h"
#include "host/safetensors.h"

using nlohmann::json;
using spindle::test::CliResult;
using spindle::test::run_cli;
using spindle::test::ScratchDir;

namespace {

const std::vector<uint32_t> kIds = {3, 1, 4, 1, 5};
const char* kIdList = "3,1,4,1,5";

// The fp64 executor's logits over kIds, written as an HF reference file would be.
void write_reference(const std::filesystem::path& file, float scale = 1.0f) {
  const spindle::ModelWeights w = spindle::load_model("synthetic:tiny");
  spindle::BuildOptions build;
  build.context = uint32_t(kIds.size());
  const spindle::Graph g = spindle::build_decode_graph(w, build);
  spindle::ExecutorOptions opt;
  opt.kind = spindle::ExecutorKind::SequentialF64;
  const auto ex = spindle::make_executor(g, w, opt);
  std::vector<float> flat;
  for (const auto& row : spindle::teacher_forced_logits(*ex, g, kIds))
    for (float x : row) flat.push_back(x * scale);
  const std::vector<uint64_t> shape = {kIds.size(), g.params.vocab};
  using spindle::DType;
  spindle::write_safetensors(file, {{"logits", DType::F32, shape, flat.data(), flat.size() * 4}});
}

CliResult kl(const std::string& args) {
  return run_cli(std::string("gate kl --model synthetic:tiny --json --ids ") + kIdList + " " +
                 args);
}

}  // namespace

TEST_CASE("KL against the fp64 executor passes") {
  const CliResult r = kl("--ref-executor fp64");
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  const json j = json::parse(r.out);
  CHECK(j.at("positions") == kIds.size());
  CHECK(j.at("pass") == true);
  CHECK(j.at("mean_kl").get<double>() <= 1e-5);
  CHECK(j.at("top1_agreement").get<double>() >= 0.0);
}

TEST_CASE("the sequential and threaded executors agree exactly") {
  const CliResult r = kl("--ref-executor sequential --executor threaded --workers 3 --max-kl 0");
  REQUIRE(r.status == 0);
  const json j = json::parse(r.out);
  CHECK(j.at("max_kl") == 0.0);
  CHECK(j.at("top1_agreement") == 1.0);
}

TEST_CASE("KL against a reference file") {
  ScratchDir dir;
  const auto same = dir.path / "same.safetensors", sharper = dir.path / "sharper.safetensors";
  write_reference(same);
  write_reference(sharper, 3.0f);

  const CliResult pass = kl("--ref " + same.string());
  CAPTURE(pass.err);
  REQUIRE(pass.status == 0);
  CHECK(json::parse(pass.out).at("pass") == true);

  const CliResult fail = kl("--ref " + sharper.string());
  CHECK(fail.status == 1);
  const json j = json::parse(fail.out);
  CHECK(j.at("pass") == false);
  CHECK(j.at("mean_kl").get<double>() > 1e-5);

  const CliResult text = run_cli(std::string("gate kl --model synthetic:tiny --ids ") + kIdList +
                                 " --ref " + sharper.string());
  CHECK(text.status == 1);
  CHECK(text.out_has("FAIL"));
  CHECK(text.out_has("top-1 agreement"));
}

TEST_CASE("a reference file of the wrong shape") {
  ScratchDir dir;
  const auto file = dir.path / "ref.safetensors";
  write_reference(file);
  const CliResult r = run_cli("gate kl --model synthetic:tiny --ids 3,1,4 --ref " + file.string());
  CHECK(r.status == 2);
  CHECK(r.err_has("shape"));
}

TEST_CASE("--ref and --ref-executor exclude each other") {
  CHECK(kl("--ref x.safetensors --ref-executor fp64").status != 0);
}
