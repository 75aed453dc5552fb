// The EOS ids a checkpoint names: generation_config.json's eos_token_id, else config.json's.
#include <doctest/doctest.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "host/generation_config.h"
#include "tasks/error.h"

using namespace spindle;
using json = nlohmann::json;

namespace {

struct Checkpoint {
  std::filesystem::path dir;
  Checkpoint() {
    static std::atomic<int> n{0};
    dir = std::filesystem::temp_directory_path() /
          ("spindle-eos-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    std::filesystem::create_directories(dir);
  }
  ~Checkpoint() { std::filesystem::remove_all(dir); }
  void write(const char* name, const json& j) const { std::ofstream(dir / name) << j.dump(); }
};

}  // namespace

TEST_CASE("generation_config.json's eos_token_id, one id or a list") {
  const Checkpoint c;
  c.write("config.json", {{"eos_token_id", 7}});
  c.write("generation_config.json", {{"eos_token_id", 151645}});
  CHECK(checkpoint_eos_ids(c.dir) == std::vector<uint32_t>{151645});
  c.write("generation_config.json", {{"eos_token_id", {151645, 151643}}});
  CHECK(checkpoint_eos_ids(c.dir) == std::vector<uint32_t>{151645, 151643});
}

TEST_CASE("config.json's eos_token_id (or its text_config's) when generation_config.json names none") {
  const Checkpoint c;
  CHECK(checkpoint_eos_ids(c.dir).empty());
  c.write("generation_config.json", {{"eos_token_id", nullptr}});
  c.write("config.json", {{"eos_token_id", 7}});
  CHECK(checkpoint_eos_ids(c.dir) == std::vector<uint32_t>{7});
  c.write("config.json", {{"text_config", {{"eos_token_id", {8, 9}}}}});
  CHECK(checkpoint_eos_ids(c.dir) == std::vector<uint32_t>{8, 9});
  c.write("config.json", {{"model_type", "qwen3"}});
  CHECK(checkpoint_eos_ids(c.dir).empty());
}

TEST_CASE("an eos_token_id that is not ids is refused, naming the file") {
  const Checkpoint c;
  c.write("generation_config.json", {{"eos_token_id", {1, -2}}});
  CHECK_THROWS_WITH_AS(checkpoint_eos_ids(c.dir), doctest::Contains("eos_token_id holds -2, which is not a token id"),
                       spindle::Error);
  std::ofstream(c.dir / "generation_config.json") << "{";
  CHECK_THROWS_WITH_AS(checkpoint_eos_ids(c.dir), doctest::Contains("generation_config.json"), spindle::Error);
}
