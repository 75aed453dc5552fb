// One place per model family: the tensors a model of the family has and the tasks each of its
// decoder layers is emitted as. The builder (host/graph_builder.cpp) emits what every family
// shares (the embedding, the final norm, the LM head, the sampler) and asks the family for the
// layers between.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "host/checkpoint.h"
#include "host/graph_emitter.h"
#include "host/model_config.h"

namespace spindle {

// The views every layer reads or writes, made by the builder before the layers.
struct DecoderViews {
  uint32_t hidden;  // [H] bf16: the residual stream
  uint32_t rope;    // [context, R] bf16: the RoPE table
};

// The tasks of a family's decoder layers. Made once per graph: its constructor allocates the
// buffers the layers share (layer after layer, stages being barriers).
class DecoderLayers {
 public:
  virtual ~DecoderLayers() = default;
  // Emits layer l, whose first stage waits for `prev`; returns its last stage.
  virtual Stage emit(uint32_t l, const Stage& prev) = 0;
};

struct FamilyModel {
  // Every tensor a model of this config has (canonical names, spec §3), lm_head included even
  // when tied.
  std::vector<TensorSpec> (*tensors)(const ModelConfig& c);
  std::unique_ptr<DecoderLayers> (*layers)(GraphEmitter& e, const DecoderViews& v);
};

// The family's description.
const FamilyModel& family_model(Family f);

}  // namespace spindle
