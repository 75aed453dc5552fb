#include "tasks/graph_file.h"

#include <array>
#include <bit>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "tasks/error.h"
#include "tasks/gang.h"
#include "tasks/gemv_split.h"
#include "tasks/graph_param_fields.h"
#include "tasks/op_decls.h"

namespace spindle {
namespace {

using nlohmann::json;

constexpr char kMagic[4] = {'S', 'P', 'T', 'G'};
// magic, u32 version, u64 metadata bytes, u32 task count, u32 view count
constexpr uint64_t kHeaderBytes = 24;
constexpr uint64_t kChecksumBytes = 8;
constexpr uint32_t kModelLevel = 0xFFFFFFFFu;

uint64_t fnv1a64(const std::string& bytes, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= uint8_t(bytes[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

template <class T>
void put_le(std::string& out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(char(uint8_t(value >> (8 * i))));
}

template <class T>
T get_le(const std::string& in, uint64_t at) {
  T value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) value |= T(uint8_t(in[at + i])) << (8 * i);
  return value;
}

// Tasks and views are arrays of 32-bit words, stored word by word.
template <class Record>
using Words = std::array<uint32_t, sizeof(Record) / 4>;

template <class Record>
void put_record(std::string& out, const Record& r) {
  for (uint32_t w : std::bit_cast<Words<Record>>(r)) put_le(out, w);
}

template <class Record>
Record get_record(const std::string& in, uint64_t at) {
  Words<Record> words;
  for (size_t i = 0; i < words.size(); ++i) words[i] = get_le<uint32_t>(in, at + 4 * i);
  return std::bit_cast<Record>(words);
}

json params_to_json(const SpGraphParams& p) {
  json j = json::object();
  for (const auto& f : kU32GraphParams) j[f.name] = p.*f.field;
  for (const auto& f : kF32GraphParams) j[f.name] = p.*f.field;
  return j;
}

uint32_t get_u32(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_number_unsigned() || v.get<uint64_t>() > std::numeric_limits<uint32_t>::max())
    throw Error(std::string("'") + key + "' is not a 32-bit unsigned integer");
  return v.get<uint32_t>();
}

// An array of 32-bit unsigned integers, each checked as get_u32 checks one.
std::vector<uint32_t> get_u32_array(const json& j, const char* key) {
  const json& a = j.at(key);
  if (!a.is_array()) throw Error(std::string("'") + key + "' is not an array");
  std::vector<uint32_t> out;
  for (const json& v : a) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > std::numeric_limits<uint32_t>::max())
      throw Error(std::string("'") + key + "' holds an item that is not a 32-bit unsigned integer");
    out.push_back(v.get<uint32_t>());
  }
  return out;
}

SpGraphParams params_from_json(const json& j) {
  SpGraphParams p{};
  for (const auto& f : kU32GraphParams) p.*f.field = get_u32(j, f.name);
  for (const auto& f : kF32GraphParams) p.*f.field = j.at(f.name).get<float>();
  return p;
}

json arenas_to_json(const std::vector<ArenaInfo>& arenas) {
  json j = json::array();
  for (const ArenaInfo& a : arenas) j.push_back({{"name", a.name}, {"bytes", a.bytes}});
  return j;
}

// The io views, each written as `view_json(id)`.
template <class F>
json io_to_json(const GraphIo& io, F view_json) {
  return {{"logits", view_json(io.logits)},
          {"forced_tokens", view_json(io.forced_tokens)},
          {"out_tokens", view_json(io.out_tokens)}};
}

json op_params_to_json(const std::vector<SpOpParams>& records) {
  json j = json::array();
  for (const SpOpParams& p : records) j.push_back(p.word);
  return j;
}

json view_id_or_null(uint32_t v) { return v == SP_NO_VIEW ? json(nullptr) : json(v); }
uint32_t view_id_from_json(const json& j) { return j.is_null() ? SP_NO_VIEW : j.get<uint32_t>(); }

json metadata_to_json(const Graph& g) {
  return {{"model", g.model},
          {"params", params_to_json(g.params)},
          {"arenas", arenas_to_json(g.arenas)},
          {"view_names", g.view_names},
          {"counter_names", g.counter_names},
          {"op_params", op_params_to_json(g.op_params)},
          {"io", io_to_json(g.io, view_id_or_null)},
          {"devices", g.devices},
          {"task_device", g.task_device},
          {"broadcast_counters", g.broadcast_counters}};
}

void metadata_from_json(const json& j, Graph& g) {
  g.model = j.at("model").get<std::string>();
  g.params = params_from_json(j.at("params"));
  for (const json& a : j.at("arenas"))
    g.arenas.push_back({a.at("name").get<std::string>(), a.at("bytes").get<uint64_t>()});
  g.view_names = j.at("view_names").get<std::vector<std::string>>();
  g.counter_names = j.at("counter_names").get<std::vector<std::string>>();
  for (const json& r : j.at("op_params")) {
    if (!r.is_array() || r.size() != SP_OP_PARAM_WORDS)
      throw Error("an op parameter record is not " + std::to_string(SP_OP_PARAM_WORDS) + " words");
    SpOpParams p{};
    for (uint32_t w = 0; w < SP_OP_PARAM_WORDS; ++w) p.word[w] = r[w].get<uint32_t>();
    g.op_params.push_back(p);
  }
  const json& io = j.at("io");
  g.io.logits = view_id_from_json(io.at("logits"));
  g.io.forced_tokens = view_id_from_json(io.at("forced_tokens"));
  g.io.out_tokens = view_id_from_json(io.at("out_tokens"));
  g.devices = get_u32(j, "devices");
  g.task_device = get_u32_array(j, "task_device");
  g.broadcast_counters = get_u32_array(j, "broadcast_counters");
}

std::string read_file(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) throw Error(path.string() + ": no such graph file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open the graph file");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(path.string() + ": cannot read the graph file");
  return bytes;
}

json view_name_or_null(const Graph& g, uint32_t v) {
  return v == SP_NO_VIEW ? json(nullptr) : json(g.view_names[v]);
}

json task_to_json(const Graph& g, size_t i) {
  const SpTask& t = g.tasks[i];
  json operands = json::object();
  const OpcodeOperands ops = opcode_operands(t.op);
  for (uint32_t k = 0; k < SP_TASK_OPERANDS; ++k) {
    const OperandInfo& info = ops.operand[k];
    const uint32_t v = t.operand[k];
    if (info.kind == OperandKind::Immediate) operands[info.name] = v;
    if (info.kind == OperandKind::Split) {
      const GemvSplit split = gemv_split(v);
      operands[info.name] = split.pieces > 1 ? json{{"pieces", split.pieces}, {"group", split.group}} : json(nullptr);
    }
    if (is_view_kind(info.kind)) operands[info.name] = view_name_or_null(g, v);
    if (info.kind == OperandKind::Params) operands[info.name] = {{"record", v}, {"words", g.op_params[v].word}};
  }
  json wait = nullptr;
  if (t.wait_counter != SP_NO_COUNTER)
    wait = {{"counter", g.counter_names[t.wait_counter]},
            {"count", t.wait_count},
            {"mode", t.wait_mode == SP_WAIT_SAME_STEP ? "same_step" : "prev_step"}};
  return {{"index", i},
          {"op", sp_opcode_name(t.op)},
          {"layer", t.layer == kModelLevel ? json(nullptr) : json(t.layer)},
          {"tiles", {t.tile_begin, t.tile_end}},
          {"wait", wait},
          {"signal", g.counter_names[t.signal_counter]},
          {"gang", sp_gang_width(t) > 1 ? json{{"width", sp_gang_width(t)}, {"rank", t.gang_rank}} : json(nullptr)},
          {"device", g.devices == 1 || g.task_device[i] == Graph::kEveryDevice ? json(nullptr) : json(g.task_device[i])},
          {"operands", operands}};
}

json view_to_json(const Graph& g, uint32_t v) {
  const SpView& view = g.views[v];
  return {{"id", v},
          {"name", g.view_names[v]},
          {"arena", g.arenas[view.arena].name},
          {"dtype", sp_dtype_name(view.dtype)},
          {"offset", sp_view_offset(view)},
          {"rows", view.rows},
          {"cols", view.cols},
          {"row_stride", view.row_stride}};
}

}  // namespace

void save_graph(const std::filesystem::path& path, const Graph& g) {
  validate(g);
  const std::string metadata = metadata_to_json(g).dump();
  std::string out(kMagic, sizeof kMagic);
  put_le(out, Graph::kVersion);
  put_le(out, uint64_t(metadata.size()));
  put_le(out, uint32_t(g.tasks.size()));
  put_le(out, uint32_t(g.views.size()));
  out += metadata;
  for (const SpTask& t : g.tasks) put_record(out, t);
  for (const SpView& v : g.views) put_record(out, v);
  put_le(out, fnv1a64(out, out.size()));

  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(out.data(), std::streamsize(out.size()));
  file.close();
  if (!file) throw Error(path.string() + ": cannot write the graph file");
}

Graph load_graph(const std::filesystem::path& path) {
  const std::string bytes = read_file(path);
  const std::string where = path.string() + ": ";
  const uint64_t size = bytes.size();
  if (size >= sizeof kMagic && bytes.compare(0, sizeof kMagic, kMagic, sizeof kMagic) != 0)
    throw Error(where + "not a graph file (bad magic; expected \"SPTG\")");
  if (size < kHeaderBytes + kChecksumBytes)
    throw Error(where + "truncated: " + std::to_string(size) + " bytes, shorter than the header");
  const uint32_t version = get_le<uint32_t>(bytes, 4);
  if (version != Graph::kVersion)
    throw Error(where + "unsupported graph format version " + std::to_string(version) +
                " (this build reads version " + std::to_string(Graph::kVersion) + ")");
  const uint64_t metadata_bytes = get_le<uint64_t>(bytes, 8);
  const uint32_t n_tasks = get_le<uint32_t>(bytes, 16);
  const uint32_t n_views = get_le<uint32_t>(bytes, 20);
  const uint64_t records = uint64_t(n_tasks) * sizeof(SpTask) + uint64_t(n_views) * sizeof(SpView);
  if (metadata_bytes > size || kHeaderBytes + metadata_bytes + records + kChecksumBytes > size)
    throw Error(where + "truncated: the header describes more than the file's " +
                std::to_string(size) + " bytes");
  const uint64_t expected = kHeaderBytes + metadata_bytes + records + kChecksumBytes;
  if (expected < size)
    throw Error(where + std::to_string(size - expected) + " unexpected bytes after the checksum");
  const uint64_t body = size - kChecksumBytes;
  if (get_le<uint64_t>(bytes, body) != fnv1a64(bytes, body))
    throw Error(where + "checksum mismatch: the file is corrupted");

  Graph g;
  try {
    metadata_from_json(json::parse(bytes.substr(kHeaderBytes, metadata_bytes)), g);
  } catch (const std::exception& e) {
    throw Error(where + "bad metadata: " + e.what());
  }
  uint64_t at = kHeaderBytes + metadata_bytes;
  for (uint32_t i = 0; i < n_tasks; ++i, at += sizeof(SpTask))
    g.tasks.push_back(get_record<SpTask>(bytes, at));
  for (uint32_t i = 0; i < n_views; ++i, at += sizeof(SpView))
    g.views.push_back(get_record<SpView>(bytes, at));
  try {
    validate(g);
  } catch (const Error& e) {
    throw Error(where + e.what());
  }
  return g;
}

json graph_to_json(const Graph& g) {
  validate(g);
  json views = json::array();
  for (uint32_t v = 0; v < g.views.size(); ++v) views.push_back(view_to_json(g, v));
  json counters = json::array();
  for (uint32_t c = 0; c < g.num_counters(); ++c)
    counters.push_back({{"id", c}, {"name", g.counter_names[c]}, {"broadcast", g.is_broadcast(c)}});
  json tasks = json::array();
  for (size_t i = 0; i < g.tasks.size(); ++i) tasks.push_back(task_to_json(g, i));
  return {{"model", g.model},
          {"version", Graph::kVersion},
          {"devices", g.devices},
          {"params", params_to_json(g.params)},
          {"arenas", arenas_to_json(g.arenas)},
          {"counters", counters},
          {"views", views},
          {"op_params", op_params_to_json(g.op_params)},
          {"io", io_to_json(g.io, [&](uint32_t v) { return view_name_or_null(g, v); })},
          {"tasks", tasks}};
}

}  // namespace spindle
