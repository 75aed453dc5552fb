// qwen3_5 (spec §3.4): Gated DeltaNet and gated attention layers as `layer_types` says, a dense
// MLP in every layer, zero-centred RMSNorms.
#include "host/models/dense_mlp.h"
#include "host/models/families.h"
#include "host/models/hybrid_mixer.h"

namespace spindle {
namespace {

class Qwen3_5Layers : public DecoderLayers {
 public:
  Qwen3_5Layers(GraphEmitter& e, const DecoderViews& v) : mixer_(e, v), mlp_(e, v, e.weights().config.intermediate) {}
  Stage emit(uint32_t l, const Stage& prev) override { return mlp_.emit(l, mixer_.emit(l, prev)); }

 private:
  HybridMixer mixer_;
  DenseMlp mlp_;
};

std::vector<TensorSpec> qwen3_5_tensors(const ModelConfig& c) {
  return decoder_tensors(c, [&](uint32_t l, std::vector<TensorSpec>& out) {
    HybridMixer::tensors(c, l, out);
    DenseMlp::tensors(c, l, out);
  });
}

std::unique_ptr<DecoderLayers> qwen3_5_layers(GraphEmitter& e, const DecoderViews& v) {
  return std::make_unique<Qwen3_5Layers>(e, v);
}

}  // namespace

const FamilyModel kQwen3_5Model{qwen3_5_tensors, qwen3_5_layers};

}  // namespace spindle
