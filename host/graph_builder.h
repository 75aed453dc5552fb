// Turns one decode step of a model into a task graph (see docs/isa.md for the stages).
#pragma once
#include <cstdint>

#include "host/model_weights.h"
#include "tasks/graph.h"

namespace spindle {

struct BuildOptions {
  uint32_t context = 0;        // KV capacity in positions; 0 = the config's max_position
  uint32_t max_steps = 0;      // forced/out token capacity; 0 = context
  uint32_t attn_chunks = 4;    // chunks per kv head in attention
  uint32_t rows_per_tile = 0;  // rows per GEMV task; 0 = chosen from the shapes
};

// Throws spindle::Error when the family is not one the builder supports yet, or when the
// weights do not match the config.
Graph build_decode_graph(const ModelWeights& w, const BuildOptions& opt);

}  // namespace spindle
