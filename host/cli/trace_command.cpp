// spindle trace export: run a few decode steps with per-task tracing, write the trace as
// Chrome/Perfetto JSON and as a table for notebooks (host/cli/trace_table.h), and print a per-op
// summary (time, waiting, the bubble fraction) and the steps' achieved bandwidth against the
// ceiling measured in the same run.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "host/cli/ceiling.h"
#include "host/cli/commands.h"
#include "host/cli/graph_stats.h"
#include "host/cli/options.h"
#include "host/cli/session.h"
#include "host/cli/trace_table.h"
#include "host/decode.h"
#include "tasks/error.h"

namespace spindle::cli {
namespace {

struct TraceFlags {
  std::string model;
  ExecutorFlags executor;
  std::string prompt_ids = "1,2,3,4";
  uint32_t tokens = 4;
  std::string out = "trace.json";
  std::string csv;
  uint32_t position = 0;  // of the prompt's first token
  GraphSource graph;      // a saved graph, or the context to build one for (0: the run's positions)
  double copy_gib = 1;    // the copy that measures the ceiling
  bool json = false;
};

std::string task_label(const Graph& g, uint32_t task) {
  const SpTask& t = g.tasks[task];
  return std::string(sp_opcode_name(t.op)) + (t.layer == 0xFFFFFFFFu ? "" : " L" + std::to_string(t.layer));
}

// The record's SM where the executor knows it apart from the worker (Vulkan on NVIDIA), else -1:
// the JSON's `sm` arg.
int64_t sm_field(const TaskTrace& t) { return t.sm == TaskTrace::kNoSm ? -1 : int64_t(t.sm); }

void write_chrome_trace(const Graph& g, const std::vector<TaskTrace>& tr, const std::string& path) {
  nlohmann::json events = nlohmann::json::array();
  for (const TaskTrace& t : tr) {
    const nlohmann::json args = {{"task", t.task},
                                 {"step", t.step},
                                 {"wait_us", t.wait_ns / 1e3},
                                 {"stage", g.counter_names[g.tasks[t.task].signal_counter]},
                                 {"sm", sm_field(t)}};
    events.push_back({{"name", task_label(g, t.task)},
                      {"cat", sp_opcode_name(g.tasks[t.task].op)},
                      {"ph", "X"},
                      {"pid", t.device},
                      {"tid", t.worker},
                      {"ts", t.start_ns / 1e3},
                      {"dur", (t.end_ns - t.start_ns) / 1e3},
                      {"args", args}});
  }
  std::ofstream f = open_output(path, "--out");
  f << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ns"}}.dump() << "\n";
  close_output(f, path, "--out");
}

// Where the trace names each worker's SM (Vulkan on NVIDIA): the distinct workers and SMs its
// records name, the distinct (worker, SM) pairs (each dispatch places its workgroups afresh, so
// a worker may run on several SMs over the run), and the most workers holding a task (from
// its claim to its end) at one moment on one SM: above 1, the driver put workers together.
struct SmPlacement {
  size_t workers = 0, sms = 0, pairs = 0;
  int most_on_one_sm = 0;
};

std::optional<SmPlacement> sm_placement(const std::vector<TaskTrace>& tr) {
  std::set<uint32_t> workers, sms;
  std::set<std::pair<uint32_t, uint32_t>> pairs;
  std::map<uint32_t, std::vector<std::pair<uint64_t, int>>> edges;  // SM -> (time, +1 claim or -1 end)
  for (const TaskTrace& t : tr) {
    if (t.sm == TaskTrace::kNoSm) continue;
    workers.insert(t.worker);
    sms.insert(t.sm);
    pairs.emplace(t.worker, t.sm);
    edges[t.sm].push_back({t.start_ns - t.wait_ns, +1});
    edges[t.sm].push_back({t.end_ns, -1});
  }
  if (workers.empty()) return std::nullopt;
  int most = 0;
  for (auto& [sm, e] : edges) {
    std::sort(e.begin(), e.end());  // at one time, ends before claims: a worker's tasks do not overlap
    int holding = 0;
    for (const auto& [at, change] : e) most = std::max(most, holding += change);
  }
  return SmPlacement{workers.size(), sms.size(), pairs.size(), most};
}

// Per op: runs, busy time, waiting. Bubble fraction: the share of workers × span in which no
// task ran (waiting, fetching, idle).
struct OpTotals {
  uint64_t runs = 0, busy_ns = 0, wait_ns = 0;
};

struct TraceSummary {
  std::map<std::string, OpTotals> ops;
  uint64_t busy_ns = 0;
  double span_ns = 0;
  uint32_t workers = 0;
  double bubble_fraction = 0;
  std::optional<SmPlacement> placement;
};

TraceSummary summarize(const Graph& g, const std::vector<TaskTrace>& tr, uint32_t workers) {
  TraceSummary s;
  uint64_t first = UINT64_MAX, last = 0;
  for (const TaskTrace& t : tr) {
    OpTotals& o = s.ops[sp_opcode_name(g.tasks[t.task].op)];
    ++o.runs;
    o.busy_ns += t.end_ns - t.start_ns;
    o.wait_ns += t.wait_ns;
    first = std::min(first, t.start_ns - t.wait_ns);
    last = std::max(last, t.end_ns);
    s.busy_ns += t.end_ns - t.start_ns;
    workers = std::max(workers, t.worker + 1);  // CUDA records the SM, which may exceed the blocks
  }
  s.span_ns = double(last - first);
  s.workers = workers;
  s.bubble_fraction = s.span_ns > 0 ? 1.0 - double(s.busy_ns) / (s.span_ns * workers) : 0.0;
  s.placement = sm_placement(tr);
  return s;
}

double busy_share(const OpTotals& o, const TraceSummary& s) { return s.busy_ns ? double(o.busy_ns) / s.busy_ns : 0.0; }

void print_summary(const TraceSummary& s) {
  std::printf("%-14s %8s %12s %12s %8s\n", "op", "runs", "busy us", "waiting us", "busy %");
  for (const auto& [name, o] : s.ops)
    std::printf("%-14s %8llu %12.1f %12.1f %7.1f%%\n", name.c_str(), (unsigned long long)o.runs, o.busy_ns / 1e3,
                o.wait_ns / 1e3, 100.0 * busy_share(o, s));
  std::printf("span %.1f us over %u workers; bubble fraction %.3f\n", s.span_ns / 1e3, s.workers, s.bubble_fraction);
  if (const auto& p = s.placement)
    std::printf("SMs: %zu workers on %zu SMs (%zu worker-SM pairs over the run's dispatches); "
                "at most %d workers holding a task at once on one SM\n",
                p->workers, p->sms, p->pairs, p->most_on_one_sm);
}

// A step's time, from the step before's last end to its own (the run's first step: from its
// first claim), as a persistent kernel's steps overlap; the bytes it reads, every weight and
// the K/V rows 0..its position, the recurrent state read and written; so its achieved bandwidth. Medians over the steps.
struct StepBandwidth {
  size_t steps = 0;
  double median_us = 0, achieved_gbs = 0;
};

StepBandwidth step_bandwidth(const Graph& g, const std::vector<TaskTrace>& tr, uint32_t first_position) {
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> spans;  // step -> (first claim, last end)
  for (const TaskTrace& t : tr) {
    auto& [claim, end] = spans.try_emplace(t.step, t.start_ns - t.wait_ns, t.end_ns).first->second;
    claim = std::min(claim, t.start_ns - t.wait_ns);
    end = std::max(end, t.end_ns);
  }
  const uint32_t first_step = spans.begin()->first;
  std::vector<double> us, gbs;
  uint64_t before = spans.begin()->second.first;
  for (const auto& [step, span] : spans) {
    const double ns = double(span.second - before);
    const double bytes = step_bytes(g, first_position + step - first_step + 1);
    before = span.second;
    us.push_back(ns / 1e3);
    gbs.push_back(bytes / ns);  // bytes a ns: GB/s
  }
  return {spans.size(), median(us), median(gbs)};
}

void print_step_bandwidth(const StepBandwidth& b, const Ceiling& ceiling) {
  std::printf("steps: %zu, median %.1f us a step (traced); weights, K/V and recurrent state moved at %.1f GB/s, %.1f%% of the "
              "ceiling (%.0f GB/s, %s, median)\n",
              b.steps, b.median_us, b.achieved_gbs, 100 * b.achieved_gbs / ceiling.gbs, ceiling.gbs, ceiling.what.c_str());
}

nlohmann::json summary_json(const TraceSummary& s, const StepBandwidth& b, const Ceiling& ceiling) {
  nlohmann::json ops = nlohmann::json::object();
  for (const auto& [name, o] : s.ops)
    ops[name] = {{"runs", o.runs}, {"busy_us", o.busy_ns / 1e3}, {"waiting_us", o.wait_ns / 1e3},
                 {"busy_fraction", busy_share(o, s)}};
  nlohmann::json placement = nullptr;
  if (const auto& p = s.placement)
    placement = {{"workers", p->workers}, {"sms", p->sms}, {"worker_sm_pairs", p->pairs},
                 {"most_workers_on_one_sm", p->most_on_one_sm}};
  return {{"ops", ops},
          {"span_us", s.span_ns / 1e3},
          {"workers", s.workers},
          {"bubble_fraction", s.bubble_fraction},
          {"sm_placement", placement},
          {"steps", b.steps},
          {"step_us_median", b.median_us},
          {"achieved_gbs", b.achieved_gbs},
          {"ceiling_gbs", ceiling.gbs},
          {"ceiling", ceiling.what},
          {"fraction_of_ceiling", b.achieved_gbs / ceiling.gbs}};
}

// Refuses a --csv whose table or metadata would be written over --out.
void check_distinct_outputs(const TraceFlags& f) {
  if (f.csv.empty()) return;
  const auto same = [](const std::string& a, const std::string& b) {
    return std::filesystem::absolute(a).lexically_normal() == std::filesystem::absolute(b).lexically_normal();
  };
  for (const std::string& path : {f.csv, trace_meta_path(f.csv)})
    if (same(path, f.out))
      throw Error("--out '" + f.out + "' is also where --csv '" + f.csv + "' writes " +
                  (path == f.csv ? "its table" : "its metadata") + ": name another file");
}

void export_trace(const TraceFlags& f) {
  check_distinct_outputs(f);
  const std::vector<uint32_t> prompt = parse_uint32_list(f.prompt_ids, "--prompt-ids", "token id");
  const ProfiledSession opened = open_profiled_session(
      f.model, f.graph, f.executor, uint64_t(f.position) + prompt.size() + f.tokens,
      "--position " + std::to_string(f.position) + ", a prompt of " + std::to_string(prompt.size()) +
          " tokens and --max-new-tokens " + std::to_string(f.tokens),
      true);
  const auto& session = opened.session;
  const ExecutorOptions& options = opened.exec;
  const Ceiling ceiling = measure_ceiling(options, f.copy_gib);
  auto ex = open_executor(*session, options);
  ex->set_tracing(true);
  decode(*ex, session->graph, prompt, f.tokens, {}, f.position);
  const std::vector<TaskTrace>& tr = ex->trace();
  if (tr.empty()) throw Error("the executor recorded no trace");
  write_chrome_trace(session->graph, tr, f.out);
  std::fprintf(stderr, "spindle: wrote %zu task records to %s\n", tr.size(), f.out.c_str());
  if (!f.csv.empty()) {
    const nlohmann::json meta = {{"format_version", 1},
                                 {"model", f.model},
                                 {"graph", f.graph.file.empty() ? nlohmann::json(nullptr) : nlohmann::json(f.graph.file)},
                                 {"executor", ex->describe()},
                                 {"workers", ex->worker_count()},
                                 {"devices", session->graph.devices},
                                 {"ceiling_gbs", ceiling.gbs},
                                 {"ceiling", ceiling.what},
                                 {"first_position", f.position},
                                 {"prompt_tokens", prompt.size()},
                                 {"new_tokens", f.tokens},
                                 {"context", session->graph.params.context}};
    write_trace_table(session->graph, tr, f.position, meta, f.csv, "--csv");
    std::fprintf(stderr, "spindle: wrote the table to %s and %s\n", f.csv.c_str(), trace_meta_path(f.csv).c_str());
  }
  const TraceSummary summary = summarize(session->graph, tr, ex->worker_count());
  const StepBandwidth bandwidth = step_bandwidth(session->graph, tr, f.position);
  if (f.json) {
    nlohmann::json j = summary_json(summary, bandwidth, ceiling);
    j["trace"] = f.out;
    j["records"] = tr.size();
    j["csv"] = f.csv.empty() ? nlohmann::json(nullptr) : nlohmann::json(f.csv);
    j["executor"] = ex->describe();
    print_json(j);
    return;
  }
  print_summary(summary);
  print_step_bandwidth(bandwidth, ceiling);
}

}  // namespace

void add_trace_command(CLI::App& app) {
  CLI::App* trace = app.add_subcommand("trace", "Per-task traces");
  trace->require_subcommand(1);
  auto f = std::make_shared<TraceFlags>();
  CLI::App* cmd = trace->add_subcommand(
      "export",
      "Decode with per-task tracing; write Chrome/Perfetto JSON (and a CSV table for notebooks), print a per-op "
      "summary and the steps' achieved bandwidth against the measured ceiling");
  add_model_option(*cmd, f->model);
  add_executor_options(*cmd, f->executor);
  cmd->add_option("--prompt-ids,-p", f->prompt_ids, "prompt token ids, comma-separated")->capture_default_str();
  cmd->add_option("--max-new-tokens,-n", f->tokens, "tokens to generate")->capture_default_str();
  cmd->add_option("--out,-o", f->out, "Chrome/Perfetto trace JSON to write")
      ->capture_default_str()
      ->check(output_file());
  cmd->add_option("--csv", f->csv,
                  "also write one CSV row per task run with the bytes it moved, and beside it (NAME.meta.json for "
                  "NAME.csv) the export's model, executor and ceiling: docs/trace-format.md, docs/notebooks/trace.ipynb")
      ->check(output_file());
  cmd->add_option("--position", f->position,
                  "position of the prompt's first token; the KV rows before it hold zeros (as in bench --positions): "
                  "a trace at a long context without decoding up to it")
      ->capture_default_str();
  add_graph_source_options(*cmd, f->graph,
                           "--position plus the prompt plus the new tokens (a longer one splits attention into more "
                           "chunks)");
  add_copy_option(*cmd, f->copy_gib);
  cmd->add_flag("--json", f->json,
                "print the summary as JSON instead: {trace, records, csv, executor, ops: {OP: {runs, busy_us, "
                "waiting_us, busy_fraction}}, span_us, workers, bubble_fraction, sm_placement, steps, step_us_median, "
                "achieved_gbs, ceiling_gbs, ceiling, fraction_of_ceiling}");
  cmd->callback([f] { export_trace(*f); });
}

}  // namespace spindle::cli
