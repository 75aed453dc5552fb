// spindle run: decode from a prompt (text, or token ids) and report the tokens, their text and
// the speed.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "host/cli/commands.h"
#include "host/cli/generate.h"
#include "host/cli/model_text.h"
#include "host/text_stream.h"
#include "tasks/error.h"

namespace spindle::cli {
namespace {

struct RunFlags {
  GenerateFlags generate;
  SamplingOptions sampling;
  std::string prompt;  // text, used when --prompt is given
  bool ignore_eos = false;
  bool json = false;
};

void print_tokens(FILE* to, const char* label, const std::vector<uint32_t>& ids) {
  std::fprintf(to, "%s", label);
  for (uint32_t id : ids) std::fprintf(to, " %u", id);
  std::fprintf(to, "\n");
}

void print_text(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// The generated tokens' text, the EOS id that ended them left out.
std::string continuation_text(const Tokenizer& tokenizer, const DecodeResult& r) {
  TextStream pieces(tokenizer);
  std::string text;
  const size_t count = r.tokens.size() - (r.stopped ? 1 : 0);
  for (size_t i = 0; i < count; ++i) text += pieces.push(r.tokens[i]);
  return text + pieces.finish();
}

void run(const RunFlags& f, bool text_prompt) {
  std::optional<Tokenizer> tokenizer;
  std::optional<std::vector<uint32_t>> prompt;
  if (text_prompt) {
    tokenizer = model_tokenizer(f.generate.model, "--prompt", "give the prompt as token ids with --prompt-ids");
    prompt = tokenizer->encode(f.prompt);
    if (prompt->empty()) throw Error("--prompt: the text is empty; a prompt needs at least one token");
  } else {
    tokenizer = model_tokenizer_if_any(f.generate.model);
  }
  TokenStream stream;
  if (!f.ignore_eos) stream.stop_ids = model_eos_ids(f.generate.model);
  // Text from a text prompt is printed as it is generated, alone on stdout; the rest of the
  // report goes to stderr, so the text can be piped.
  const bool print_as_generated = text_prompt && !f.json;
  std::optional<TextStream> pieces;
  if (print_as_generated) {
    pieces.emplace(*tokenizer);
    stream.on_token = [&](uint32_t id) {
      if (std::find(stream.stop_ids.begin(), stream.stop_ids.end(), id) == stream.stop_ids.end())
        print_text(pieces->push(id));
    };
  }
  const Generation g = generate(f.generate, f.sampling, prompt, stream);
  const DecodeResult& r = g.result;
  if (print_as_generated) print_text(pieces->finish() + "\n");
  if (f.json) {
    nlohmann::json j = {{"model", f.generate.model},
                        {"executor", executor_kind_name(executor_options(f.generate.executor).kind)},
                        {"executor_description", g.executor},
                        {"profile", g.profile},
                        {"profile_choice", g.profile_choice},
                        {"workers", f.generate.executor.workers},
                        {"schedule", f.generate.executor.schedule},
                        {"prompt_ids", g.prompt},
                        {"tokens", r.tokens},
                        {"eos_ids", stream.stop_ids},
                        {"stopped_at_eos", r.stopped},
                        {"tokens_per_s", r.tokens_per_s},
                        {"prefill_seconds", r.prefill_seconds},
                        {"decode_seconds", r.decode_seconds}};
    if (text_prompt) j["prompt"] = f.prompt;
    if (tokenizer) j["text"] = continuation_text(*tokenizer, r);
    print_json(j);
    return;
  }
  FILE* report = text_prompt ? stderr : stdout;
  print_tokens(report, "prompt:", g.prompt);
  print_tokens(report, "tokens:", r.tokens);
  if (tokenizer && !text_prompt) std::fprintf(report, "text: %s\n", continuation_text(*tokenizer, r).c_str());
  std::fprintf(report, "prefill: %zu steps in %.3f s\n", g.prompt.size() - 1, r.prefill_seconds);
  std::fprintf(report, "decode: %zu tokens in %.3f s, %.2f tokens/s%s\n", r.tokens.size(), r.decode_seconds,
               r.tokens_per_s, r.stopped ? " (stopped at an EOS id)" : "");
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto f = std::make_shared<RunFlags>();
  CLI::App* cmd = app.add_subcommand("run", "Decode from a prompt (text or token ids) and report the tokens, their text "
                                            "and tokens/s");
  add_generate_options(*cmd, f->generate);
  CLI::Option* prompt =
      cmd->add_option("--prompt", f->prompt,
                      "prompt text, encoded by the checkpoint's tokenizer.json; the continuation is printed as it "
                      "is generated, alone on stdout (the ids and the speed go to stderr)")
          ->excludes(cmd->get_option("--prompt-ids"));
  cmd->add_flag("--ignore-eos", f->ignore_eos,
                "generate all --max-new-tokens tokens: do not stop at the checkpoint's EOS ids (generation_config.json's "
                "eos_token_id, else config.json's)");
  cmd->add_option("--temperature,-t", f->sampling.temperature, "0 = greedy argmax")
      ->capture_default_str()
      ->check([](const std::string& v) { return std::strtod(v.c_str(), nullptr) < 0 ? "'" + v + "' is below 0" : ""; });
  cmd->add_option("--top-k", f->sampling.top_k, "keep the k most likely tokens; 0 = all")
      ->capture_default_str();
  cmd->add_option("--top-p", f->sampling.top_p, "keep the smallest prefix of this mass, above 0; 1 = all")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--seed", f->sampling.seed, "sampling seed")->capture_default_str();
  cmd->add_flag("--json", f->json,
                "print the result as JSON (with the continuation's text when the checkpoint has a tokenizer)");
  cmd->callback([f, prompt] { run(*f, prompt->count() > 0); });
}

}  // namespace spindle::cli
