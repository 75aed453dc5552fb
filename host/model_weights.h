// A model's weights in host memory, by canonical tensor name ("model.layers.3.mlp.up_proj.weight",
// with the VL prefix "model.language_model." folded to "model.", and "lm_head.weight"
// resolving to the embedding when tied). Every tensor is bf16 here: other dtypes in a
// checkpoint are converted at load, as HF casts to the model dtype.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "host/model_config.h"

namespace spindle {

// One contiguous block of host memory (an mmapped shard's data section, or an owned buffer).
// `data` is null in weights loaded with LoadOptions::fill_host = false: the arena then has its
// size and its tensors their places, but no bytes on the host.
struct HostArena {
  std::string name;
  std::shared_ptr<const void> owner;  // keeps the mapping or buffer alive
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;
};

struct TensorRef {
  uint32_t arena = 0;     // index into ModelWeights::arenas
  uint64_t offset = 0;    // bytes
  std::vector<uint64_t> shape;
  uint64_t elements() const;
};

struct ModelWeights {
  ModelConfig config;
  std::string source;                 // "synthetic:PRESET" or the checkpoint directory
  std::vector<HostArena> arenas;
  std::map<std::string, TensorRef> tensors;

  // The tensor, checked against the expected shape; throws spindle::Error naming the tensor
  // when it is missing or its shape differs.
  const TensorRef& get(const std::string& name, const std::vector<uint64_t>& shape) const;
  uint64_t total_bytes() const;
  // True when every arena's bytes are in host memory (see LoadOptions::fill_host).
  bool in_host_memory() const;
};

struct LoadOptions {
  // Synthetic presets: false skips generating the weights on the host. The result has every
  // tensor and arena size but null arena data, for an executor that generates the values
  // itself (the CUDA executor does, on the device); host executors refuse it. Checkpoints
  // are mapped, not read, so this changes nothing for them.
  bool fill_host = true;
};

// `synthetic:PRESET` or a checkpoint directory.
ModelWeights load_model(const std::string& spec, const LoadOptions& opt = {});

}  // namespace spindle
