// spindle run: decode from a prompt and report the tokens and the speed.
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <nlohmann/json.hpp>

#include "host/cli/commands.h"
#include "host/cli/generate.h"

namespace spindle::cli {
namespace {

struct RunFlags {
  GenerateFlags generate;
  SamplingOptions sampling;
  bool json = false;
};

void print_tokens(const char* label, const std::vector<uint32_t>& ids) {
  std::printf("%s", label);
  for (uint32_t id : ids) std::printf(" %u", id);
  std::printf("\n");
}

void run(const RunFlags& f) {
  const Generation g = generate(f.generate, f.sampling);
  const DecodeResult& r = g.result;
  if (f.json) {
    print_json({{"model", f.generate.model},
                {"executor", executor_kind_name(executor_options(f.generate.executor).kind)},
                {"executor_description", g.executor},
                {"workers", f.generate.executor.workers},
                {"schedule", f.generate.executor.schedule},
                {"prompt_ids", g.prompt},
                {"tokens", r.tokens},
                {"tokens_per_s", r.tokens_per_s},
                {"prefill_seconds", r.prefill_seconds},
                {"decode_seconds", r.decode_seconds}});
    return;
  }
  print_tokens("prompt:", g.prompt);
  print_tokens("tokens:", r.tokens);
  std::printf("prefill: %zu steps in %.3f s\n", g.prompt.size() - 1, r.prefill_seconds);
  std::printf("decode: %zu tokens in %.3f s, %.2f tokens/s\n", r.tokens.size(),
              r.decode_seconds, r.tokens_per_s);
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto f = std::make_shared<RunFlags>();
  CLI::App* cmd = app.add_subcommand("run", "Decode from prompt token ids and report tokens/s");
  add_generate_options(*cmd, f->generate);
  cmd->add_option("--temperature,-t", f->sampling.temperature, "0 = greedy argmax")
      ->capture_default_str()
      ->check([](const std::string& v) { return std::strtod(v.c_str(), nullptr) < 0 ? "'" + v + "' is below 0" : ""; });
  cmd->add_option("--top-k", f->sampling.top_k, "keep the k most likely tokens; 0 = all")
      ->capture_default_str();
  cmd->add_option("--top-p", f->sampling.top_p, "keep the smallest prefix of this mass, above 0; 1 = all")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--seed", f->sampling.seed, "sampling seed")->capture_default_str();
  cmd->add_flag("--json", f->json, "print the result as JSON");
  cmd->callback([f] { run(*f); });
}

}  // namespace spindle::cli
