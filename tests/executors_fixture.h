// The tiny synthetic model and its graph, built once per test program, and the decode-and-
// compare helpers that every executor's equivalence tests share.
#pragma once
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "host/decode.h"
#include "host/graph_builder.h"
#include "host/model_weights.h"

struct TinyModel {
  spindle::ModelWeights weights;
  spindle::Graph graph;
};

inline const TinyModel& tiny_model() {
  static const TinyModel m = [] {
    TinyModel t{spindle::load_model("synthetic:tiny"), {}};
    spindle::BuildOptions o;
    o.context = 64;
    o.attn_chunks = 3;
    t.graph = spindle::build_decode_graph(t.weights, o);
    return t;
  }();
  return m;
}

// A decode's tokens and its last step's logits.
struct Decoded {
  std::vector<uint32_t> tokens;
  std::vector<float> logits;
};

inline Decoded run_decode(spindle::Executor& ex, const spindle::Graph& g, const std::vector<uint32_t>& prompt,
                          uint32_t new_tokens) {
  Decoded d{spindle::decode(ex, g, prompt, new_tokens, {}).tokens, {}};
  d.logits.assign(ex.logits().begin(), ex.logits().end());
  return d;
}

inline Decoded run_decode(const spindle::Graph& g, const spindle::ModelWeights& w, const spindle::ExecutorOptions& opt,
                          const std::vector<uint32_t>& prompt, uint32_t new_tokens) {
  return run_decode(*spindle::make_executor(g, w, opt), g, prompt, new_tokens);
}

// Bit for bit: the same tokens and the same logits' bytes.
inline void check_same(const Decoded& got, const Decoded& expect) {
  CHECK(got.tokens == expect.tokens);
  REQUIRE(got.logits.size() == expect.logits.size());
  CHECK(std::memcmp(got.logits.data(), expect.logits.data(), expect.logits.size() * sizeof(float)) == 0);
}
