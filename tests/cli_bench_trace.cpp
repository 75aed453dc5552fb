// spindle bench and trace export on the tiny synthetic model.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "cli_run.h"

using nlohmann::json;
using spindle::test::CliResult;
using spindle::test::run_cli;
using spindle::test::ScratchDir;

TEST_CASE("bench --json reports a row per position with the floor") {
  const CliResult r = run_cli(
      "bench --model synthetic:tiny --executor threaded --tokens 4 --reps 3 --positions 0,16 --copy-gib 0.0625 --json");
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  const json j = json::parse(r.out);
  CHECK(j.at("ceiling_gbs").get<double>() > 0);
  CHECK(j.at("weight_bytes_per_token").get<uint64_t>() > 0);
  REQUIRE(j.at("rows").size() == 2);
  for (const json& row : j.at("rows")) {
    CHECK(row.at("ms_per_token").get<double>() > 0);
    CHECK(row.at("fraction_of_floor").get<double>() > 0);
    CHECK(row.at("tokens_md5").get<std::string>().size() == 32);
  }
  // Later positions read more of the cache.
  CHECK(j["rows"][1]["bytes_per_token"].get<double>() > j["rows"][0]["bytes_per_token"].get<double>());
}

TEST_CASE("bench refuses zero tokens") {
  const CliResult r = run_cli("bench --model synthetic:tiny --tokens 0");
  CHECK(r.status == 2);
  CHECK(r.err_has("--tokens and --reps must be at least 1"));
}

TEST_CASE("trace export writes Chrome trace JSON, CSV, and a per-op summary") {
  ScratchDir dir;
  const auto trace = dir.path / "t.json", csv = dir.path / "t.csv";
  const CliResult r = run_cli("trace export --model synthetic:tiny -n 2 -w 2 -o " + trace.string() + " --csv " + csv.string());
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  const json j = json::parse(spindle::test::slurp(trace));
  REQUIRE(j.at("traceEvents").size() > 0);
  const json& e = j["traceEvents"][0];
  CHECK(e.at("ph") == "X");
  CHECK(e.at("dur").get<double>() >= 0);
  CHECK(spindle::test::slurp(csv).rfind("step,task,op,layer,stage,worker,start_ns,end_ns,wait_ns\n", 0) == 0);
  CHECK(r.out_has("bubble fraction"));
  CHECK(r.out_has("gemv"));
}

TEST_CASE("trace export --context builds the graph for that context, and refuses one too small") {
  ScratchDir dir;
  const auto trace = dir.path / "t.json";
  const CliResult r = run_cli("trace export --model synthetic:tiny -n 2 -e sequential --context 200 -o " + trace.string());
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err_has("context 200)"));
  const CliResult small = run_cli("trace export --model synthetic:tiny -n 8 --context 4 -o " + trace.string());
  CHECK(small.status == 2);
  CHECK(small.err_has("past the context limit of 4"));
}

TEST_CASE("trace export --position starts the prompt there, the context growing to hold it") {
  ScratchDir dir;
  const auto trace = dir.path / "t.json";
  const CliResult r =
      run_cli("trace export --model synthetic:tiny -n 2 -p 1,2 -e sequential --position 200 -o " + trace.string());
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err_has("context 204)"));
  const CliResult past =
      run_cli("trace export --model synthetic:tiny -n 2 -e sequential --position 200 --context 200 -o " + trace.string());
  CHECK(past.status == 2);
  CHECK(past.err_has("from position 200 needs"));
}
