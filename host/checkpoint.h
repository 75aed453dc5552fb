// Hugging Face checkpoint directories: config.json plus model.safetensors, or shards listed by
// model.safetensors.index.json.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "host/model_weights.h"

namespace spindle {

struct TensorSpec {
  std::string name;  // canonical ("model.…", "lm_head.weight")
  std::vector<uint64_t> shape;
};

// Every tensor a model of this config has, with its shape (spec §3), lm_head included even
// when tied, experts fused (host/models/tensor_names.h): its family's list (host/models/), or
// an empty one for a family the builder does not support yet.
std::vector<TensorSpec> expected_tensors(const ModelConfig& c);

// Loads a checkpoint directory. bf16 tensors stay in the mapped shards (one arena each);
// F16 and F32 tensors are rounded to bf16 (nearest even) into one more, owned arena.
// Names are canonicalised ("model.language_model." → "model."; "mtp.*" and "model.visual.*"
// dropped), per-expert tensors (model.layers.{l}.mlp.experts.{e}.{gate,up,down}_proj.weight)
// are fused into the canonical mlp.experts.gate_up_proj / down_proj in the owned arena, a tied
// lm_head aliases the embedding, and the expected tensors are checked.
ModelWeights load_checkpoint(const std::filesystem::path& dir);

// Writes `w` as an HF checkpoint: config.json and one bf16 model.safetensors, lm_head left out
// when tied, and returns the paths of the files written. load_checkpoint(dir) gives back
// bit-identical tensors.
std::vector<std::filesystem::path> write_hf_checkpoint(const ModelWeights& w, const std::filesystem::path& dir);

}  // namespace spindle
