// The routed-experts block of an MoE layer (spec §6.1, §6.2), added into the residual: the
// router's logits and choice of k experts (ROUTER), the chosen experts' gate and up rows
// (EXPERT_GATE_UP), and their down rows summed in expert order into the residual
// (EXPERT_DOWN): three stages, the experts' rows split over the stage's tasks like a dense
// projection's, so that the k experts' rows fill the machine. With a shared expert (spec
// §6.3), its gate and up rows (GATE_UP) and its gate's logit (a one-row GEMV) join the second
// stage, waiting for the attention alone, so that they stream while the router runs; its down
// rows and gate join the sum (EXPERT_DOWN_SHARED). With BuildOptions::expert_down_split, or
// over several devices, the down dots are summed from pieces (EXPERT_DOWN_PIECE,
// EXPERT_DOWN_SUM: docs/multi-device.md); expert parallel, each device computes the slots of
// the experts it holds whole, and the sum adds the slots' exchanged rows (the shared expert's
// down dots in a piece a device, as over devices without expert parallel).
#pragma once
#include <cstdint>
#include <vector>

#include "host/models/family.h"

namespace spindle {

class MoeBlock {
 public:
  // Allocates the buffers every MoE layer shares; `normalise`: renormalise the top k weights.
  MoeBlock(GraphEmitter& e, const DecoderViews& v, bool normalise);
  // Layer l's experts, normed by its post-attention norm, waiting for `prev`; returns its last
  // stage.
  Stage emit(uint32_t l, const Stage& prev);

  // Layer l's tensors (post-attention norm included, experts fused), appended to `out`.
  static void tensors(const ModelConfig& c, uint32_t l, std::vector<TensorSpec>& out);

 private:
  Stage emit_down_pieces(uint32_t l, const Stage& s_gu, uint32_t down, uint32_t wd_shared);

  GraphEmitter& e_;
  DecoderViews v_;
  bool shared_;
  GemvSplit down_split_;    // the routed down dots' pieces, or none
  GemvSplit shared_split_;  // the shared expert's down dots' pieces, or none
  uint32_t params_, logits_, routing_, act_, shared_act_ = 0, shared_logit_ = 0;
  // Expert parallel: device d's params, holding its experts; empty otherwise.
  std::vector<uint32_t> held_params_;
};

}  // namespace spindle
