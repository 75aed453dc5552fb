// load_graph (which validates) on arbitrary bytes, then, for a graph it accepts, what the
// project does with one: dump it as `spindle graph dump` does, and decode one step of it (token 0
// at position 0) on the sequential executor over weights of random bits. The validator's promise
// is that an accepted graph runs inside its arenas.
//
// The input is a graph file whose last 8 bytes are replaced by the checksum of the rest, so
// that mutations reach the parser instead of the checksum test.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "host/cpu_executors.h"
#include "host/decode.h"
#include "tasks/error.h"
#include "tasks/graph_file.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

// Graphs with more than this in all their arenas are skipped, so that no input exhausts memory
// or makes one step take seconds (tiny's graph has 0.3 MiB).
constexpr uint64_t kArenaCap = 16ull << 20;

uint64_t fnv1a64(const uint8_t* bytes, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= bytes[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

bool too_large(const spindle::Graph& g) {
  uint64_t total = 0;
  for (const spindle::ArenaInfo& a : g.arenas)
    if (__builtin_add_overflow(total, a.bytes, &total) || total > kArenaCap) return true;
  return total * g.devices > kArenaCap;  // each device holds most arenas apart
}

// The graph's weight arenas, filled with random bits (NaNs and infinities among them, as a
// checkpoint may hold).
spindle::ModelWeights random_weights(const spindle::Graph& g) {
  spindle::ModelWeights w;
  w.source = "fuzz";
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (size_t a = SP_ARENA_WEIGHTS0; a < g.arenas.size(); ++a) {
    auto bytes = std::make_shared<std::vector<uint8_t>>(g.arenas[a].bytes);
    for (uint8_t& b : *bytes) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      b = uint8_t(state >> 56);
    }
    w.arenas.push_back({g.arenas[a].name, bytes, bytes->data(), g.arenas[a].bytes});
  }
  return w;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string file(reinterpret_cast<const char*>(data), size);
  if (size >= 8) {
    const uint64_t sum = fnv1a64(data, size - 8);
    for (size_t i = 0; i < 8; ++i) file[size - 8 + i] = char(uint8_t(sum >> (8 * i)));
  }
  const auto path = spindle::fuzz::write_input("step.sptg", file.data(), size);
  try {
    const spindle::Graph g = spindle::load_graph(path);
    spindle::graph_to_json(g).dump();
    if (too_large(g)) return 0;
    const spindle::ModelWeights w = random_weights(g);
    spindle::SequentialExecutor<float> ex(g, w, false);
    spindle::decode(ex, g, {0}, 1, {});
  } catch (const spindle::Error&) {
  }
  return 0;
}
