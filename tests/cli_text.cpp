// spindle tokenize, detokenize and run --prompt: text in and out with a checkpoint's
// tokenizer.json (the fixture qwen2-bpe-tokenizer), and the refusals where there is none.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_run.h"

using nlohmann::json;
using spindle::test::check_error;
using spindle::test::CliResult;
using spindle::test::run_cli;
using spindle::test::run_json;
using spindle::test::ScratchDir;

namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = SPINDLE_FIXTURES_DIR;
const std::string kTokenizerDir = (kFixtures / "qwen2-bpe-tokenizer").string();

// A prompt whose ids (40, 261, 76) the tiny model's 512-token vocabulary holds.
const char* kPrompt = "I am";

// The HF fixture qwen3-tiny with the tokenizer fixture's tokenizer.json beside it.
struct CheckpointWithTokenizer {
  ScratchDir dir;
  CheckpointWithTokenizer() {
    for (const char* f : {"config.json", "model.safetensors"})
      fs::create_symlink(kFixtures / "qwen3-tiny" / f, dir.path / f);
    fs::copy_file(kTokenizerDir + "/tokenizer.json", dir.path / "tokenizer.json");
  }
  void write_generation_config(const json& j) const { std::ofstream(dir.path / "generation_config.json") << j.dump(); }
  std::string model() const { return "--model " + dir.path.string(); }
};

// "1,2,3", as --prompt-ids and detokenize take them.
std::string id_list(const json& ids) {
  std::string list;
  for (const json& id : ids) {
    if (!list.empty()) list += ',';
    list += std::to_string(id.get<uint32_t>());
  }
  return list;
}

}  // namespace

TEST_CASE("tokenize gives the library's ids, and detokenize gives the text back") {
  std::ifstream in(kTokenizerDir + "/corpus.json");
  const json corpus = json::parse(in);
  const json& line = corpus["lines"][13];  // a chat turn: special tokens inside text
  const std::string text = line["text"];
  REQUIRE(text.find("<|im_start|>") != std::string::npos);
  ScratchDir dir;
  std::ofstream(dir.path / "text", std::ios::binary) << text;

  const CliResult ids = run_cli("tokenize --model " + kTokenizerDir + " < " + (dir.path / "text").string());
  REQUIRE(ids.status == 0);
  const std::string expected = id_list(line["ids"]);
  CHECK(ids.out == expected + "\n");

  const CliResult back = run_cli("detokenize --model " + kTokenizerDir + " " + expected);
  REQUIRE(back.status == 0);
  CHECK(back.out == text);
  CHECK(run_json("detokenize --skip-special --model " + kTokenizerDir + " " + expected).at("text") ==
        line["decoded_skip_special"]);
  const json j = run_json("tokenize --model " + kTokenizerDir + "/tokenizer.json '" + std::string("héllo 世界") + "'");
  CHECK(j.at("count") == j.at("ids").size());
  CHECK(run_json("detokenize --model " + kTokenizerDir + " " + id_list(j.at("ids"))).at("text") == "héllo 世界");
}

TEST_CASE("detokenize refuses ids outside the vocabulary, and ids that are not numbers") {
  check_error("detokenize --model " + kTokenizerDir + " 1,99999",
              {"token id 99999 at index 1 is not in the tokenizer's vocabulary"});
  check_error("detokenize --model " + kTokenizerDir + " 1,x", {"'x'", "is not a token id"});
}

TEST_CASE("text needs a tokenizer: a synthetic model and a checkpoint without tokenizer.json say so") {
  check_error("run --model synthetic:tiny --prompt hello",
              {"--prompt needs a tokenizer", "synthetic:tiny has none", "--prompt-ids"});
  check_error("tokenize --model synthetic:tiny hello", {"tokenize needs a tokenizer", "synthetic:tiny has none"});
  const std::string missing = (kFixtures / "qwen3-tiny" / "tokenizer.json").string();
  check_error("run --model " + (kFixtures / "qwen3-tiny").string() + " --prompt hello",
              {"--prompt needs a tokenizer", ("there is no " + missing).c_str()});
  check_error("detokenize --model " + (kFixtures / "qwen3-tiny").string() + " 1", {("there is no " + missing).c_str()});
}

TEST_CASE("--prompt and --prompt-ids exclude each other") {
  spindle::test::check_usage_error("run --model synthetic:tiny --prompt hi --prompt-ids 1", "excludes");
}

TEST_CASE("run --prompt encodes the text and prints the continuation as text") {
  const CheckpointWithTokenizer ckpt;
  const json j = run_json("run " + ckpt.model() + " --prompt '" + kPrompt + "' -n 6 -e sequential");
  CHECK(j.at("prompt") == kPrompt);
  CHECK(j.at("prompt_ids") == json::array({40, 261, 76}));
  REQUIRE(j.at("tokens").size() == 6);
  CHECK(j.at("stopped_at_eos") == false);
  const CliResult text = run_cli("detokenize --model " + kTokenizerDir + " " + id_list(j.at("tokens")));
  REQUIRE(text.status == 0);
  CHECK(j.at("text") == text.out);

  // Without --json the text alone goes to stdout, the ids and speed to stderr.
  const CliResult plain = run_cli("run " + ckpt.model() + " --prompt '" + kPrompt + "' -n 6 -e sequential");
  CAPTURE(plain.err);
  REQUIRE(plain.status == 0);
  CHECK(plain.out == text.out + "\n");
  CHECK(plain.err_has("tokens: "));
  CHECK(plain.err_has("tokens/s"));

  // --prompt-ids on a checkpoint with a tokenizer adds the text to its report.
  const CliResult by_ids = run_cli("run " + ckpt.model() + " --prompt-ids 40,261,76 -n 6 -e sequential");
  REQUIRE(by_ids.status == 0);
  CHECK(by_ids.out_has("text: " + text.out + "\n"));
}

TEST_CASE("run stops at the checkpoint's EOS ids unless --ignore-eos") {
  const CheckpointWithTokenizer ckpt;
  const std::string run = "run " + ckpt.model() + " --prompt '" + std::string(kPrompt) + "' -n 8 -e sequential";
  const json all = run_json(run);
  const std::vector<uint32_t> tokens = all.at("tokens");
  REQUIRE(tokens.size() == 8);
  // The third token as the EOS: the run ends at its first appearance, and prints no text for it.
  const uint32_t eos = tokens[2];
  const size_t first = size_t(std::find(tokens.begin(), tokens.end(), eos) - tokens.begin());
  ckpt.write_generation_config({{"eos_token_id", json::array({2689, eos})}});
  const json stopped = run_json(run);
  CHECK(stopped.at("eos_ids") == json::array({2689, eos}));
  CHECK(stopped.at("stopped_at_eos") == true);
  CHECK(stopped.at("tokens") == json(std::vector<uint32_t>(tokens.begin(), tokens.begin() + first + 1)));
  const std::string before_eos = id_list(json(std::vector<uint32_t>(tokens.begin(), tokens.begin() + first)));
  CHECK(stopped.at("text") == (first == 0 ? "" : run_cli("detokenize " + ckpt.model() + " " + before_eos).out));

  ckpt.write_generation_config({{"eos_token_id", eos}});
  CHECK(run_json(run).at("tokens").size() == first + 1);
  CHECK(run_json(run + " --ignore-eos").at("tokens").size() == 8);
  ckpt.write_generation_config({{"eos_token_id", "two"}});
  check_error(run, {"generation_config.json: eos_token_id is neither a token id nor a list of them"});
}
