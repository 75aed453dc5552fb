// qwen3_5 (spec §3.4): Gated DeltaNet and gated attention layers as `layer_types` says, a dense
// MLP in every layer, zero-centred RMSNorms.
#include "host/models/attention_block.h"
#include "host/models/dense_mlp.h"
#include "host/models/families.h"
#include "host/models/gdn_block.h"

namespace spindle {
namespace {

class Qwen3_5Layers : public DecoderLayers {
 public:
  Qwen3_5Layers(GraphEmitter& e, const DecoderViews& v)
      : config_(e.weights().config), attention_(e, v), gdn_(e, v), mlp_(e, v, config_.intermediate) {}
  Stage emit(uint32_t l, const Stage& prev) override {
    const bool linear = config_.layer_types[l] == LayerType::LinearAttention;
    return mlp_.emit(l, linear ? gdn_.emit(l, prev) : attention_.emit(l, prev));
  }

 private:
  const ModelConfig& config_;
  AttentionBlock attention_;
  GdnBlock gdn_;
  DenseMlp mlp_;
};

std::vector<TensorSpec> qwen3_5_tensors(const ModelConfig& c) {
  return decoder_tensors(c, [&](uint32_t l, std::vector<TensorSpec>& out) {
    if (c.layer_types[l] == LayerType::LinearAttention) GdnBlock::tensors(c, l, out);
    else AttentionBlock::tensors(c, l, out);
    DenseMlp::tensors(c, l, out);
  });
}

std::unique_ptr<DecoderLayers> qwen3_5_layers(GraphEmitter& e, const DecoderViews& v) {
  return std::make_unique<Qwen3_5Layers>(e, v);
}

}  // namespace

const FamilyModel kQwen3_5Model{qwen3_5_tensors, qwen3_5_layers};

}  // namespace spindle
