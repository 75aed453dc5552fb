// spindle bench: ms/token of each executor mode at given context positions, against the
// floor (bytes one token must read / measured copy bandwidth), all in one run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "host/cli/ceiling.h"
#include "host/cli/commands.h"
#include "host/cli/graph_stats.h"
#include "host/cli/options.h"
#include "host/cli/session.h"
#include "host/decode.h"
#include "host/gates.h"
#include "tasks/error.h"
#ifdef SPINDLE_HAVE_CUDA
#include "megakernel/cuda_executor.h"
#endif

namespace spindle::cli {
namespace {

// Timed runs a bench may ask for: their timings are kept for the median, and a million is more
// than any median needs.
constexpr uint32_t kMaxReps = 1000000;

struct BenchFlags {
  std::string model;
  ExecutorFlags executor;
  std::string modes;            // CUDA modes to compare; empty = all three
  std::string positions = "0";  // context positions the timed steps start at
  uint32_t tokens = 32;
  uint32_t reps = 5;
  double copy_gib = 4;
  GraphSource graph;            // built: its context set from the positions
  bool json = false;
};

// Points the step state at `position` with token 1 and nothing forced, the recurrent state
// empty. The KV rows before it hold whatever earlier steps wrote (zeros at first): the memory
// traffic is that of a real prefix of that length, the attention values are not.
void restart_at(Executor& ex, uint32_t position) {
  ex.clear_recurrent_state();
  SpStepState& st = ex.state();
  st = SpStepState{};
  st.token = 1;
  st.position = position;
  st.forced_count = 1;
  ex.forced_tokens()[0] = 1;
}

struct Row {
  uint32_t position;
  std::string mode;
  std::string executor;
  std::vector<double> ms_per_token;
  std::string md5;
};

// Times `reps` runs of `tokens` steps from `position`, after one warm-up run. Device
// executors report device time; the CPU executors wall time.
Row time_mode(Executor& ex, const std::string& mode, uint32_t position, uint32_t tokens, uint32_t reps) {
  Row r{position, mode, ex.describe(), {}, {}};
  for (uint32_t rep = 0; rep <= reps; ++rep) {
    restart_at(ex, position);
    const auto t0 = std::chrono::steady_clock::now();
    ex.run_steps(tokens);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
#ifdef SPINDLE_HAVE_CUDA
    if (auto* cuda = dynamic_cast<CudaExecutor*>(&ex)) ms = cuda->last_run_device_ms();
#endif
    const auto out = ex.out_tokens().subspan(0, tokens);
    const std::string md5 = token_md5(out);
    if (rep == 0) {
      require_finite_logits(ex, position);  // a result worth timing: every timed run reproduces it
      r.md5 = md5;  // the warm-up's tokens: every timed run must reproduce them
      continue;
    }
    if (md5 != r.md5) throw Error("bench: mode " + mode + " gave different tokens on repetition " + std::to_string(rep));
    r.ms_per_token.push_back(ms / tokens);
  }
  return r;
}

// --modes' CUDA modes, each checked before anything runs.
std::vector<std::string> cuda_modes(const std::string& list) {
  const std::vector<std::string> modes = split_list(list);
  for (const std::string& mode : modes) {
    try {
      parse_cuda_mode(mode);
    } catch (const Error& e) {
      throw Error("--modes: " + std::string(e.what()));
    }
  }
  return modes;
}

void bench(const BenchFlags& f) {
  const std::vector<uint32_t> positions = parse_uint32_list(f.positions, "--positions", "position");
  const uint32_t max_pos = *std::max_element(positions.begin(), positions.end());

  const std::vector<std::string> asked = cuda_modes(f.modes.empty() ? "megakernel,per-op,graph" : f.modes);
  const ProfiledSession opened = open_profiled_session(
      f.model, f.graph, f.executor, uint64_t(max_pos) + f.tokens + 1,
      "--positions up to " + std::to_string(max_pos) + " and --tokens " + std::to_string(f.tokens), true);
  const auto& session = opened.session;
  const ExecutorOptions& base = opened.exec;
  const bool cuda = base.kind == ExecutorKind::Cuda;
  const std::vector<std::string> modes = cuda ? asked : std::vector<std::string>{executor_kind_name(base.kind)};
  const Graph& g = session->graph;
  if (g.devices > 1)
    throw Error("bench: the graph is split over " + std::to_string(g.devices) +
                " devices; a floor over several devices needs each device's copy ceiling, and only the CPU executors "
                "run several devices yet, simulating them (run and gate check their bits; docs/multi-device.md)");

  const Ceiling ceiling = measure_ceiling(base, f.copy_gib);

  const uint64_t weight_bytes = weight_bytes_per_token(g);
  const uint64_t kv_bytes = kv_bytes_per_position(g), recurrent_bytes = recurrent_state_bytes(g);
  std::vector<Row> rows;
  for (const std::string& mode : modes) {
    ExecutorOptions opt = base;
    if (cuda) opt.cuda_mode = parse_cuda_mode(mode);
    auto ex = open_executor(*session, opt);
    for (uint32_t p : positions) rows.push_back(time_mode(*ex, mode, p, f.tokens, f.reps));
  }

  nlohmann::json out = {{"model", f.model},
                        {"profile", profile_name(opened.profile)},
                        {"profile_choice", opened.choice},
                        {"graph", {{"from", f.graph.file.empty() ? "builder" : "file"},
                                   {"file", f.graph.file.empty() ? nlohmann::json() : nlohmann::json(f.graph.file)},
                                   {"built_from", g.model},
                                   {"tasks", g.tasks.size()},
                                   {"context", g.params.context}}},
                        {"ceiling_gbs", ceiling.gbs},
                        {"ceiling", ceiling.what},
                        {"weight_bytes_per_token", weight_bytes},
                        {"routed_weight_bytes_per_token", routed_weight_bytes_per_token(g)},
                        {"kv_bytes_per_position", kv_bytes},
                        {"recurrent_state_bytes", recurrent_bytes},
                        {"tokens", f.tokens},
                        {"reps", f.reps},
                        {"rows", nlohmann::json::array()}};
  for (const Row& r : rows) {
    // A step at position q reads the cache rows 0..q: average over the timed steps.
    const double bytes = step_bytes(g, r.position + (f.tokens + 1.0) / 2);
    const double med = median(r.ms_per_token);
    const double floor_ms = bytes / (ceiling.gbs * 1e9) * 1e3;
    bool same_tokens = true;
    for (const Row& other : rows)
      if (other.position == r.position && other.md5 != r.md5) same_tokens = false;
    out["rows"].push_back({{"position", r.position},
                           {"mode", r.mode},
                           {"executor", r.executor},
                           {"ms_per_token", med},
                           {"ms_per_token_min", *std::min_element(r.ms_per_token.begin(), r.ms_per_token.end())},
                           {"ms_per_token_max", *std::max_element(r.ms_per_token.begin(), r.ms_per_token.end())},
                           {"bytes_per_token", bytes},
                           {"achieved_gbs", bytes / (med * 1e-3) / 1e9},
                           {"floor_ms", floor_ms},
                           {"fraction_of_floor", floor_ms / med},
                           {"tokens_md5", r.md5},
                           {"tokens_match_other_modes", same_tokens}});
  }
  if (f.json) {
    print_json(out);
    return;
  }
  std::printf("ceiling: %.0f GB/s (%s, median)\n", ceiling.gbs, ceiling.what.c_str());
  std::printf("model: %s, weights read per token %.3f GB, KV %.1f KB per position", f.model.c_str(),
              weight_bytes / 1e9, kv_bytes / 1e3);
  if (recurrent_bytes) std::printf(", recurrent state %.1f MB read and written per token", recurrent_bytes / 1e6);
  std::printf("\n");
  if (f.graph.file.empty())
    std::printf("graph: built for the model (%zu tasks, context %u)\n", g.tasks.size(), g.params.context);
  else
    std::printf("graph: read from %s, not built (built from %s; %zu tasks, context %u)\n", f.graph.file.c_str(),
                g.model.c_str(), g.tasks.size(), g.params.context);
  if (const uint64_t routed = out["routed_weight_bytes_per_token"].get<uint64_t>())
    std::printf("of the weights, %.3f GB are the experts the routers choose: k distinct experts a layer every "
                "step, so every step reads that many bytes of them, whichever experts they are\n",
                routed / 1e9);
  std::printf("%8s  %-11s %10s %9s %9s %8s %9s %7s  %s\n", "position", "mode", "ms/token", "min", "max", "GB/s",
              "floor ms", "floor%", "tokens md5 (same across modes)");
  for (const auto& r : out["rows"])
    std::printf("%8u  %-11s %10.4f %9.4f %9.4f %8.0f %9.4f %6.1f%%  %s (%s)\n", r["position"].get<uint32_t>(),
                r["mode"].get<std::string>().c_str(), r["ms_per_token"].get<double>(),
                r["ms_per_token_min"].get<double>(), r["ms_per_token_max"].get<double>(),
                r["achieved_gbs"].get<double>(), r["floor_ms"].get<double>(),
                100 * r["fraction_of_floor"].get<double>(), r["tokens_md5"].get<std::string>().c_str(),
                r["tokens_match_other_modes"].get<bool>() ? "yes" : "NO");
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto f = std::make_shared<BenchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Median ms/token per executor mode and context position, against the measured bandwidth floor");
  add_model_option(*cmd, f->model);
  add_executor_options(*cmd, f->executor);
  cmd->add_option("--modes", f->modes,
                  "CUDA modes to compare, comma-separated (default: megakernel,per-op,graph); other executors run "
                  "their one mode");
  cmd->add_option("--positions", f->positions,
                  "context positions the timed steps start at, comma-separated, run in turn; the KV rows before a "
                  "position hold what earlier runs wrote, so its tokens md5 depends on the positions before it")
      ->capture_default_str();
  add_ranged_option(*cmd, "--tokens,-n", f->tokens, "decode steps per timed run", 1u, UINT32_MAX);
  add_ranged_option(*cmd, "--reps", f->reps, "timed runs after one warm-up run; the median is reported", 1u, kMaxReps);
  add_graph_file_option(*cmd, f->graph.file,
                        "time the graph saved in this .sptg file (spindle graph save) with --model's weights instead "
                        "of building one; refused when it was built for another model or shape, or when --positions "
                        "and --tokens need more positions than its context",
                        {});
  add_copy_option(*cmd, f->copy_gib);
  cmd->add_flag("--json", f->json, "print the results as JSON");
  cmd->callback([f] { bench(*f); });
}

}  // namespace spindle::cli
