// qwen3_moe (spec §3.2): standard attention in every layer; routed experts (no shared
// expert) in the MoE layers, a dense MLP in the others (mlp_only_layers, decoder_sparse_step).
#include <optional>

#include "host/models/attention_block.h"
#include "host/models/dense_mlp.h"
#include "host/models/families.h"
#include "host/models/moe_block.h"

namespace spindle {
namespace {

class Qwen3MoeLayers : public DecoderLayers {
 public:
  Qwen3MoeLayers(GraphEmitter& e, const DecoderViews& v)
      : config_(e.weights().config), attention_(e, v), experts_(e, v, config_.norm_topk_prob) {
    if (has_dense_layer(config_)) mlp_.emplace(e, v, config_.intermediate);
  }
  Stage emit(uint32_t l, const Stage& prev) override {
    const Stage attention = attention_.emit(l, prev);
    return is_moe_layer(config_, l) ? experts_.emit(l, attention) : mlp_->emit(l, attention);
  }

 private:
  const ModelConfig& config_;
  AttentionBlock attention_;
  MoeBlock experts_;
  std::optional<DenseMlp> mlp_;
};

std::vector<TensorSpec> qwen3_moe_tensors(const ModelConfig& c) {
  return decoder_tensors(c, [&](uint32_t l, std::vector<TensorSpec>& out) {
    AttentionBlock::tensors(c, l, out);
    if (is_moe_layer(c, l)) MoeBlock::tensors(c, l, out);
    else DenseMlp::tensors(c, l, out);
  });
}

std::unique_ptr<DecoderLayers> qwen3_moe_layers(GraphEmitter& e, const DecoderViews& v) {
  return std::make_unique<Qwen3MoeLayers>(e, v);
}

}  // namespace

const FamilyModel kQwen3MoeModel{qwen3_moe_tensors, qwen3_moe_layers};

}  // namespace spindle
