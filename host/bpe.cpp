#include "host/bpe.h"

#include <limits>
#include <queue>

#include <nlohmann/json.hpp>

#include "tasks/error.h"

namespace spindle {
namespace {

using nlohmann::json;

std::string utf8_of(uint32_t code_point) {
  std::string s;
  if (code_point < 0x80) {
    s += char(code_point);
  } else {  // the map's characters are below U+0800
    s += char(0xC0 | (code_point >> 6));
    s += char(0x80 | (code_point & 0x3F));
  }
  return s;
}

bool is_null_or(const json& j, const char* key, const json& value) {
  return !j.contains(key) || j[key].is_null() || j[key] == value;
}

uint64_t pair_key(uint32_t left, uint32_t right) { return uint64_t(left) << 32 | right; }

}  // namespace

const std::array<std::string, 256>& byte_level_symbols() {
  static const std::array<std::string, 256> symbols = [] {
    std::array<std::string, 256> s;
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      s[b] = utf8_of(printable ? b : next++);
    }
    return s;
  }();
  return symbols;
}

BpeModel::BpeModel(const json& model, const std::string& source) {
  const std::string where = source + ": model";
  if (!model.is_object()) throw Error(where + " is missing or not an object");
  const auto type_field = model.find("type");
  const std::string type = type_field == model.end() ? "BPE" : type_field->is_string() ? type_field->get<std::string>() : "?";
  if (type != "BPE")
    throw Error(where + ".type is '" + type + "': only BPE models (byte-level, as Qwen's) are supported");
  if (!is_null_or(model, "dropout", 0.0) && !is_null_or(model, "dropout", 0))
    throw Error(where + ".dropout is set: BPE dropout (random merges) is not supported");
  if (!is_null_or(model, "continuing_subword_prefix", "") || !is_null_or(model, "end_of_word_suffix", ""))
    throw Error(where + ": a continuing_subword_prefix or end_of_word_suffix is not supported (byte-level BPE has neither)");
  if (!is_null_or(model, "byte_fallback", false))
    throw Error(where + ".byte_fallback is true: byte fallback (SentencePiece-style <0xNN> tokens) is not supported");
  if (const auto it = model.find("ignore_merges"); it != model.end() && !it->is_null()) {
    if (!it->is_boolean()) throw Error(where + ".ignore_merges is not true or false");
    ignore_merges_ = it->get<bool>();
  }

  const auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object()) throw Error(where + ".vocab is missing or not an object");
  for (const auto& [token, id] : vocab->items()) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() > std::numeric_limits<uint32_t>::max())
      throw Error(where + ".vocab['" + token + "'] is not a token id (a whole number below 2^32)");
    const uint32_t i = id.get<uint32_t>();
    if (!token_by_id_.emplace(i, token).second)
      throw Error(where + ".vocab gives id " + std::to_string(i) + " to both '" + token_by_id_[i] + "' and '" + token + "'");
    id_by_token_.emplace(token, i);
  }
  for (uint32_t b = 0; b < 256; ++b) {
    const auto it = id_by_token_.find(byte_level_symbols()[b]);
    if (it == id_by_token_.end())
      throw Error(where + ".vocab has no symbol for byte " + std::to_string(b) + " ('" + byte_level_symbols()[b] +
                  "'): a byte-level vocabulary holds all 256");
    byte_ids_[b] = it->second;
  }

  const auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array()) throw Error(where + ".merges is missing or not an array");
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    const json& m = (*merges)[rank];
    const std::string at = where + ".merges[" + std::to_string(rank) + "]";
    std::string left, right;
    // Older files spell a merge "left right", newer ones ["left", "right"].
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        throw Error(at + " '" + s + "' is not two tokens separated by one space");
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      throw Error(at + " is neither \"LEFT RIGHT\" nor [\"LEFT\", \"RIGHT\"]");
    }
    const auto id_of = [&](const std::string& token) {
      const auto it = id_by_token_.find(token);
      if (it == id_by_token_.end()) throw Error(at + ": '" + token + "' is not in the vocabulary");
      return it->second;
    };
    // A pair listed twice takes its later rank, as the library's map does.
    const uint32_t left_id = id_of(left), right_id = id_of(right), result = id_of(left + right);
    merges_.insert_or_assign(pair_key(left_id, right_id), Merge{uint32_t(rank), result});
  }
}

void BpeModel::encode(std::string_view piece, std::vector<uint32_t>& ids) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    std::string spelled;
    for (char c : piece) spelled += byte_level_symbols()[uint8_t(c)];
    if (const auto it = id_by_token_.find(spelled); it != id_by_token_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  // The piece's symbols as a linked list; a merged-away symbol is marked dead.
  struct Symbol {
    uint32_t id;
    int prev, next;
    bool alive;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  for (size_t i = 0; i < piece.size(); ++i)
    symbols.push_back({byte_ids_[uint8_t(piece[i])], int(i) - 1, i + 1 < piece.size() ? int(i) + 1 : -1, true});

  struct Candidate {
    uint32_t rank;
    int left;  // the pair's left symbol
    uint32_t result;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto offer = [&](int left) {
    if (left < 0 || symbols[left].next < 0) return;
    const auto it = merges_.find(pair_key(symbols[left].id, symbols[symbols[left].next].id));
    if (it != merges_.end()) queue.push({it->second.rank, left, it->second.result});
  };
  for (int i = 0; i + 1 < int(symbols.size()); ++i) offer(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.left];
    // A candidate is stale when a merge since has changed either of its symbols.
    if (!left.alive || left.next < 0) continue;
    const auto it = merges_.find(pair_key(left.id, symbols[left.next].id));
    if (it == merges_.end() || it->second.rank != c.rank) continue;
    Symbol& right = symbols[left.next];
    left.id = c.result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    offer(left.prev);
    offer(c.left);
  }
  for (int i = 0; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
}

}  // namespace spindle
