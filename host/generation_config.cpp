#include "host/generation_config.h"

#include <nlohmann/json.hpp>

#include "host/files.h"
#include "tasks/error.h"

namespace spindle {
namespace {

using nlohmann::json;

bool is_id(const json& v) { return v.is_number_unsigned() && v.get<uint64_t>() <= UINT32_MAX; }

// eos_token_id of `j` (or of its text_config): the ids, or nothing when it has none.
std::vector<uint32_t> eos_ids_of(const json& j, const std::filesystem::path& file) {
  const json* holder = &j;
  if (!j.contains("eos_token_id") && j.contains("text_config") && j["text_config"].is_object()) holder = &j["text_config"];
  const auto it = holder->find("eos_token_id");
  if (it == holder->end() || it->is_null()) return {};
  const std::string where = file.string() + ": eos_token_id";
  if (is_id(*it)) return {it->get<uint32_t>()};
  if (!it->is_array()) throw Error(where + " is neither a token id nor a list of them");
  std::vector<uint32_t> ids;
  for (const json& v : *it) {
    if (!is_id(v)) throw Error(where + " holds " + v.dump() + ", which is not a token id");
    ids.push_back(v.get<uint32_t>());
  }
  return ids;
}

}  // namespace

std::vector<uint32_t> checkpoint_eos_ids(const std::filesystem::path& dir) {
  for (const char* name : {"generation_config.json", "config.json"}) {
    const std::filesystem::path file = dir / name;
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) continue;
    const json j = read_json_file(file, name == std::string("config.json") ? "the model config" : "the generation config");
    if (!j.is_object()) throw Error(file.string() + ": not a JSON object");
    if (std::vector<uint32_t> ids = eos_ids_of(j, file); !ids.empty()) return ids;
  }
  return {};
}

}  // namespace spindle
