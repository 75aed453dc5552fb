// Hand-built qwen3 and qwen3_moe models with widths the synthetic presets do not have, for the GPU
// executors' equivalence tests (their rows at odd lengths and unaligned addresses, or longer
// than one 256-element block), or with values near the bottom of f32's range.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "host/checkpoint.h"
#include "host/graph_builder.h"
#include "host/synthetic.h"
#include "ops/bf16.h"

namespace spindle::test {

// A tensor element's value, from its tensor's name and shape and the model's generator.
using ValueOf = std::function<float(const std::string& tensor, const std::vector<uint64_t>& shape, std::mt19937& rng)>;

// Norm weights near 1, the rest small.
inline float near_one_or_small(const std::string&, const std::vector<uint64_t>& shape, std::mt19937& rng) {
  std::uniform_real_distribution<float> small(-0.2f, 0.2f);
  return (shape.size() == 1 ? 1.0f : 0.0f) + small(rng);
}

// Weights for `config` (validated as `name`), its tensors in one arena, each at a multiple of
// `align` bytes after the last, their values from value_of.
inline ModelWeights weights_for(const std::string& name, const ModelConfig& config, uint64_t align,
                                const ValueOf& value_of = near_one_or_small) {
  ModelWeights w;
  w.source = name;
  w.config = config;
  validate(w.config, w.source);
  uint64_t elements = 0;
  for (const TensorSpec& t : expected_tensors(w.config)) {
    elements = (elements * sizeof(bf16) + align - 1) / align * align / sizeof(bf16);
    w.tensors[t.name] = TensorRef{0, elements * sizeof(bf16), t.shape};
    elements += w.tensors[t.name].elements();
  }
  auto values = std::make_shared<std::vector<bf16>>(elements);
  std::mt19937 rng(7);
  for (const auto& [name, ref] : w.tensors)
    for (uint64_t i = 0; i < ref.elements(); ++i)
      (*values)[ref.offset / sizeof(bf16) + i] = f32_to_bf16(value_of(name, ref.shape, rng));
  w.arenas = {{name, values, reinterpret_cast<const uint8_t*>(values->data()), elements * sizeof(bf16)}};
  return w;
}

// A tiny-shaped qwen3 model with the given widths (kv_heads 0: tiny's), its tensors in one
// arena, each at a multiple of `align` bytes after the last.
inline ModelWeights model_with(const std::string& name, uint32_t hidden, uint32_t head_dim, uint32_t intermediate,
                               uint64_t align, const ValueOf& value_of = near_one_or_small, uint32_t kv_heads = 0) {
  ModelConfig c = synthetic_config("tiny");
  if (kv_heads) c.n_kv_heads = kv_heads;
  c.hidden = hidden;
  c.head_dim = head_dim;
  c.intermediate = intermediate;
  c.vocab = 200;
  return weights_for(name, c, align, value_of);
}

// tiny-moe with E experts, k a token; `tied`: the router's rows in equal pairs (experts 2m and
// 2m + 1), so that every logit ties with its pair's and the choice must take the lower expert
// first.
inline ModelWeights experts_model(const std::string& name, uint32_t E, uint32_t k, bool tied) {
  ModelConfig c = synthetic_config("tiny-moe");
  c.num_experts = E;
  c.experts_per_tok = k;
  if (!tied) return weights_for(name, c, 16);
  auto next = std::make_shared<uint64_t>(0);  // the router element weights_for asks for next
  auto value_of = [next](const std::string& tensor, const std::vector<uint64_t>& shape, std::mt19937& rng) {
    const float value = near_one_or_small(tensor, shape, rng);
    if (!tensor.ends_with(".mlp.gate.weight")) return value;
    const uint64_t i = (*next)++ % (shape[0] * shape[1]), pair = i / shape[1] / 2, column = i % shape[1];
    return 0.2f * std::sin(float(pair * 131 + column * 7));
  };
  return weights_for(name, c, 16, value_of);
}

// tiny-moe with 37 experts, 5 a token: counts that are no multiple of a warp's lanes, of four
// or of each other, so the router's tiles run their partial rounds (a group of 32 experts cut
// short, the vectorised sum's tail, the slots' lanes).
inline ModelWeights odd_experts_model() { return experts_model("odd-experts", 37, 5, false); }
inline ModelWeights tied_experts_model() { return experts_model("tied-experts", 37, 5, true); }

// A model whose rows the GPU tiles cannot read 16 bytes at a time: hidden 60, head_dim 12 and
// intermediate 100 are not multiples of 8 elements, and the tensors lie back to back, so most
// start off a 16-byte boundary.
inline ModelWeights unaligned_model() { return model_with("unaligned", 60, 12, 100, sizeof(bf16)); }

// A model whose LM-head dots sum exact products to f32 subnormals, where a dot that fused
// inexact products, or flushed subnormals, would differ from the host (docs/numerics.md;
// every device dot adds its products with the same add_product). The final norm's weights are
// 2^-60 and the head's rows 2^-66 times magnitudes in [0.1, 0.2] with random signs. The
// embedding's magnitudes are in [0.1, 0.2] as well, and o_proj's and down's rows are 2^-66
// times that, so the residual stream keeps the token's embedding (their outputs are far below
// half its bf16 ulp), whose elements normalise to at least 0.1 / 0.2 = 0.5. So every product
// is at least 0.5 * 0.1 * 2^-60 * 0.1 * 2^-66 > 2^-134, and sums of 512 of them stay near
// 2^-126.
inline ModelWeights tiny_sums_model() {
  const auto value_of = [](const std::string& tensor, const std::vector<uint64_t>& shape, std::mt19937& rng) {
    const auto has = [&](const char* part) { return tensor.find(part) != std::string::npos; };
    std::uniform_real_distribution<float> magnitude(0.1f, 0.2f);
    const auto bounded = [&](float scale) { return (rng() & 1u ? scale : -scale) * magnitude(rng); };
    if (tensor == "model.norm.weight") return bounded(std::ldexp(1.0f, -60));
    if (has("o_proj") || has("down_proj") || has("lm_head")) return bounded(std::ldexp(1.0f, -66));
    if (has("embed_tokens")) return bounded(1.0f);
    return near_one_or_small(tensor, shape, rng);
  };
  return model_with("tiny-sums", 512, 16, 128, 16, value_of);
}

// A model whose projection inputs are whole multiples of 1024 elements (hidden 1024,
// intermediate 2048), so the persistent kernel's preloaded tasks read their rows with
// warp_dot_rows_shared, one round (K = 1024) or two (down, K = 2048).
inline ModelWeights shared_dot_model() { return model_with("shared-dot", 1024, 16, 2048, 16); }

// The graph the hand-built models are checked with: 32 positions in 2 attention chunks.
inline Graph short_context_graph(const ModelWeights& w) {
  BuildOptions b;
  b.context = 32;
  b.attn_chunks = 2;
  return build_decode_graph(w, b);
}

}  // namespace spindle::test
