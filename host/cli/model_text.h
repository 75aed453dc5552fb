// The text side of the model `--model` names: its tokenizer and its EOS ids. A synthetic model
// has token ids only; a checkpoint directory has a tokenizer when it holds tokenizer.json.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "host/tokenizer.h"

namespace spindle::cli {

// The tokenizer of `model`: a checkpoint directory's tokenizer.json, or a tokenizer.json file
// named directly. Throws spindle::Error saying what is missing, for `needed_by` (the option or
// command that needs text), and then `otherwise` (what to do instead) where it is not empty: a
// synthetic model has no tokenizer; a directory without tokenizer.json is named with the path
// looked for.
Tokenizer model_tokenizer(const std::string& model, const std::string& needed_by, const std::string& otherwise = "");

// The tokenizer of `model` when it has one, else none.
std::optional<Tokenizer> model_tokenizer_if_any(const std::string& model);

// The ids a generation from `model` stops at (host/generation_config.h); none for a synthetic
// model.
std::vector<uint32_t> model_eos_ids(const std::string& model);

}  // namespace spindle::cli
