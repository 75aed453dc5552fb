#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tasks/error.h"
#include "tasks/graph_file.h"
#include "tasks_fixture.h"

using namespace spindle;
using namespace spindle::test;
namespace fs = std::filesystem;

namespace {

// A file in a fresh temporary directory, removed with it.
struct TempFile {
  fs::path dir, path;
  TempFile() {
    dir = fs::temp_directory_path() /
          ("spindle-graph-test-" + std::to_string(reinterpret_cast<uintptr_t>(this)) + "-" +
           std::to_string(::getpid()));
    fs::create_directories(dir);
    path = dir / "g.sptg";
  }
  ~TempFile() { fs::remove_all(dir); }
};

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
}

// The file's checksum, recomputed here from the format's definition (FNV-1a, 64-bit).
void reseal(std::string& bytes) {
  uint64_t h = 14695981039346656037ull;
  const size_t body = bytes.size() - 8;
  for (size_t i = 0; i < body; ++i) h = (h ^ uint8_t(bytes[i])) * 1099511628211ull;
  for (int i = 0; i < 8; ++i) bytes[body + i] = char(h >> (8 * i));
}

std::string load_message(const fs::path& p) {
  try {
    load_graph(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void check_load_fails(const fs::path& p, const char* phrase) {
  const std::string msg = load_message(p);
  CAPTURE(msg);
  CHECK(msg.find(phrase) != std::string::npos);
  CHECK(msg.find(p.string()) != std::string::npos);
}

template <class T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Offset of the first task record: 24-byte header, then the metadata.
size_t tasks_offset(const std::string& bytes) {
  uint64_t metadata = 0;
  std::memcpy(&metadata, bytes.data() + 8, 8);
  return 24 + metadata;
}

}  // namespace

TEST_CASE("a saved graph loads back equal") {
  TempFile f;
  Graph g = small_graph();
  g.params.rms_eps = 1.2345678e-6f;
  g.params.norm_kind = SP_NORM_ZERO_CENTRED;
  g.tasks[kTHead0].layer = 3;
  save_graph(f.path, g);
  const Graph h = load_graph(f.path);
  CHECK(h.model == g.model);
  CHECK(std::memcmp(&h.params, &g.params, sizeof g.params) == 0);
  CHECK(same_bytes(h.tasks, g.tasks));
  CHECK(same_bytes(h.views, g.views));
  CHECK(h.view_names == g.view_names);
  CHECK(h.counter_names == g.counter_names);
  REQUIRE(h.arenas.size() == g.arenas.size());
  for (size_t i = 0; i < g.arenas.size(); ++i) {
    CHECK(h.arenas[i].name == g.arenas[i].name);
    CHECK(h.arenas[i].bytes == g.arenas[i].bytes);
  }
  CHECK(h.io.logits == g.io.logits);
  CHECK(h.io.forced_tokens == g.io.forced_tokens);
  CHECK(h.io.out_tokens == g.io.out_tokens);
}

TEST_CASE("the file starts with the magic and version, and records are little-endian") {
  TempFile f;
  const Graph g = small_graph();
  save_graph(f.path, g);
  const std::string bytes = read_bytes(f.path);
  CHECK(bytes.substr(0, 4) == "SPTG");
  CHECK(uint8_t(bytes[4]) == Graph::kVersion);
  const size_t at = tasks_offset(bytes);
  CHECK(uint8_t(bytes[at]) == SP_OP_EMBED);  // first word of the first task: its opcode
  CHECK(bytes.size() == at + g.tasks.size() * 64 + g.views.size() * 32 + 8);
}

TEST_CASE("a graph without its io views is not saved: every executor reads and writes them") {
  TempFile f;
  Graph g = small_graph();
  g.io.logits = SP_NO_VIEW;
  CHECK_THROWS_WITH_AS(save_graph(f.path, g), doctest::Contains("io.logits names no view"), Error);
}

TEST_CASE("a missing file") {
  TempFile f;
  check_load_fails(f.dir / "nope.sptg", "no such graph file");
}

TEST_CASE("a corrupted byte fails the checksum") {
  TempFile f;
  save_graph(f.path, small_graph());
  std::string bytes = read_bytes(f.path);
  bytes[tasks_offset(bytes) + 70] ^= 0x10;
  write_bytes(f.path, bytes);
  check_load_fails(f.path, "checksum mismatch");
}

TEST_CASE("a truncated file") {
  TempFile f;
  save_graph(f.path, small_graph());
  const std::string bytes = read_bytes(f.path);
  write_bytes(f.path, bytes.substr(0, bytes.size() - 10));
  check_load_fails(f.path, "truncated");
  write_bytes(f.path, bytes.substr(0, 12));
  check_load_fails(f.path, "truncated");
}

TEST_CASE("trailing bytes are rejected") {
  TempFile f;
  save_graph(f.path, small_graph());
  write_bytes(f.path, read_bytes(f.path) + "xx");
  check_load_fails(f.path, "2 unexpected bytes");
}

TEST_CASE("a bad magic") {
  TempFile f;
  save_graph(f.path, small_graph());
  std::string bytes = read_bytes(f.path);
  bytes[0] = 'X';
  write_bytes(f.path, bytes);
  check_load_fails(f.path, "bad magic");
}

TEST_CASE("an unsupported version") {
  TempFile f;
  save_graph(f.path, small_graph());
  std::string bytes = read_bytes(f.path);
  bytes[4] = char(Graph::kVersion + 1);
  reseal(bytes);
  write_bytes(f.path, bytes);
  check_load_fails(f.path, ("unsupported graph format version " +
                            std::to_string(Graph::kVersion + 1)).c_str());
  // A file of the version before (without op parameter records): both versions named.
  bytes[4] = char(Graph::kVersion - 1);
  reseal(bytes);
  write_bytes(f.path, bytes);
  check_load_fails(f.path, ("unsupported graph format version " + std::to_string(Graph::kVersion - 1) +
                            " (this build reads version " + std::to_string(Graph::kVersion) + ")")
                               .c_str());
}

TEST_CASE("bad metadata") {
  TempFile f;
  save_graph(f.path, small_graph());
  std::string bytes = read_bytes(f.path);
  const size_t key = bytes.find("\"vocab\"");
  REQUIRE(key != std::string::npos);
  bytes[key + 1] = 'W';  // params lose their vocab field; the checksum is made right again
  reseal(bytes);
  write_bytes(f.path, bytes);
  check_load_fails(f.path, "bad metadata");
  CHECK(load_message(f.path).find("vocab") != std::string::npos);
}

// The file with its metadata JSON changed by `edit`: the header's metadata size and the
// checksum made right again.
std::string with_metadata(const std::string& bytes, const std::function<void(nlohmann::json&)>& edit) {
  const size_t at = tasks_offset(bytes);
  nlohmann::json metadata = nlohmann::json::parse(bytes.substr(24, at - 24));
  edit(metadata);
  const std::string text = metadata.dump();
  std::string out = bytes.substr(0, 24) + text + bytes.substr(at);
  const uint64_t size = text.size();
  std::memcpy(out.data() + 8, &size, 8);
  reseal(out);
  return out;
}

TEST_CASE("device lists in the metadata must hold 32-bit unsigned integers") {
  TempFile f;
  save_graph(f.path, small_graph());
  const std::string bytes = read_bytes(f.path);
  for (const char* key : {"task_device", "broadcast_counters"})
    for (const nlohmann::json& item : {nlohmann::json(-1), nlohmann::json(uint64_t(1) << 32), nlohmann::json("0")}) {
      CAPTURE(key);
      CAPTURE(item.dump());
      write_bytes(f.path, with_metadata(bytes, [&](nlohmann::json& m) { m[key] = nlohmann::json::array({item}); }));
      check_load_fails(f.path, (std::string("bad metadata: '") + key + "' holds an item that is not a 32-bit unsigned integer").c_str());
    }
  write_bytes(f.path, with_metadata(bytes, [](nlohmann::json& m) { m["devices"] = 2; }));
  check_load_fails(f.path, "graph: 4 tasks but 0 task devices");
  write_bytes(f.path, with_metadata(bytes, [](nlohmann::json& m) { m.erase("devices"); }));
  check_load_fails(f.path, "bad metadata");
}

TEST_CASE("loading validates the graph") {
  TempFile f;
  save_graph(f.path, small_graph());
  std::string bytes = read_bytes(f.path);
  bytes[tasks_offset(bytes) + 7 * 4] = 9;  // first task's signal counter: out of range
  reseal(bytes);
  write_bytes(f.path, bytes);
  check_load_fails(f.path, "task 0 (embed) signals counter 9");
}

TEST_CASE("an inconsistent graph is not saved") {
  TempFile f;
  Graph g = small_graph();
  g.tasks[kTSample].wait_count = 3;
  CHECK_THROWS_AS(save_graph(f.path, g), Error);
}

TEST_CASE("the JSON dump names opcodes, counters and views") {
  const nlohmann::json j = graph_to_json(small_graph());
  CHECK(j["model"] == "test:small");
  CHECK(j["params"]["vocab"] == 8);
  CHECK(j["arenas"][SP_ARENA_WEIGHTS0]["name"] == "weights0");
  CHECK(j["devices"] == 1);
  CHECK(j["counters"][1]["broadcast"] == false);
  CHECK(j["tasks"][0]["device"] == nullptr);
  CHECK(j["counters"][1]["name"] == "lm_head");
  CHECK(j["views"][2]["name"] == "lm_head");
  CHECK(j["views"][2]["arena"] == "weights0");
  CHECK(j["views"][2]["dtype"] == "bf16");
  CHECK(j["io"]["logits"] == "logits");
  const nlohmann::json& head = j["tasks"][kTHead1];
  CHECK(head["op"] == "gemv");
  CHECK(head["layer"].is_null());
  CHECK(head["tiles"] == nlohmann::json::array({4, 8}));
  CHECK(head["wait"]["counter"] == "embed");
  CHECK(head["wait"]["count"] == 1);
  CHECK(head["wait"]["mode"] == "same_step");
  CHECK(head["signal"] == "lm_head");
  CHECK(head["operands"]["W"] == "lm_head");
  CHECK(head["operands"]["norm"].is_null());
  CHECK(head["operands"]["flags"] == (1u | (1u << 16)));
  CHECK(j["tasks"][kTEmbed]["wait"]["mode"] == "prev_step");
  CHECK(j["tasks"][kTSample]["operands"]["partial_count"] == 2);
}
