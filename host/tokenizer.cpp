#include "host/tokenizer.h"

#include <algorithm>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "host/files.h"
#include "host/utf8.h"
#include "tasks/error.h"

namespace spindle {
namespace {

using nlohmann::json;

// What the ByteLevel pre-tokenizer splits with when its use_regex is true (GPT-2's pattern).
constexpr const char* kByteLevelRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string type_of(const json& j, const std::string& where) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    throw Error(where + " is not an object with a \"type\"");
  return j["type"].get<std::string>();
}

bool flag(const json& j, const char* key, bool otherwise) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? otherwise : it->is_boolean() && it->get<bool>();
}

// The steps of a component, a "Sequence" flattened: `list_key` names its list.
void flatten(const json& j, const std::string& where, const char* list_key, std::vector<std::pair<json, std::string>>& steps) {
  if (type_of(j, where) != "Sequence") {
    steps.emplace_back(j, where);
    return;
  }
  const auto list = j.find(list_key);
  if (list == j.end() || !list->is_array()) throw Error(where + "." + list_key + " is missing or not an array");
  for (size_t i = 0; i < list->size(); ++i)
    flatten((*list)[i], where + "." + list_key + "[" + std::to_string(i) + "]", list_key, steps);
}

bool read_normalizer(const json& j, const std::string& source) {
  if (j.is_null()) return false;
  std::vector<std::pair<json, std::string>> steps;
  flatten(j, source + ": normalizer", "normalizers", steps);
  for (const auto& [step, where] : steps)
    if (const std::string type = type_of(step, where); type != "NFC")
      throw Error(where + " is '" + type + "': only the NFC normalizer (Qwen's) or none is supported");
  return !steps.empty();
}

std::vector<SplitRegex> read_pre_tokenizer(const json& j, const std::string& source) {
  const std::string where = source + ": pre_tokenizer";
  if (j.is_null()) throw Error(where + " is null: a byte-level BPE needs one that ends in ByteLevel");
  std::vector<std::pair<json, std::string>> steps;
  flatten(j, where, "pretokenizers", steps);
  std::vector<SplitRegex> splits;
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& [step, at] = steps[i];
    const std::string type = type_of(step, at);
    if (type == "Split") {
      const auto behavior_field = step.find("behavior");
      const std::string behavior =
          behavior_field != step.end() && behavior_field->is_string() ? behavior_field->get<std::string>() : "(none)";
      if (behavior != "Isolated")
        throw Error(at + ".behavior is '" + behavior + "': only Isolated (matches and the text between them kept as pieces) is supported");
      if (flag(step, "invert", false)) throw Error(at + ".invert is true: an inverted split is not supported");
      const json& pattern = step.value("pattern", json());
      if (pattern.contains("Regex") && pattern["Regex"].is_string())
        splits.emplace_back(pattern["Regex"].get<std::string>(), false, at + ".pattern.Regex");
      else if (pattern.contains("String") && pattern["String"].is_string())
        splits.emplace_back(pattern["String"].get<std::string>(), true, at + ".pattern.String");
      else
        throw Error(at + ".pattern is neither {\"Regex\": …} nor {\"String\": …}");
    } else if (type == "ByteLevel") {
      if (i + 1 != steps.size())
        throw Error(at + ": ByteLevel must be the last pre-tokenizer step (a split after it would see mapped bytes)");
      if (flag(step, "add_prefix_space", false))
        throw Error(at + ".add_prefix_space is true: a prefix space is not supported");
      if (flag(step, "use_regex", true)) splits.emplace_back(kByteLevelRegex, false, at + " (GPT-2's regex)");
      return splits;
    } else {
      throw Error(at + " is '" + type + "': only Split and ByteLevel pre-tokenizers are supported");
    }
  }
  throw Error(where + " does not end in ByteLevel: only byte-level BPE is supported");
}

void check_decoder(const json& j, const std::string& source) {
  const std::string where = source + ": decoder";
  if (j.is_null()) throw Error(where + " is null: a byte-level BPE needs the ByteLevel decoder");
  if (const std::string type = type_of(j, where); type != "ByteLevel")
    throw Error(where + " is '" + type + "': only the ByteLevel decoder is supported");
}

void check_post_processor(const json& j, const std::string& source) {
  if (j.is_null()) return;
  const std::string where = source + ": post_processor";
  if (const std::string type = type_of(j, where); type != "ByteLevel")
    throw Error(where + " is '" + type + "': only ByteLevel (which adds no tokens) or none is supported");
}

// The bytes a vocabulary token stands for: each character mapped back through the byte-level
// map, or, where some character is not in the map, the token's own UTF-8 (the library's rule).
std::string vocabulary_token_bytes(const std::string& token) {
  static const std::unordered_map<std::string, char> byte_of = [] {
    std::unordered_map<std::string, char> m;
    for (int b = 0; b < 256; ++b) m.emplace(byte_level_symbols()[b], char(b));
    return m;
  }();
  std::string bytes;
  for (size_t at = 0; at < token.size();) {
    const uint8_t lead = uint8_t(token[at]);
    const size_t n = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
    const auto it = byte_of.find(token.substr(at, n));
    if (it == byte_of.end()) return token;
    bytes += it->second;
    at += n;
  }
  return bytes;
}

}  // namespace

Tokenizer Tokenizer::load(const std::filesystem::path& path) {
  return Tokenizer(read_json_file(path, "the tokenizer"), path.string());
}

Tokenizer::Tokenizer(const json& j, const std::string& source)
    : model_((j.is_object() ? j : throw Error(source + ": the tokenizer is not a JSON object")).value("model", json()),
             source) {
  nfc_ = read_normalizer(j.value("normalizer", json()), source);
  splits_ = read_pre_tokenizer(j.value("pre_tokenizer", json()), source);
  check_decoder(j.value("decoder", json()), source);
  check_post_processor(j.value("post_processor", json()), source);

  for (const auto& [id, token] : model_.tokens_by_id()) tokens_[id] = {vocabulary_token_bytes(token), false};
  const json& added = j.value("added_tokens", json::array());
  if (!added.is_array()) throw Error(source + ": added_tokens is not an array");
  for (size_t i = 0; i < added.size(); ++i) {
    const json& t = added[i];
    const std::string at = source + ": added_tokens[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_unsigned() || t["id"].get<uint64_t>() > UINT32_MAX ||
        !t.contains("content") || !t["content"].is_string() || t["content"].get<std::string>().empty())
      throw Error(at + " is not an object with an id (a whole number below 2^32) and a non-empty content");
    const uint32_t id = t["id"].get<uint32_t>();
    const std::string content = t["content"].get<std::string>();
    if (first_invalid_utf8(content) != std::string::npos) throw Error(at + ".content is not well-formed UTF-8");
    const bool special = flag(t, "special", false);
    for (const char* unsupported : {"lstrip", "rstrip", "single_word"})
      if (flag(t, unsupported, false))
        throw Error(at + " ('" + content + "') has " + unsupported + " true, which is not supported");
    if (flag(t, "normalized", !special))
      throw Error(at + " ('" + content + "') is matched after normalization (normalized true), which is not supported");
    // An id is one token: the same id for other text would decode to text encode never gave it.
    if (const auto vocab = model_.tokens_by_id().find(id); vocab != model_.tokens_by_id().end() && vocab->second != content)
      throw Error(at + " ('" + content + "') has id " + std::to_string(id) + ", which the vocabulary gives to '" +
                  vocab->second + "'");
    if (const auto other = std::find_if(added_.begin(), added_.end(), [&](const AddedToken& a) { return a.id == id; });
        other != added_.end())
      throw Error(at + " ('" + content + "') has id " + std::to_string(id) + ", which added token '" + other->content +
                  "' has too");
    // The library's decoder passes an added token's content through as it is.
    tokens_[id] = {content, special};
    added_.push_back({content, id});
  }
  for (const auto& [id, token] : tokens_) id_limit_ = std::max(id_limit_, uint64_t(id) + 1);
  std::stable_sort(added_.begin(), added_.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
}

void Tokenizer::encode_plain(std::string_view text, std::vector<uint32_t>& ids) const {
  if (text.empty()) return;
  const std::string normalized = nfc_ ? nfc(text) : std::string(text);
  std::vector<std::string_view> pieces{normalized};
  for (const SplitRegex& split : splits_) {
    std::vector<std::string_view> next;
    for (std::string_view piece : pieces) {
      size_t at = 0;
      for (const SplitRegex::Match& m : split.matches(piece)) {
        if (m.begin > at) next.push_back(piece.substr(at, m.begin - at));
        next.push_back(piece.substr(m.begin, m.end - m.begin));
        at = m.end;
      }
      if (at < piece.size()) next.push_back(piece.substr(at));
    }
    pieces = std::move(next);
  }
  for (std::string_view piece : pieces) model_.encode(piece, ids);
}

std::vector<uint32_t> Tokenizer::encode(std::string_view text) const {
  if (const size_t bad = first_invalid_utf8(text); bad != std::string_view::npos)
    throw Error("the text is not well-formed UTF-8 (at byte " + std::to_string(bad) + ")");
  std::vector<uint32_t> ids;
  size_t plain_from = 0;
  for (size_t at = 0; at < text.size();) {
    const auto found = std::find_if(added_.begin(), added_.end(), [&](const AddedToken& t) {
      return text.substr(at, t.content.size()) == t.content;
    });
    if (found == added_.end()) {
      ++at;
      continue;
    }
    encode_plain(text.substr(plain_from, at - plain_from), ids);
    ids.push_back(found->id);
    at += found->content.size();
    plain_from = at;
  }
  encode_plain(text.substr(plain_from), ids);
  return ids;
}

const std::string* Tokenizer::token_bytes(uint32_t id) const {
  const auto it = tokens_.find(id);
  return it == tokens_.end() ? nullptr : &it->second.bytes;
}

bool Tokenizer::is_special(uint32_t id) const {
  const auto it = tokens_.find(id);
  return it != tokens_.end() && it->second.special;
}

std::string Tokenizer::decode(std::span<const uint32_t> ids, bool skip_special) const {
  std::string bytes;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string* b = token_bytes(ids[i]);
    if (!b)
      throw Error("token id " + std::to_string(ids[i]) + " at index " + std::to_string(i) +
                  " is not in the tokenizer's vocabulary (ids below " + std::to_string(id_limit()) + ")");
    if (!(skip_special && is_special(ids[i]))) bytes += *b;
  }
  return utf8_lossy(bytes);
}

}  // namespace spindle
