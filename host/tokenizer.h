// A checkpoint's tokenizer, read from its Hugging Face tokenizer.json: byte-level BPE as Qwen2
// and Qwen3 use it (docs/tokenizer.md says what is supported and what is refused). Token ids
// stay the engine's interface; this turns text into them and back.
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "host/bpe.h"
#include "host/split_regex.h"

namespace spindle {

class Tokenizer {
 public:
  // Reads `path` (a tokenizer.json). Throws spindle::Error naming the file: missing,
  // unreadable, not JSON, or a part the tokenizer does not support.
  static Tokenizer load(const std::filesystem::path& path);
  // `source` names where `j` came from in errors.
  Tokenizer(const nlohmann::json& j, const std::string& source);

  // The ids of `text`, as the library's encode(text).ids: added and special tokens found in the
  // text first (the longest at the leftmost place), the rest normalized, split and merged.
  // Throws spindle::Error when `text` is not well-formed UTF-8, naming the byte offset.
  std::vector<uint32_t> encode(std::string_view text) const;

  // The text of `ids`, as the library's decode: the tokens' bytes joined, ill-formed UTF-8
  // replaced by U+FFFD. Special tokens are text unless `skip_special`. Throws spindle::Error
  // naming an id the tokenizer does not have.
  std::string decode(std::span<const uint32_t> ids, bool skip_special = false) const;

  // The bytes token `id` stands for, or null for an id the tokenizer does not have.
  const std::string* token_bytes(uint32_t id) const;
  bool is_special(uint32_t id) const;
  // One past the largest id (the vocabulary and the added tokens).
  uint64_t id_limit() const { return id_limit_; }

 private:
  struct AddedToken {
    std::string content;
    uint32_t id = 0;
  };
  // Steps of the pre-tokenizer before the byte-level mapping, each splitting every piece.
  std::vector<SplitRegex> splits_;
  bool nfc_ = false;
  BpeModel model_;
  std::vector<AddedToken> added_;  // longest first
  struct Token {
    std::string bytes;
    bool special = false;
  };
  // By id; a map, as ids need not be dense (a file's ids can be any below 2^32).
  std::unordered_map<uint32_t, Token> tokens_;
  uint64_t id_limit_ = 0;

  void encode_plain(std::string_view text, std::vector<uint32_t>& ids) const;
};

}  // namespace spindle
