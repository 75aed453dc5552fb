// The families the builder supports, and what their descriptions share.
#pragma once
#include <cstdint>
#include <vector>

#include "host/models/family.h"
#include "host/models/tensor_names.h"

namespace spindle {

extern const FamilyModel kQwen3Model;     // host/models/qwen3.cpp
extern const FamilyModel kQwen3MoeModel;  // host/models/qwen3_moe.cpp
extern const FamilyModel kQwen3NextModel;    // host/models/qwen3_next.cpp
extern const FamilyModel kQwen3_5Model;       // host/models/qwen3_5.cpp
extern const FamilyModel kQwen3_5MoeModel;    // host/models/qwen3_5_moe.cpp

// The embedding, each layer's tensors as `layer_tensors(l, out)` appends them, the final norm
// and the LM head.
template <class F>
std::vector<TensorSpec> decoder_tensors(const ModelConfig& c, F&& layer_tensors) {
  const uint64_t H = c.hidden, V = c.vocab;
  std::vector<TensorSpec> t;
  t.push_back({names::kEmbed, {V, H}});
  for (uint32_t l = 0; l < c.n_layers; ++l) layer_tensors(l, t);
  t.push_back({names::kFinalNorm, {H}});
  t.push_back({names::kLmHead, {V, H}});
  return t;
}

}  // namespace spindle
