// SpGraphParams' fields by name: the graph file's metadata (tasks/graph_file.cpp) stores them
// so, and a saved graph is checked against a model's by them (host/replay_check.h).
#pragma once
#include <cstdint>

#include "tasks/graph_params.h"

namespace spindle {

template <class T>
struct GraphParamField {
  const char* name;
  T SpGraphParams::*field;
  // A dimension of the model the graph was built for; the others are the build's (the context,
  // the token arrays' capacity and how attention is split), which a replay may differ in.
  bool of_model;
};

inline constexpr GraphParamField<uint32_t> kU32GraphParams[] = {
    {"hidden", &SpGraphParams::hidden, true},
    {"n_layers", &SpGraphParams::n_layers, true},
    {"n_heads", &SpGraphParams::n_heads, true},
    {"n_kv_heads", &SpGraphParams::n_kv_heads, true},
    {"head_dim", &SpGraphParams::head_dim, true},
    {"rotary_dim", &SpGraphParams::rotary_dim, true},
    {"intermediate", &SpGraphParams::intermediate, true},
    {"vocab", &SpGraphParams::vocab, true},
    {"context", &SpGraphParams::context, false},
    {"attn_chunks", &SpGraphParams::attn_chunks, false},
    {"attn_q_splits", &SpGraphParams::attn_q_splits, false},
    {"attn_kv_share", &SpGraphParams::attn_kv_share, false},
    {"norm_kind", &SpGraphParams::norm_kind, true},
    {"max_steps", &SpGraphParams::max_steps, false},
};
inline constexpr GraphParamField<float> kF32GraphParams[] = {
    {"rms_eps", &SpGraphParams::rms_eps, true},
    {"rope_theta", &SpGraphParams::rope_theta, true},
};

}  // namespace spindle
