#include "host/cli/generate.h"

#include "host/cli/session.h"

namespace spindle::cli {

void add_generate_options(CLI::App& cmd, GenerateFlags& flags) {
  add_model_option(cmd, flags.model);
  cmd.add_option("--prompt-ids,-p", flags.prompt_ids, "prompt token ids, comma-separated")
      ->capture_default_str();
  cmd.add_option("--max-new-tokens,-n", flags.max_new_tokens, "tokens to generate")
      ->capture_default_str();
  add_graph_source_options(cmd, flags.graph, "the prompt plus the new tokens");
  add_executor_options(cmd, flags.executor);
}

Generation generate(const GenerateFlags& flags, const SamplingOptions& sampling,
                    const std::optional<std::vector<uint32_t>>& prompt, const TokenStream& stream) {
  Generation g;
  g.prompt = prompt ? *prompt : parse_uint32_list(flags.prompt_ids, "--prompt-ids", "token id");
  const ProfiledSession opened = open_profiled_session(
      flags.model, flags.graph, flags.executor, uint64_t(g.prompt.size()) + flags.max_new_tokens,
      "a prompt of " + std::to_string(g.prompt.size()) + " tokens and --max-new-tokens " +
          std::to_string(flags.max_new_tokens),
      sampling.temperature == 0);
  const auto& session = opened.session;
  const auto ex = open_executor(*session, opened.exec);
  g.executor = ex->describe();
  g.profile = profile_name(opened.profile);
  g.profile_choice = opened.choice;
  g.result = decode(*ex, session->graph, g.prompt, flags.max_new_tokens, sampling, 0, stream);
  return g;
}

}  // namespace spindle::cli
