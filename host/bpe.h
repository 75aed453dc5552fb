// The BPE model of a Hugging Face tokenizer.json: the vocabulary, the merges by rank, and how
// a pre-tokenized piece becomes ids. Byte-level: a piece is raw bytes, each byte starting as the
// vocabulary's symbol for it (GPT-2's byte-to-character map).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace spindle {

// GPT-2's map from a byte to the printable character that stands for it in a byte-level
// vocabulary, as UTF-8: bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF stand for themselves, the
// others for U+0100 and on, in byte order.
const std::array<std::string, 256>& byte_level_symbols();

class BpeModel {
 public:
  // `model` is tokenizer.json's "model" object; `source` names the file in errors. Throws
  // spindle::Error for a type other than BPE, options the byte-level model does not use
  // (dropout, a subword prefix or suffix, byte fallback), a malformed vocabulary or merge, a
  // merge whose parts or result are not in the vocabulary, and a vocabulary without a symbol
  // for some byte.
  BpeModel(const nlohmann::json& model, const std::string& source);

  // The ids of one pre-tokenized piece of raw bytes, merged lowest rank first, the leftmost
  // pair first among equal ranks (the library's order).
  void encode(std::string_view piece, std::vector<uint32_t>& ids) const;

  // Token text by id ("Ġthe"), as the vocabulary spells it.
  const std::unordered_map<uint32_t, std::string>& tokens_by_id() const { return token_by_id_; }

 private:
  struct Merge {
    uint32_t rank = 0, result = 0;
  };
  std::unordered_map<std::string, uint32_t> id_by_token_;
  std::unordered_map<uint32_t, std::string> token_by_id_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) → merge
  std::array<uint32_t, 256> byte_ids_{};
  bool ignore_merges_ = false;  // a piece that is itself in the vocabulary is one id
};

}  // namespace spindle
