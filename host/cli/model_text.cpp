#include "host/cli/model_text.h"

#include <filesystem>

#include "host/generation_config.h"
#include "host/synthetic.h"
#include "tasks/error.h"

namespace spindle::cli {
namespace {

namespace fs = std::filesystem;

bool is_synthetic(const std::string& model) { return model.starts_with(kSyntheticPrefix); }

fs::path tokenizer_path(const std::string& model) {
  std::error_code ec;
  return fs::is_directory(model, ec) ? fs::path(model) / "tokenizer.json" : fs::path(model);
}

}  // namespace

Tokenizer model_tokenizer(const std::string& model, const std::string& needed_by, const std::string& otherwise) {
  const std::string instead = otherwise.empty() ? "" : "; " + otherwise;
  if (is_synthetic(model))
    throw Error(needed_by + " needs a tokenizer, and " + model + " has none: a synthetic model has token ids only" +
                instead);
  const fs::path path = tokenizer_path(model);
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw Error(needed_by + " needs a tokenizer, and the model has none: there is no " + path.string() +
                " (a Hugging Face checkpoint's tokenizer.json)" + instead);
  return Tokenizer::load(path);
}

std::optional<Tokenizer> model_tokenizer_if_any(const std::string& model) {
  std::error_code ec;
  if (is_synthetic(model) || !fs::exists(tokenizer_path(model), ec)) return std::nullopt;
  return Tokenizer::load(tokenizer_path(model));
}

std::vector<uint32_t> model_eos_ids(const std::string& model) {
  return is_synthetic(model) ? std::vector<uint32_t>{} : checkpoint_eos_ids(model);
}

}  // namespace spindle::cli
