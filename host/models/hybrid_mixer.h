// The token mixer of the hybrid families' layers (spec §2): a Gated DeltaNet block or gated
// attention, as the config's layer_types says.
#pragma once
#include <cstdint>
#include <vector>

#include "host/models/attention_block.h"
#include "host/models/gdn_block.h"

namespace spindle {

class HybridMixer {
 public:
  HybridMixer(GraphEmitter& e, const DecoderViews& v) : config_(e.weights().config), attention_(e, v), gdn_(e, v) {}
  // Layer l's mixer, waiting for `prev`; returns its last stage.
  Stage emit(uint32_t l, const Stage& prev) {
    return linear(config_, l) ? gdn_.emit(l, prev) : attention_.emit(l, prev);
  }
  // Layer l's tensors (its input norm included), appended to `out`.
  static void tensors(const ModelConfig& c, uint32_t l, std::vector<TensorSpec>& out) {
    if (linear(c, l)) GdnBlock::tensors(c, l, out);
    else AttentionBlock::tensors(c, l, out);
  }

 private:
  static bool linear(const ModelConfig& c, uint32_t l) { return c.layer_types[l] == LayerType::LinearAttention; }

  const ModelConfig& config_;
  AttentionBlock attention_;
  GdnBlock gdn_;
};

}  // namespace spindle
