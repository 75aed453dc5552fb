// Hand-built qwen3 models with widths the synthetic presets do not have, for the GPU
// executors' equivalence tests (their rows at odd lengths and unaligned addresses, or longer
// than one 256-element block).
#pragma once
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "host/checkpoint.h"
#include "host/graph_builder.h"
#include "host/synthetic.h"
#include "ops/bf16.h"

namespace spindle::test {

// A tiny-shaped qwen3 model with the given widths, its tensors in one arena, each at a
// multiple of `align` bytes after the last. Norm weights near 1, the rest small.
inline ModelWeights model_with(const std::string& name, uint32_t hidden, uint32_t head_dim, uint32_t intermediate,
                               uint64_t align) {
  ModelWeights w;
  w.source = name;
  w.config = synthetic_config("tiny");
  w.config.hidden = hidden;
  w.config.head_dim = head_dim;
  w.config.intermediate = intermediate;
  w.config.vocab = 200;
  validate(w.config, w.source);
  uint64_t elements = 0;
  for (const TensorSpec& t : expected_tensors(w.config)) {
    elements = (elements * sizeof(bf16) + align - 1) / align * align / sizeof(bf16);
    w.tensors[t.name] = TensorRef{0, elements * sizeof(bf16), t.shape};
    elements += w.tensors[t.name].elements();
  }
  auto values = std::make_shared<std::vector<bf16>>(elements);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> small(-0.2f, 0.2f);
  for (const auto& [name, ref] : w.tensors)
    for (uint64_t i = 0; i < ref.elements(); ++i)
      (*values)[ref.offset / sizeof(bf16) + i] = f32_to_bf16((ref.shape.size() == 1 ? 1.0f : 0.0f) + small(rng));
  w.arenas = {{name, values, reinterpret_cast<const uint8_t*>(values->data()), elements * sizeof(bf16)}};
  return w;
}

// A model whose rows the GPU tiles cannot read 16 bytes at a time: hidden 60, head_dim 12 and
// intermediate 100 are not multiples of 8 elements, and the tensors lie back to back, so most
// start off a 16-byte boundary.
inline ModelWeights unaligned_model() { return model_with("unaligned", 60, 12, 100, sizeof(bf16)); }

// The graph the hand-built models are checked with: 32 positions in 2 attention chunks.
inline Graph short_context_graph(const ModelWeights& w) {
  BuildOptions b;
  b.context = 32;
  b.attn_chunks = 2;
  return build_decode_graph(w, b);
}

}  // namespace spindle::test
