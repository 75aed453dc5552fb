// The tokenizer against the Python `tokenizers` library: the fixture tests/fixtures/
// qwen2-bpe-tokenizer (scripts/make_tokenizer_fixture.py) holds a byte-level BPE trained with
// Qwen2's pipeline, a corpus, and the library's ids and decodes of every line.
#include <doctest/doctest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "host/text_stream.h"
#include "host/tokenizer.h"
#include "host/utf8.h"
#include "tasks/error.h"

using namespace spindle;
using json = nlohmann::json;

#define CHECK_ERROR(expr, phrase) CHECK_THROWS_WITH_AS(expr, doctest::Contains(std::string(phrase).c_str()), spindle::Error)

namespace {

const std::filesystem::path kFixture = std::filesystem::path(SPINDLE_FIXTURES_DIR) / "qwen2-bpe-tokenizer";

json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  REQUIRE(in);
  return json::parse(in);
}

const Tokenizer& fixture_tokenizer() {
  static const Tokenizer t = Tokenizer::load(kFixture / "tokenizer.json");
  return t;
}

json fixture_tokenizer_json() { return read_json(kFixture / "tokenizer.json"); }

std::vector<json> corpus() {
  const json c = read_json(kFixture / "corpus.json");
  return {c["lines"].begin(), c["lines"].end()};
}

// A fresh file under the system temp dir, removed at scope exit.
struct TempFile {
  std::filesystem::path path;
  explicit TempFile(const std::string& text) {
    static std::atomic<int> n{0};
    path = std::filesystem::temp_directory_path() /
           ("spindle-tokenizer-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".json");
    std::ofstream(path, std::ios::binary) << text;
  }
  ~TempFile() { std::filesystem::remove(path); }
};

}  // namespace

TEST_CASE("every corpus line encodes to the library's ids") {
  const std::vector<json> lines = corpus();
  REQUIRE(lines.size() >= 30);
  for (const json& line : lines) {
    const std::string text = line["text"];
    CAPTURE(text);
    CHECK(fixture_tokenizer().encode(text) == line["ids"].get<std::vector<uint32_t>>());
  }
}

TEST_CASE("decoding the library's ids gives the library's text, special tokens kept or skipped") {
  for (const json& line : corpus()) {
    const auto ids = line["ids"].get<std::vector<uint32_t>>();
    CAPTURE(line["text"].get<std::string>());
    CHECK(fixture_tokenizer().decode(ids) == line["decoded"].get<std::string>());
    CHECK(fixture_tokenizer().decode(ids, true) == line["decoded_skip_special"].get<std::string>());
  }
}

TEST_CASE("decode(encode(x)) == x, but for text NFC changes, which comes back composed") {
  int changed_by_nfc = 0;
  for (const json& line : corpus()) {
    const std::string text = line["text"];
    CAPTURE(text);
    const std::string round_trip = fixture_tokenizer().decode(fixture_tokenizer().encode(text));
    if (nfc(text) == text) {
      CHECK(round_trip == text);
    } else {
      ++changed_by_nfc;
      CHECK(round_trip == nfc(text));
    }
  }
  CHECK(changed_by_nfc == 1);  // the corpus's line of combining marks
}

TEST_CASE("text streamed a token at a time joins into the whole decode") {
  for (const json& line : corpus()) {
    TextStream stream(fixture_tokenizer());
    std::string text;
    for (uint32_t id : line["ids"].get<std::vector<uint32_t>>()) text += stream.push(id);
    text += stream.finish();
    CHECK(text == line["decoded"].get<std::string>());
  }
  // A character split over tokens comes whole with its last byte; an unfinished one at the end
  // is U+FFFD; an id the tokenizer lacks adds nothing.
  const Tokenizer& t = fixture_tokenizer();
  const auto id_of_byte = [&](char b) {
    for (uint32_t id = 0; id < uint32_t(t.id_limit()); ++id)
      if (t.token_bytes(id) && *t.token_bytes(id) == std::string(1, b)) return id;
    FAIL("no token for a byte");
    return 0u;
  };
  TextStream stream(t);
  CHECK(stream.push(id_of_byte('\xE4')).empty());
  CHECK(stream.push(id_of_byte('\xB8')).empty());
  CHECK(stream.push(uint32_t(t.id_limit())).empty());
  CHECK(stream.push(id_of_byte('\xAD')) == "\xE4\xB8\xAD");  // 中
  CHECK(stream.push(id_of_byte('\xE4')).empty());
  CHECK(stream.finish() == "\xEF\xBF\xBD");
}

TEST_CASE("special and added tokens are found inside text, the longest first") {
  const Tokenizer& t = fixture_tokenizer();
  const json meta = read_json(kFixture / "meta.json");
  const uint32_t im_end = meta["special_tokens"]["<|im_end|>"], think = meta["added_tokens"]["<think>"];
  CHECK(t.encode("<|im_end|>") == std::vector<uint32_t>{im_end});
  CHECK(t.encode("<think>") == std::vector<uint32_t>{think});
  CHECK(t.is_special(im_end));
  CHECK_FALSE(t.is_special(think));
  const std::vector<uint32_t> ids = t.encode("a<|im_end|>b");
  REQUIRE(ids.size() == 3);
  CHECK(ids[1] == im_end);
  CHECK(t.decode(ids) == "a<|im_end|>b");
  CHECK(t.decode(ids, true) == "ab");
}

TEST_CASE("UTF-8 helpers: lossy decoding as Rust's, and the end of a partial character") {
  CHECK(utf8_lossy("a\xE4\xB8\xAD" "b") == "a\xE4\xB8\xAD" "b");
  CHECK(utf8_lossy("a\xE4\xB8" "b") == "a\xEF\xBF\xBD" "b");     // one U+FFFD for the cut sequence
  CHECK(utf8_lossy("\xFF\xC0") == "\xEF\xBF\xBD\xEF\xBF\xBD");   // one for each byte no sequence starts with
  CHECK(utf8_lossy("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate's bytes
  CHECK(complete_utf8_prefix("ab\xE4\xB8") == 2);
  CHECK(complete_utf8_prefix("ab\xE4\xB8\xAD") == 5);
  CHECK(complete_utf8_prefix("ab\xFF") == 3);  // ill-formed, not incomplete: nothing to wait for
  CHECK(first_invalid_utf8("ok\xC3\xA9\xC3") == 4);
}

TEST_CASE("text that is not well-formed UTF-8 is refused, naming the byte") {
  CHECK_ERROR(fixture_tokenizer().encode("ab\xFFz"), "not well-formed UTF-8 (at byte 2)");
}

TEST_CASE("ids outside the vocabulary are refused by decode") {
  const Tokenizer& t = fixture_tokenizer();
  const std::vector<uint32_t> ids{1, uint32_t(t.id_limit())};
  CHECK_ERROR(t.decode(ids), "token id " + std::to_string(t.id_limit()) + " at index 1 is not in the tokenizer's vocabulary");
  CHECK(t.token_bytes(uint32_t(t.id_limit())) == nullptr);
}

TEST_CASE("a missing or malformed tokenizer.json is refused, naming the file") {
  CHECK_ERROR(Tokenizer::load("/nonexistent/tokenizer.json"), "/nonexistent/tokenizer.json");
  CHECK_ERROR(Tokenizer::load("/nonexistent/tokenizer.json"), "no such file");
  const TempFile bad("{\"model\": {\"type\": \"BPE\", ");
  CHECK_ERROR(Tokenizer::load(bad.path), bad.path.string());
  CHECK_ERROR(Tokenizer::load(bad.path), "not valid JSON");
}

TEST_CASE("parts of tokenizer.json the tokenizer does not support are refused by name") {
  const auto refused = [](const std::string& what, auto edit, const std::string& phrase) {
    json j = fixture_tokenizer_json();
    edit(j);
    CAPTURE(what);
    CHECK_ERROR(Tokenizer(j, "tok.json"), phrase);
  };
  refused("a WordPiece model", [](json& j) { j["model"]["type"] = "WordPiece"; },
          "tok.json: model.type is 'WordPiece': only BPE models");
  refused("no model", [](json& j) { j.erase("model"); }, "tok.json: model is missing");
  refused("a Lowercase normalizer", [](json& j) { j["normalizer"] = {{"type", "Lowercase"}}; },
          "normalizer is 'Lowercase'");
  refused("a Whitespace pre-tokenizer", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Whitespace"}}; },
          "pre_tokenizer.pretokenizers[0] is 'Whitespace'");
  refused("a split that removes its matches",
          [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; }, "behavior is 'Removed'");
  refused("a pattern PCRE2 cannot compile",
          [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed"; },
          "the split pattern '(unclosed' does not compile (PCRE2): missing closing parenthesis");
  refused("no ByteLevel step", [](json& j) { j["pre_tokenizer"]["pretokenizers"].erase(1); }, "does not end in ByteLevel");
  refused("a decoder other than ByteLevel", [](json& j) { j["decoder"] = {{"type", "WordPiece"}}; },
          "decoder is 'WordPiece'");
  refused("a template post-processor", [](json& j) { j["post_processor"] = {{"type", "TemplateProcessing"}}; },
          "post_processor is 'TemplateProcessing'");
  refused("byte fallback", [](json& j) { j["model"]["byte_fallback"] = true; }, "byte_fallback is true");
  refused("a merge of unknown tokens", [](json& j) { j["model"]["merges"][0] = json::array({"zzz", "qqq"}); },
          "model.merges[0]: 'zzz' is not in the vocabulary");
  refused("a vocabulary without byte 0", [](json& j) { j["model"]["vocab"].erase("\xC4\x80"); },
          "has no symbol for byte 0");
  refused("an added token that strips", [](json& j) { j["added_tokens"][0]["lstrip"] = true; },
          "added_tokens[0] ('<|endoftext|>') has lstrip true");
  refused("an added token with a vocabulary token's id", [](json& j) { j["added_tokens"][0]["id"] = 64u; },
          "added_tokens[0] ('<|endoftext|>') has id 64, which the vocabulary gives to 'a'");
  refused("two added tokens with one id", [](json& j) { j["added_tokens"][1]["id"] = j["added_tokens"][0]["id"]; },
          "added_tokens[1] ('<|im_start|>') has id 2685, which added token '<|endoftext|>' has too");
  refused("an added token matched after normalization", [](json& j) { j["added_tokens"][0]["normalized"] = true; },
          "normalized true");
}

TEST_CASE("merges spelled \"left right\" read as [left, right] do") {
  json j = fixture_tokenizer_json();
  for (json& m : j["model"]["merges"]) m = m[0].get<std::string>() + " " + m[1].get<std::string>();
  const Tokenizer t(j, "tok.json");
  for (const json& line : corpus()) CHECK(t.encode(line["text"].get<std::string>()) == line["ids"].get<std::vector<uint32_t>>());
}
