// load_config on arbitrary bytes. A config it accepts must survive the round trip `spindle
// synth` makes of it: config_to_json, then parse_config again.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "host/model_config.h"
#include "tasks/error.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = spindle::fuzz::write_input("config.json", data, size);
  spindle::ModelConfig c;
  try {
    c = spindle::load_config(path);
  } catch (const spindle::Error&) {
    return 0;
  }
  try {
    spindle::parse_config(spindle::config_to_json(c), "round trip");
  } catch (const spindle::Error& e) {
    std::fprintf(stderr, "an accepted config fails its round trip: %s\n", e.what());
    std::abort();
  }
  return 0;
}
