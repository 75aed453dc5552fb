// The dense SwiGLU MLP (spec §1.5) of a decoder layer, added into the residual: GATE_UP then
// down, or with BuildOptions::fused_mlp one stage of MLP gang tasks (docs/two-hop-layer.md).
#pragma once
#include <cstdint>
#include <vector>

#include "host/models/family.h"

namespace spindle {

class DenseMlp {
 public:
  // Allocates the buffers every layer's MLP shares; `intermediate` is its width.
  DenseMlp(GraphEmitter& e, const DecoderViews& v, uint32_t intermediate);
  // Layer l's MLP, normed by its post-attention norm, waiting for `prev`; returns its last stage.
  Stage emit(uint32_t l, const Stage& prev);

  // Layer l's tensors (post-attention norm included), appended to `out`.
  static void tensors(const ModelConfig& c, uint32_t l, std::vector<TensorSpec>& out);

 private:
  GraphEmitter& e_;
  DecoderViews v_;
  uint32_t I_;
  GemvSplit fused_;
  uint32_t act_ = 0, partials_ = 0, arrivals_ = 0;
};

}  // namespace spindle
