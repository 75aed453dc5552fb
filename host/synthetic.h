// Synthetic models: real architectures with weights from a counter-based hash
// (host/synthetic_values.h), so any executor or device can regenerate them from
// (preset, seed) and a large model costs no disk.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "host/model_weights.h"

namespace spindle {

inline constexpr const char* kSyntheticPrefix = "synthetic:";

struct SyntheticPreset {
  std::string name;  // "tiny", "qwen3-8b", …
  ModelConfig config;
};

const std::vector<SyntheticPreset>& synthetic_presets();
// Throws spindle::Error listing the valid names when `name` is not one.
const ModelConfig& synthetic_config(const std::string& name);

struct SyntheticSpec {
  std::string preset;
  uint64_t seed = 0;
};
// "synthetic:PRESET" or "synthetic:PRESET@SEED" (SEED a decimal uint64; default 0).
SyntheticSpec parse_synthetic_spec(const std::string& spec);

// Generates every tensor now, on all hardware threads, into one owned arena. The source is
// "synthetic:PRESET", with "@SEED" when the seed is not 0.
ModelWeights make_synthetic(const std::string& preset, uint64_t seed = 0);

}  // namespace spindle
