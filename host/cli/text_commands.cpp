// spindle tokenize / detokenize: text to token ids and back with a checkpoint's tokenizer, for
// scripts (the ids in the form --prompt-ids takes).
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "host/cli/commands.h"
#include "host/cli/model_text.h"
#include "host/cli/options.h"

namespace spindle::cli {
namespace {

struct TokenizeFlags {
  std::string model;
  std::string text;
  bool json = false;
};

struct DetokenizeFlags {
  std::string model;
  std::string ids;
  bool skip_special = false;
  bool json = false;
};

void add_tokenizer_model_option(CLI::App& cmd, std::string& model) {
  cmd.add_option("--model,-m", model, "a Hugging Face checkpoint directory holding tokenizer.json, or the "
                                      "tokenizer.json file itself")
      ->required();
}

void tokenize(const TokenizeFlags& f, bool text_given) {
  const Tokenizer tokenizer = model_tokenizer(f.model, "tokenize");
  const std::string text =
      text_given ? f.text : std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  const std::vector<uint32_t> ids = tokenizer.encode(text);
  if (f.json) {
    print_json({{"ids", ids}, {"count", ids.size()}});
    return;
  }
  std::string list;
  for (uint32_t id : ids) list += (list.empty() ? "" : ",") + std::to_string(id);
  std::printf("%s\n", list.c_str());
}

void detokenize(const DetokenizeFlags& f) {
  const Tokenizer tokenizer = model_tokenizer(f.model, "detokenize");
  const std::vector<uint32_t> ids =
      f.ids.empty() ? std::vector<uint32_t>{} : parse_uint32_list(f.ids, "IDS", "token id");
  const std::string text = tokenizer.decode(ids, f.skip_special);
  if (f.json) {
    print_json({{"text", text}});
    return;
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
}

}  // namespace

void add_text_commands(CLI::App& app) {
  auto t = std::make_shared<TokenizeFlags>();
  CLI::App* tok = app.add_subcommand("tokenize", "Text to token ids with a checkpoint's tokenizer.json");
  add_tokenizer_model_option(*tok, t->model);
  CLI::Option* text = tok->add_option("text", t->text, "the text (UTF-8); read from stdin when omitted");
  tok->add_flag("--json", t->json, "print {\"ids\": [...], \"count\": N} instead of the comma-separated ids");
  tok->callback([t, text] { tokenize(*t, text->count() > 0); });

  auto d = std::make_shared<DetokenizeFlags>();
  CLI::App* detok = app.add_subcommand("detokenize", "Token ids to text with a checkpoint's tokenizer.json");
  add_tokenizer_model_option(*detok, d->model);
  detok->add_option("ids", d->ids, "token ids, comma-separated (as tokenize prints them)")->required();
  detok->add_flag("--skip-special", d->skip_special, "leave special tokens (<|im_end|>, …) out of the text");
  detok->add_flag("--json", d->json, "print {\"text\": ...}; otherwise the text alone, with no newline added");
  detok->callback([d] { detokenize(*d); });
}

}  // namespace spindle::cli
