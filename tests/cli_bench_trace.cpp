// spindle bench and trace export on the tiny synthetic model.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_run.h"

using nlohmann::json;
using spindle::test::check_usage_error;
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

TEST_CASE("bench refuses zero tokens, and reps outside 1 to a million") {
  check_usage_error("bench --model synthetic:tiny --tokens 0", "--tokens: Value 0 not in range 1 to 4294967295");
  check_usage_error("bench --model synthetic:tiny --reps 0", "--reps: Value 0 not in range 1 to 1000000");
  check_usage_error("bench --model synthetic:tiny --reps 4294967295",
                    "--reps: Value 4294967295 not in range 1 to 1000000");
}

TEST_CASE("trace export writes Chrome trace JSON, CSV, and a per-op summary") {
  ScratchDir dir;
  const auto trace = dir.path / "t.json", csv = dir.path / "t.csv";
  const CliResult r = run_cli("trace export --model synthetic:tiny -n 2 -w 2 --copy-gib 0.0625 -o " + trace.string() +
                              " --csv " + csv.string());
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  const json j = json::parse(spindle::test::slurp(trace));
  REQUIRE(j.at("traceEvents").size() > 0);
  const json& e = j["traceEvents"][0];
  CHECK(e.at("ph") == "X");
  CHECK(e.at("dur").get<double>() >= 0);
  CHECK(spindle::test::slurp(csv).rfind("step,task,op,layer,stage,worker,start_ns,end_ns,wait_ns,", 0) == 0);
  CHECK(r.out_has("bubble fraction"));
  CHECK(r.out_has("gemv"));
  // "steps: N, median U us a step (traced); weights, K/V and recurrent state moved at G GB/s, P% of the ceiling (C GB/s, …"
  const size_t at = r.out.find("steps: ");
  REQUIRE(at != std::string::npos);
  unsigned steps = 0;
  double us = 0, gbs = 0, percent = 0, ceiling = 0;
  REQUIRE(std::sscanf(r.out.c_str() + at,
                      "steps: %u, median %lf us a step (traced); weights, K/V and recurrent state moved at %lf GB/s, %lf%% of the "
                      "ceiling (%lf GB/s, host memcpy",
                      &steps, &us, &gbs, &percent, &ceiling) == 5);
  CHECK(steps == 5);  // one a prompt token (the 4th samples the first new one), then the first new token's
  CHECK(ceiling > 0);
  CHECK(percent > 0);
  // The same from the CSV and `info`'s byte counts: a step's time from the step before's last end
  // (the first: from its first claim, start - wait), its bytes every weight and K/V rows 0..step.
  const json info = json::parse(run_cli("info --model synthetic:tiny --json").out);
  const double weights = info.at("bytes_read_per_token").get<double>(), kv = info.at("kv_bytes_per_position").get<double>();
  std::map<unsigned, std::pair<double, double>> spans;  // step -> (first claim, last end), ns
  std::istringstream rows(spindle::test::slurp(csv));
  std::string line;
  std::getline(rows, line);  // the header
  while (std::getline(rows, line)) {
    unsigned step = 0, task = 0, worker = 0;
    int layer = 0;
    char op[32], stage[64];
    double start = 0, end = 0, wait = 0;
    std::replace(line.begin(), line.end(), ',', ' ');
    REQUIRE(std::sscanf(line.c_str(), "%u %u %31s %d %63s %u %lf %lf %lf", &step, &task, op, &layer, stage, &worker,
                        &start, &end, &wait) == 9);
    auto& [claim, last] = spans.try_emplace(step, start - wait, end).first->second;
    claim = std::min(claim, start - wait);
    last = std::max(last, end);
  }
  REQUIRE(spans.size() == steps);
  std::vector<double> step_gbs, step_us;
  double before = spans.begin()->second.first;
  for (const auto& [step, span] : spans) {
    step_gbs.push_back((weights + kv * (step + 1)) / (span.second - before));
    step_us.push_back((span.second - before) / 1e3);
    before = span.second;
  }
  std::sort(step_gbs.begin(), step_gbs.end());
  std::sort(step_us.begin(), step_us.end());
  CHECK(std::abs(gbs - step_gbs[2]) <= 0.051);  // the medians of five, printed to 0.1
  CHECK(std::abs(us - step_us[2]) <= 0.051);
}

TEST_CASE("trace export --json gives the per-op summary and the bandwidth, matching the trace written") {
  ScratchDir dir;
  const auto trace = dir.path / "t.json";
  const json j = spindle::test::run_json("trace export --model synthetic:tiny -n 2 -w 2 -e threaded --copy-gib 0.0625 -o " +
                                         trace.string());
  const json events = json::parse(spindle::test::slurp(trace)).at("traceEvents");
  CHECK(j.at("trace") == trace.string());
  CHECK(j.at("csv").is_null());
  CHECK(j.at("records") == events.size());
  std::map<std::string, std::pair<uint64_t, double>> by_op;  // op -> (runs, busy us) from the trace
  for (const json& e : events) {
    auto& [runs, busy_us] = by_op[e.at("cat").get<std::string>()];
    ++runs;
    busy_us += e.at("dur").get<double>();
  }
  REQUIRE(j.at("ops").size() == by_op.size());
  double shares = 0;
  for (const auto& entry : by_op) {
    const std::string& op = entry.first;
    const std::pair<uint64_t, double>& totals = entry.second;
    CAPTURE(op);  // not a structured binding: clang 14 (the ASan build) cannot capture one
    const json& o = j.at("ops").at(op);
    CHECK(o.at("runs") == totals.first);
    CHECK(o.at("busy_us").get<double>() == doctest::Approx(totals.second).epsilon(1e-9));
    shares += o.at("busy_fraction").get<double>();
  }
  CHECK(shares == doctest::Approx(1));
  CHECK(j.at("workers") == 2);
  CHECK(j.at("sm_placement").is_null());  // the threaded executor names no SMs
  CHECK(j.at("steps") == 5);  // one a prompt token (the 4th samples the first new one), then the first new token's
  CHECK(j.at("ceiling_gbs").get<double>() > 0);
  CHECK(j.at("fraction_of_ceiling").get<double>() ==
        doctest::Approx(j.at("achieved_gbs").get<double>() / j.at("ceiling_gbs").get<double>()));
  const double bubble = j.at("bubble_fraction");
  CHECK((bubble >= 0 && bubble < 1));
}

TEST_CASE("bench and trace export refuse a ceiling copy outside 1 MiB to 64 GiB") {
  for (const std::string command : {"bench --model synthetic:tiny --copy-gib 0", "trace export --model synthetic:tiny --copy-gib 65"}) {
    CAPTURE(command);
    const CliResult r = run_cli(command);
    CHECK(r.status == 2);
    CHECK(r.err_has("--copy-gib"));
    CHECK(r.err_has("not in range"));
  }
}

TEST_CASE("trace export --context builds the graph for that context, and refuses one too small") {
  ScratchDir dir;
  const auto trace = dir.path / "t.json";
  const CliResult r =
      run_cli("trace export --model synthetic:tiny -n 2 -e sequential --context 200 --copy-gib 0.0625 -o " + trace.string());
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
      run_cli("trace export --model synthetic:tiny -n 2 -p 1,2 -e sequential --position 200 --copy-gib 0.0625 -o " +
              trace.string());
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err_has("context 204)"));
  const CliResult past =
      run_cli("trace export --model synthetic:tiny -n 2 -e sequential --position 200 --context 200 -o " + trace.string());
  CHECK(past.status == 2);
  CHECK(past.err_has("from position 200 needs"));
}
