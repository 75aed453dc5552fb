// spindle gate md5 | kl: the correctness gates. A failed gate exits with status 1.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "host/cli/commands.h"
#include "host/cli/generate.h"
#include "host/cli/profile.h"
#include "host/cli/session.h"
#include "host/gates.h"
#include "tasks/error.h"

namespace spindle::cli {
namespace {

struct Md5Flags {
  GenerateFlags generate;
  std::string expect;
  bool json = false;
};

int md5_gate(const Md5Flags& f) {
  const Generation g = generate(f.generate, SamplingOptions{});
  const std::string md5 = token_md5(g.result.tokens);
  std::string expect = f.expect;
  std::transform(expect.begin(), expect.end(), expect.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  const bool checked = !expect.empty(), match = expect == md5;
  if (f.json) {
    nlohmann::json j = {{"md5", md5}, {"tokens", g.result.tokens}};
    if (checked) j["match"] = match;
    print_json(j);
  } else {
    std::printf("md5 %s (%zu tokens)\n", md5.c_str(), g.result.tokens.size());
    if (checked && match) std::printf("md5 gate: PASS\n");
  }
  std::fflush(stdout);
  if (checked && !match)
    std::fprintf(stderr, "spindle: md5 gate FAILED: expected %s, got %s\n", expect.c_str(),
                 md5.c_str());
  return checked && !match ? 1 : 0;
}

struct KlFlags {
  std::string model;
  std::string ids;
  std::string ref_file;
  std::string ref_executor;
  GraphSource graph;  // a saved graph, or the context to build one for (0: the number of ids)
  ExecutorFlags executor;
  KlThresholds thresholds;
  bool json = false;
};

int kl_gate(const KlFlags& f) {
  const std::vector<uint32_t> ids = parse_uint32_list(f.ids, "--ids", "token id");
  ExecutorOptions ref_opt;
  if (!f.ref_executor.empty()) ref_opt.kind = parse_executor_kind(f.ref_executor);
  else if (f.ref_file.empty())
    throw Error("gate kl needs a reference: --ref FILE (logits saved from HF) or "
                "--ref-executor fp64");

  // Teacher-forced, so never the cluster program, which samples (greedy = false).
  const ProfiledSession opened = open_profiled_session(f.model, f.graph, f.executor, ids.size(),
                                                       "--ids' " + std::to_string(ids.size()) + " tokens", false);
  const auto& session = opened.session;
  const ExecutorOptions& ours_opt = opened.exec;
  const Graph& graph = session->graph;
  const LogitRows ref = f.ref_file.empty()
                            ? teacher_forced_logits(*open_executor(*session, ref_opt), graph, ids)
                            : read_reference_logits(f.ref_file, ids.size(), graph.params.vocab);
  const LogitRows ours = teacher_forced_logits(*open_executor(*session, ours_opt), graph, ids);
  const KlReport r = compare_logits(ref, ours);
  const bool pass = kl_passes(r, f.thresholds);
  if (f.json) {
    print_json({{"mean_kl", r.mean_kl},
                {"max_kl", r.max_kl},
                {"max_kl_position", r.max_kl_position},
                {"top1_agreement", r.top1_agreement},
                {"positions", r.positions},
                {"pass", pass}});
  } else {
    std::printf("KL(ref || ours) over %zu positions: mean %.3e, max %.3e (position %zu)\n",
                r.positions, r.mean_kl, r.max_kl, r.max_kl_position);
    std::printf("top-1 agreement: %.2f%%\n", 100 * r.top1_agreement);
    std::printf("KL gate: %s (mean <= %g, max <= %g)\n", pass ? "PASS" : "FAIL",
                f.thresholds.max_mean_kl, f.thresholds.max_kl);
  }
  return pass ? 0 : 1;
}

void add_md5_gate(CLI::App& gate, int& status) {
  auto f = std::make_shared<Md5Flags>();
  CLI::App* cmd = gate.add_subcommand(
      "md5", "Greedy-decode and print the md5 of the new token ids (little-endian int32)");
  add_generate_options(*cmd, f->generate);
  cmd->add_option("--expect", f->expect, "expected md5 (32 hex digits); a mismatch exits with status 1")
      ->check([](const std::string& v) {
        return v.size() == 32 && v.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos
                   ? std::string()
                   : "'" + v + "' is not an md5 (32 hex digits)";
      });
  cmd->add_flag("--json", f->json, "print {md5, tokens, match} as JSON");
  cmd->callback([f, &status] { status = md5_gate(*f); });
}

void add_kl_gate(CLI::App& gate, int& status) {
  auto f = std::make_shared<KlFlags>();
  CLI::App* cmd = gate.add_subcommand(
      "kl", "Teacher-force token ids and compare every next-token distribution with a "
            "reference: KL(ref || ours) and top-1 agreement");
  add_model_option(*cmd, f->model);
  cmd->add_option("--ids", f->ids, "token ids to feed, comma-separated")->required();
  CLI::Option* ref =
      cmd->add_option("--ref", f->ref_file, "reference logits: safetensors with f32 `logits` [len(ids), vocab]")
          ->check(input_file());
  cmd->add_option("--ref-executor", f->ref_executor,
                  "compute the reference with this executor on the same graph (usually fp64)")
      ->excludes(ref);
  add_graph_source_options(*cmd, f->graph, "the number of ids");
  add_executor_options(*cmd, f->executor);
  cmd->add_option("--max-mean-kl", f->thresholds.max_mean_kl,
                  "fail when the mean KL is above this")
      ->capture_default_str();
  cmd->add_option("--max-kl", f->thresholds.max_kl,
                  "fail when any position's KL is above this (default: no bound)");
  cmd->add_flag("--json", f->json, "print {mean_kl, max_kl, top1_agreement, positions, pass}");
  cmd->callback([f, &status] { status = kl_gate(*f); });
}

}  // namespace

void add_gate_commands(CLI::App& app, int& status) {
  CLI::App* gate = app.add_subcommand("gate", "Correctness gates (exit status 1 on failure)");
  gate->require_subcommand(1);
  add_md5_gate(*gate, status);
  add_kl_gate(*gate, status);
}

}  // namespace spindle::cli
