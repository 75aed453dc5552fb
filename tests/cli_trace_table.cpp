// trace export --csv: the table a notebook loads (docs/trace-format.md), held against the
// Chrome trace of the same run, the graph's dump and `info`'s byte counts.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_run.h"

using nlohmann::json;
using spindle::test::check_error;
using spindle::test::CliResult;
using spindle::test::run_cli;
using spindle::test::ScratchDir;
using spindle::test::slurp;

namespace {

struct Row {
  uint32_t step, task, worker;
  int layer;
  std::string op, stage;
  uint64_t start_ns, end_ns, wait_ns, bytes_read, bytes_written;
  uint32_t device;
};

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> fields;
  std::istringstream in(line);
  for (std::string f; std::getline(in, f, ',');) fields.push_back(f);
  return fields;
}

std::vector<Row> read_rows(const std::string& csv) {
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);  // the header
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    const std::vector<std::string> f = split(line);
    REQUIRE(f.size() == 12);
    rows.push_back({uint32_t(std::stoul(f[0])), uint32_t(std::stoul(f[1])), uint32_t(std::stoul(f[5])), std::stoi(f[3]),
                    f[2], f[4], std::stoull(f[6]), std::stoull(f[7]), std::stoull(f[8]), std::stoull(f[9]),
                    std::stoull(f[10]), uint32_t(std::stoul(f[11]))});
  }
  return rows;
}

// The dumped view named `name`.
const json& view(const json& dump, const json& name) {
  for (const json& v : dump.at("views"))
    if (v.at("name") == name) return v;
  FAIL("no view " << name);
  return dump;
}

uint64_t element_bytes(const json& v) { return v.at("dtype") == "bf16" ? 2 : 4; }
uint64_t row_bytes(const json& dump, const json& name) {
  const json& v = view(dump, name);
  return v.at("cols").get<uint64_t>() * element_bytes(v);
}
uint64_t column_bytes(const json& dump, const json& name) {
  const json& v = view(dump, name);
  return v.at("rows").get<uint64_t>() * element_bytes(v);
}
uint64_t view_bytes(const json& dump, const json& name) {
  return view(dump, name).at("rows").get<uint64_t>() * row_bytes(dump, name);
}

// The graph `trace export` ran: the model's at the context its metadata names.
json dump_of(const std::string& model, const json& meta, const std::string& tiling = "") {
  return json::parse(run_cli("graph dump --model " + model + " " + tiling + " --context " +
                             std::to_string(meta.at("context").get<uint32_t>())).out);
}

// A step's attention and GDN runs, summed.
struct StepBytes {
  uint64_t attention_runs = 0, kv_read = 0, kv_written = 0;  // the K/V rows', less the q and k norms read
  uint64_t gdn_written = 0;
};

// Checks each row's bytes against the task's views in the dump where they follow from its tiles
// alone: a projection's rows of its weights (the routed experts': the k slots' rows) and its
// norm's, the token's row of the embedding table, nothing for the sampler; returns what the
// attention and GDN runs moved, step by step.
std::map<uint32_t, StepBytes> check_bytes(const std::vector<Row>& rows, const json& dump) {
  std::map<uint32_t, StepBytes> steps;
  for (const Row& row : rows) {
    const json& t = dump.at("tasks").at(row.task);
    CAPTURE(row.task);
    REQUIRE(t.at("op") == row.op);
    const json& o = t.at("operands");
    const uint64_t tiles = t.at("tiles")[1].get<uint64_t>() - t.at("tiles")[0].get<uint64_t>();
    auto norm = [&](const char* name) { return o.at(name).is_null() ? 0 : view_bytes(dump, o.at(name)); };
    StepBytes& step = steps[row.step];
    if (row.op == "attention" || row.op == "gated_attention") {
      ++step.attention_runs;
      step.kv_read += row.bytes_read - norm("q_norm") - norm("k_norm");
      step.kv_written += row.bytes_written;
      continue;
    }
    if (row.op == "gdn") {
      step.gdn_written += row.bytes_written;
      continue;
    }
    uint64_t read = 0;
    if (row.op == "gemv" || row.op == "router") read = tiles * row_bytes(dump, o.at("W")) + norm("norm");
    else if (row.op == "gemv_piece") read = tiles * row_bytes(dump, o.at("W"));
    else if (row.op == "gate_up") read = tiles * (row_bytes(dump, o.at("Wg")) + row_bytes(dump, o.at("Wu"))) + norm("norm");
    else if (row.op == "mlp")  // its intermediate columns: gate and up rows, down's columns
      read = tiles * (row_bytes(dump, o.at("Wg")) + row_bytes(dump, o.at("Wu")) + column_bytes(dump, o.at("Wd"))) +
             norm("norm");
    else if (row.op == "expert_gate_up") read = tiles * 2 * row_bytes(dump, o.at("W")) + norm("norm");
    else if (row.op == "expert_down" || row.op == "expert_down_shared")  // words[1]: the slots
      read = tiles * o.at("params").at("words")[1].get<uint64_t>() * row_bytes(dump, o.at("W")) +
             (row.op == "expert_down" ? 0 : tiles * row_bytes(dump, o.at("shared_W")));
    else if (row.op == "embed") read = tiles * 2;
    else CHECK(row.op == "sample");
    CHECK(row.bytes_read == read);
    CHECK(row.bytes_written == 0);
  }
  return steps;
}

}  // namespace

TEST_CASE("trace export --csv writes a row per traced task run with the bytes it moved, and the export's metadata") {
  ScratchDir dir;
  const auto trace = dir.path / "t.json", csv = dir.path / "t.csv";
  const CliResult r = run_cli("trace export --model synthetic:tiny -e threaded -w 2 -p 1,2 -n 2 --position 3 "
                              "--copy-gib 0.0625 -o " + trace.string() + " --csv " + csv.string());
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  const std::string table = slurp(csv);
  CHECK(table.rfind("step,task,op,layer,stage,worker,start_ns,end_ns,wait_ns,bytes_read,bytes_written,device\n", 0) == 0);
  const std::vector<Row> rows = read_rows(table);

  // The metadata: what the summary printed, and the graph's context.
  const json meta = json::parse(slurp(dir.path / "t.meta.json"));
  CHECK(meta.at("format_version") == 1);
  CHECK(meta.at("model") == "synthetic:tiny");
  CHECK(meta.at("executor") == "threaded (2 workers, ticket)");
  CHECK(meta.at("workers") == 2);
  CHECK(meta.at("devices") == 1);
  CHECK(meta.at("ceiling") == "host memcpy");
  CHECK(meta.at("first_position") == 3);
  CHECK(meta.at("prompt_tokens") == 2);
  CHECK(meta.at("new_tokens") == 2);
  char ceiling[32];
  std::snprintf(ceiling, sizeof ceiling, "(%.0f GB/s, host memcpy", meta.at("ceiling_gbs").get<double>());
  CHECK(r.out_has(ceiling));

  // A row for each of the Chrome trace's events, in its order, with the same run.
  const json events = json::parse(slurp(trace)).at("traceEvents");
  REQUIRE(rows.size() == events.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    const json& e = events[i];
    CAPTURE(i);
    CHECK(e.at("args").at("task") == row.task);
    CHECK(e.at("args").at("step") == row.step);
    CHECK(e.at("args").at("stage") == row.stage);
    CHECK(e.at("cat") == row.op);
    CHECK(e.at("name") == row.op + (row.layer < 0 ? "" : " L" + std::to_string(row.layer)));
    CHECK(e.at("tid") == row.worker);
    CHECK(e.at("pid") == row.device);
    CHECK(row.device == 0);  // a graph of one device
    CHECK(e.at("ts").get<double>() == row.start_ns / 1e3);
    CHECK(e.at("dur").get<double>() == (row.end_ns - row.start_ns) / 1e3);
    CHECK(e.at("args").at("wait_us").get<double>() == row.wait_ns / 1e3);
  }

  // The bytes, from the graph's dump.
  const json dump = dump_of("synthetic:tiny", meta);
  const json& p = dump.at("params");
  const std::map<uint32_t, StepBytes> steps = check_bytes(rows, dump);
  // Each step appends a K and a V row a kv head and layer, and each q-head split of a kv head
  // reads the rows before the step's position (the prompt from position 3).
  const json info = json::parse(run_cli("info --model synthetic:tiny --json").out);
  const uint64_t kv_row = info.at("kv_bytes_per_position").get<uint64_t>(), splits = p.at("attn_q_splits").get<uint64_t>();
  REQUIRE(steps.size() == 3);  // the two prompt tokens' (the second samples the first new one), the first new one's
  uint64_t position = 3;
  for (const auto& [at, bytes] : steps) {
    const uint32_t step = at;  // CAPTURE names a copy: clang 14 cannot capture a structured binding
    CAPTURE(step);
    CHECK(bytes.attention_runs == p.at("n_layers").get<uint64_t>() * p.at("n_kv_heads").get<uint64_t>() * splits);
    CHECK(bytes.kv_read == splits * kv_row * position);
    CHECK(bytes.kv_written == kv_row);
    ++position;
  }
}

TEST_CASE("trace export refuses a --csv table or metadata file that is --out, and names one it cannot write") {
  ScratchDir dir;
  const std::string d = dir.path.string();
  const std::string same_table = "--out '" + d + "/t.csv' is also where --csv '" + d + "/t.csv' writes its table: name another file",
                    same_meta = "--out '" + d + "/t.meta.json' is also where --csv '" + d +
                                "/t.csv' writes its metadata: name another file",
                    unwritable = "--csv's metadata '" + d + "/u.meta.json': cannot open it for writing: Is a directory";
  check_error("trace export --model synthetic:tiny -o " + d + "/t.csv --csv " + d + "/t.csv", {same_table.c_str()});
  check_error("trace export --model synthetic:tiny -o " + d + "/t.meta.json --csv " + d + "/t.csv", {same_meta.c_str()});
  std::filesystem::create_directory(dir.path / "u.meta.json");
  check_error("trace export --model synthetic:tiny -n 1 --copy-gib 0.0625 -o " + d + "/u.json --csv " + d + "/u.csv",
              {unwritable.c_str()});
}

TEST_CASE("trace export --csv counts the bytes of the MoE, hybrid, fused-MLP and split-projection ops") {
  ScratchDir dir;
  const auto csv = dir.path / "t.csv";
  struct Case {
    std::string model, tiling;
  };
  for (const Case& c : {Case{"synthetic:tiny-qwen3.5-moe", ""},
                        Case{"synthetic:tiny", "--tune fused-mlp=8/2 --tune o-proj-split=2 --tune kv-head-waits=on"}}) {
    CAPTURE(c.model);
    const CliResult r = run_cli("trace export --model " + c.model + " " + c.tiling + " -e sequential -n 1 --copy-gib "
                                "0.0625 -o " + (dir.path / "t.json").string() + " --csv " + csv.string());
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    const std::vector<Row> rows = read_rows(slurp(csv));
    const json meta = json::parse(slurp(dir.path / "t.meta.json")), dump = dump_of(c.model, meta, c.tiling);
    std::map<std::string, int> ops;
    for (const Row& row : rows) ++ops[row.op];
    for (const char* op : c.tiling.empty() ? std::vector<const char*>{"router", "expert_gate_up", "expert_down_shared", "gdn", "gated_attention"}
                                           : std::vector<const char*>{"mlp", "gemv_piece"})
      CHECK_MESSAGE(ops[op] > 0, op);
    // Each step writes every state row of the GDN layers once, and the newest input of each
    // of their conv channels.
    uint64_t state = 0;
    for (const json& v : dump.at("views")) {
      const std::string name = v.at("name");
      if (name.ends_with(".gdn_state")) state += view_bytes(dump, name);
      if (name.ends_with(".gdn_conv_state")) state += column_bytes(dump, name);
    }
    const json info = json::parse(run_cli("info --model " + c.model + " --json").out);
    for (const auto& [at, bytes] : check_bytes(rows, dump)) {
      const uint32_t step = at;
      CAPTURE(step);
      CHECK(bytes.gdn_written == state);
      CHECK(bytes.kv_written == info.at("kv_bytes_per_position").get<uint64_t>());
    }
  }
}
