// The tiny synthetic model and its graph, built once per test program.
#pragma once
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
