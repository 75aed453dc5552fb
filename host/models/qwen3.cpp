// qwen3 (spec §3.1): standard attention and a dense MLP in every layer.
#include "host/models/attention_block.h"
#include "host/models/dense_mlp.h"
#include "host/models/families.h"
#include "host/models/tensor_names.h"

namespace spindle {
namespace {

class Qwen3Layers : public DecoderLayers {
 public:
  Qwen3Layers(GraphEmitter& e, const DecoderViews& v)
      : attention_(e, v), mlp_(e, v, e.weights().config.intermediate) {}
  Stage emit(uint32_t l, const Stage& prev) override { return mlp_.emit(l, attention_.emit(l, prev)); }

 private:
  AttentionBlock attention_;
  DenseMlp mlp_;
};

std::vector<TensorSpec> qwen3_tensors(const ModelConfig& c) {
  return decoder_tensors(c, [&](uint32_t l, std::vector<TensorSpec>& out) {
    AttentionBlock::tensors(c, l, out);
    DenseMlp::tensors(c, l, out);
  });
}

std::unique_ptr<DecoderLayers> qwen3_layers(GraphEmitter& e, const DecoderViews& v) {
  return std::make_unique<Qwen3Layers>(e, v);
}

}  // namespace

const FamilyModel kQwen3Model{qwen3_tensors, qwen3_layers};

}  // namespace spindle
