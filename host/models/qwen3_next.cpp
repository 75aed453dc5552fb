// qwen3_next (spec §3.3): Gated DeltaNet layers with Qwen3-Next's fused, key-head-grouped input
// projections and gated attention layers, as `layer_types` says; routed experts with a gated
// shared expert in the MoE layers, a dense MLP in the others (mlp_only_layers,
// decoder_sparse_step); zero-centred RMSNorms.
#include <optional>

#include "host/models/dense_mlp.h"
#include "host/models/families.h"
#include "host/models/hybrid_mixer.h"
#include "host/models/moe_block.h"

namespace spindle {
namespace {

class Qwen3NextLayers : public DecoderLayers {
 public:
  Qwen3NextLayers(GraphEmitter& e, const DecoderViews& v)
      : config_(e.weights().config), mixer_(e, v), experts_(e, v, config_.norm_topk_prob) {
    if (has_dense_layer(config_)) mlp_.emplace(e, v, config_.intermediate);
  }
  Stage emit(uint32_t l, const Stage& prev) override {
    const Stage mixer = mixer_.emit(l, prev);
    return is_moe_layer(config_, l) ? experts_.emit(l, mixer) : mlp_->emit(l, mixer);
  }

 private:
  const ModelConfig& config_;
  HybridMixer mixer_;
  MoeBlock experts_;
  std::optional<DenseMlp> mlp_;
};

std::vector<TensorSpec> qwen3_next_tensors(const ModelConfig& c) {
  return decoder_tensors(c, [&](uint32_t l, std::vector<TensorSpec>& out) {
    HybridMixer::tensors(c, l, out);
    if (is_moe_layer(c, l)) MoeBlock::tensors(c, l, out);
    else DenseMlp::tensors(c, l, out);
  });
}

std::unique_ptr<DecoderLayers> qwen3_next_layers(GraphEmitter& e, const DecoderViews& v) {
  return std::make_unique<Qwen3NextLayers>(e, v);
}

}  // namespace

const FamilyModel kQwen3NextModel{qwen3_next_tensors, qwen3_next_layers};

}  // namespace spindle
