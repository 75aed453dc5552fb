// Synthetic models: real architectures with weights from a counter-based hash
// (host/synthetic_values.h), so any executor or device can regenerate them from
// (preset, seed) and a large model costs no disk.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "host/model_weights.h"
#include "host/synthetic_values.h"

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

// Where make_synthetic puts the bytes: generated now into a host arena, or nowhere (the
// arenas keep their sizes and names, every TensorRef is set, but HostArena::data is null),
// for an executor that generates the weights itself from synthetic_plan (the CUDA one does,
// on the device). Host executors refuse unfilled weights.
enum class SyntheticFill { Host, None };

// One generated tensor: element i (i < elements) of the arena's bf16 run starting at `offset`
// is synth::value(seed, key, i, init.scale, init.offset); elements i in [elements, span) are
// the zero padding up to the next tensor (or the arena's end), so the whole arena is defined.
struct SyntheticTensor {
  std::string name;             // canonical
  std::vector<uint64_t> shape;
  uint64_t key = 0;             // synth::tensor_key(name)
  synth::Init init{};           // from the role table of synthetic_values.h
  uint64_t offset = 0;          // bytes from the start of the arena; 64-byte aligned
  uint64_t elements = 0;        // bf16 values of the tensor
  uint64_t span = 0;            // bf16 slots up to the next tensor: elements + padding
};

// How a preset's single arena ("synthetic") is laid out and filled: the one description that
// make_synthetic, the CUDA generator and the tests all read. Tensors are in arena order and
// tile it exactly (each starts where the previous span ends); a tied lm_head is not listed,
// it aliases the embedding.
struct SyntheticPlan {
  std::string source;           // "synthetic:PRESET", with "@SEED" when the seed is not 0
  ModelConfig config;
  uint64_t seed = 0;
  uint64_t arena_bytes = 0;
  std::vector<SyntheticTensor> tensors;
};

// Throws spindle::Error for an unknown preset or a family without a tensor list.
SyntheticPlan synthetic_plan(const std::string& preset, uint64_t seed = 0);

// The preset's weights, one arena laid out by synthetic_plan. With SyntheticFill::Host every
// tensor is generated now, on all hardware threads (padding zeroed).
ModelWeights make_synthetic(const std::string& preset, uint64_t seed = 0,
                            SyntheticFill fill = SyntheticFill::Host);

// The plan of weights made by make_synthetic (either fill): their source names the preset and
// seed. Throws spindle::Error when `w` is not synthetic or its layout differs from the plan's.
SyntheticPlan synthetic_plan_of(const ModelWeights& w);

}  // namespace spindle
