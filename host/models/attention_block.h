// The attention block (spec §5): the normed hidden state's q, k and v rows, attention per (kv
// head, q-head split, chunk) with the q/k norms, RoPE and the KV append, and o_proj added into
// the residual. Standard attention for qwen3 and qwen3_moe; the hybrid families' gated
// attention (each q head's output gate beside it in q_proj's rows, GATED_ATTENTION) for the
// others. Its tasks and their schedule are docs/isa.md's.
#pragma once
#include <cstdint>
#include <vector>

#include "host/models/family.h"

namespace spindle {

class AttentionBlock {
 public:
  // Allocates the buffers every layer's attention shares.
  AttentionBlock(GraphEmitter& e, const DecoderViews& v);
  // Layer l's attention, waiting for `prev`; returns its o_proj stage.
  Stage emit(uint32_t l, const Stage& prev);

  // Layer l's tensors, appended to `out`.
  static void tensors(const ModelConfig& c, uint32_t l, std::vector<TensorSpec>& out);

 private:
  GraphEmitter& e_;
  DecoderViews v_;
  bool gated_;
  uint32_t q_rows_, q_proj_rows_, kv_rows_, qkv_rows_, kv_cache_rows_, kv_head_tiles_;
  uint32_t qkv_, q_part_, k_part_, v_part_, partials_, attn_out_, arrivals_;
  bool o_pieces_;
  uint32_t o_split_word_, o_piece_rows_, o_partials_ = 0, o_arrivals_ = 0;
};

}  // namespace spindle
