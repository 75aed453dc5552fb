// Decoding from the command line: the options `run` and `gate md5` share, and the run itself.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "host/cli/options.h"
#include "host/decode.h"

namespace spindle::cli {

struct GenerateFlags {
  std::string model;
  std::string prompt_ids = "1,2,3,4";
  uint32_t max_new_tokens = 16;
  GraphSource graph;
  ExecutorFlags executor;
};

// --model, --prompt-ids, --max-new-tokens, --context, the tiling options, --graph and the
// executor options (--profile and --tune among them).
void add_generate_options(CLI::App& cmd, GenerateFlags& flags);

struct Generation {
  std::vector<uint32_t> prompt;
  std::string executor;  // the executor's own description
  std::string profile;   // --profile's name
  std::string profile_choice;  // what it picked and why, as on stderr
  DecodeResult result;
};

// Checks the flags, loads the model, builds the graph (context: the flag, else just enough
// for the prompt and the new tokens) or reads the saved one, and decodes from `prompt` (when
// the command has the ids from elsewhere, e.g. from text), else from --prompt-ids, each new
// token going to `stream`.
Generation generate(const GenerateFlags& flags, const SamplingOptions& sampling,
                    const std::optional<std::vector<uint32_t>>& prompt = std::nullopt, const TokenStream& stream = {});

}  // namespace spindle::cli
