// qwen3_5_moe (spec §3.4): Gated DeltaNet and gated attention layers as `layer_types` says,
// routed experts (always renormalised) with a gated shared expert in every layer,
// zero-centred RMSNorms.
#include "host/models/families.h"
#include "host/models/hybrid_mixer.h"
#include "host/models/moe_block.h"

namespace spindle {
namespace {

class Qwen3_5MoeLayers : public DecoderLayers {
 public:
  Qwen3_5MoeLayers(GraphEmitter& e, const DecoderViews& v) : mixer_(e, v), experts_(e, v, true) {}
  Stage emit(uint32_t l, const Stage& prev) override { return experts_.emit(l, mixer_.emit(l, prev)); }

 private:
  HybridMixer mixer_;
  MoeBlock experts_;
};

std::vector<TensorSpec> qwen3_5_moe_tensors(const ModelConfig& c) {
  return decoder_tensors(c, [&](uint32_t l, std::vector<TensorSpec>& out) {
    HybridMixer::tensors(c, l, out);
    MoeBlock::tensors(c, l, out);
  });
}

std::unique_ptr<DecoderLayers> qwen3_5_moe_layers(GraphEmitter& e, const DecoderViews& v) {
  return std::make_unique<Qwen3_5MoeLayers>(e, v);
}

}  // namespace

const FamilyModel kQwen3_5MoeModel{qwen3_5_moe_tensors, qwen3_5_moe_layers};

}  // namespace spindle
